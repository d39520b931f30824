#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// FusedAttention: Y[b, i] = softmax(scale * Q[b, i] . K[b, j] + mask[b, i, j] over j) @ V[b],
// one workgroup per (b, i) with b the flattened leading dims (at most two: batch and heads). The
// row's scores live in shared memory (at most 4096 keys), Q's row too (depth at most 256).
// KT = 1: K is given as K^T [b, d, j]. The mask (address 0: none) is read by element strides
// for the two leading dims, the row and the key (0 where it broadcasts).
layout(local_size_x = 256) in;
layout(constant_id = 0) const int KT = 0;
const int MAX_KEYS = 4096;
const int MAX_DEPTH = 256;

layout(buffer_reference, std430, buffer_reference_align = ELEM_BYTES) readonly buffer FloatsIn {
  ELEM v[];
};

layout(push_constant) uniform P {
  uint64_t q;
  uint64_t k;
  uint64_t v;
  uint64_t mask;
  uint64_t y;
  int sq, sk, d, dv, heads;
  int m_b0, m_b1, m_i, m_j;
  float scale;
  int rows;
} p;

shared float scores[MAX_KEYS];
shared float qrow[MAX_DEPTH];
shared float red[256];

float reduce(float v, bool is_max) {
  const uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = 128; s > 0; s >>= 1) {
    if (t < s) red[t] = is_max ? max(red[t], red[t + s]) : red[t] + red[t + s];
    barrier();
  }
  const float r = red[0];
  barrier();
  return r;
}

void main() {
  FloatsIn Q = FloatsIn(p.q);
  FloatsIn K = FloatsIn(p.k);
  FloatsIn V = FloatsIn(p.v);
  FloatsIn M = FloatsIn(p.mask);
  Floats Y = Floats(p.y);
  const int t = int(gl_LocalInvocationID.x);
  const int row = int(gl_WorkGroupID.x) + int(gl_WorkGroupID.y) * 65535;
  if (row >= p.rows) return;  // the whole workgroup: no barrier is left waiting
  const int b = row / p.sq, i = row - b * p.sq;
  const int b0 = b / p.heads, b1 = b - b0 * p.heads;
  for (int e = t; e < p.d; e += 256) qrow[e] = float(Q.v[row * p.d + e]) * p.scale;
  barrier();
  float best = -1.0 / 0.0;
  for (int j = t; j < p.sk; j += 256) {
    float s = 0.0;
    if (KT == 1) {
      for (int e = 0; e < p.d; ++e) s = fma(qrow[e], float(K.v[(b * p.d + e) * p.sk + j]), s);
    } else {
      for (int e = 0; e < p.d; ++e) s = fma(qrow[e], float(K.v[(b * p.sk + j) * p.d + e]), s);
    }
    if (p.mask != 0) s += float(M.v[b0 * p.m_b0 + b1 * p.m_b1 + i * p.m_i + j * p.m_j]);
    scores[j] = s;
    best = max(best, s);
  }
  best = reduce(best, true);
  float sum = 0.0;
  for (int j = t; j < p.sk; j += 256) {
    // A row masked everywhere (-inf) gives NaN, as the unfused ops do.
    const float e = exp_accurate(scores[j] - best);
    scores[j] = e;
    sum += e;
  }
  sum = reduce(sum, false);
  const float inv = 1.0 / sum;
  for (int e = t; e < p.dv; e += 256) {
    float acc = 0.0;
    for (int j = 0; j < p.sk; ++j) acc = fma(scores[j], float(V.v[(b * p.sk + j) * p.dv + e]), acc);
    Y.v[row * p.dv + e] = ELEM(acc * inv);
  }
}
