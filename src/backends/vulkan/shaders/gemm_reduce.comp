#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// The second pass of a split-K product or convolution: Y[b, i, j] = act(sum_s W[s, b, i, j] +
// beta C[b, i, j] + D[b, i, j]), W the splits' partial sums (already scaled by alpha), C and D
// addressed by element strides (0 broadcasts) and optional (address 0), Y contiguous.
layout(local_size_x = 256) in;
layout(constant_id = 0) const int ACT = 0;

layout(push_constant) uniform P {
  uint64_t w;
  uint64_t c;
  uint64_t d;
  uint64_t y;
  int m, n, batch, splits;
  int c_bs, c_rs, c_cs;
  int d_bs, d_rs, d_cs;
  float beta, act_a, act_b;
} p;

void main() {
  Floats W = Floats(p.w);
  Floats C = Floats(p.c);
  Floats D = Floats(p.d);
  Floats Y = Floats(p.y);
  const int plane = p.m * p.n, total = p.batch * plane;
  const int stride = int(gl_NumWorkGroups.x) * 256;
  for (int e = int(gl_GlobalInvocationID.x); e < total; e += stride) {
    const int bz = e / plane, r = e - bz * plane, gm = r / p.n, gn = r - gm * p.n;
    float v = 0.0;
    for (int s = 0; s < p.splits; ++s) v += float(W.v[s * total + e]);
    if (p.c != 0) v += p.beta * float(C.v[bz * p.c_bs + gm * p.c_rs + gn * p.c_cs]);
    if (p.d != 0) v += float(D.v[bz * p.d_bs + gm * p.d_rs + gn * p.d_cs]);
    Y.v[e] = ELEM(apply_unary(ACT, v, p.act_a, p.act_b));
  }
}
