#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Resize over up to two axes a and b of x seen as [outer, a, mid, b, inner]: each output blends
// taps_a x taps_b inputs with the per-axis taps worked out on the host (resize_taps.h). The table
// holds, in order, idx_a [out_a * taps_a] (int32), wt_a, idx_b [out_b * taps_b], wt_b (float32).
layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Ints {
  int v[];
};

layout(push_constant) uniform P {
  uint64_t x;
  uint64_t y;
  uint64_t table;
  uint n;
  uint outer, mid, inner;
  uint in_a, out_a, in_b, out_b;
  uint taps_a, taps_b;
} p;

void main() {
  Floats X = Floats(p.x);
  Floats Y = Floats(p.y);
  Float32s T = Float32s(p.table);
  Ints I = Ints(p.table);
  const uint wt_a = p.out_a * p.taps_a, idx_b = 2 * wt_a, wt_b = idx_b + p.out_b * p.taps_b;
  const uint stride = gl_NumWorkGroups.x * 256;
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += stride) {
    uint rest = e;
    const uint i = rest % p.inner;
    rest /= p.inner;
    const uint yb = rest % p.out_b;
    rest /= p.out_b;
    const uint m = rest % p.mid;
    rest /= p.mid;
    const uint ya = rest % p.out_a;
    const uint o = rest / p.out_a;
    float acc = 0.0;
    for (uint ja = 0; ja < p.taps_a; ++ja) {
      const float wa = T.v[wt_a + ya * p.taps_a + ja];
      const uint ia = uint(I.v[ya * p.taps_a + ja]);
      const uint row = ((o * p.in_a + ia) * p.mid + m) * p.in_b;
      float part = 0.0;
      for (uint jb = 0; jb < p.taps_b; ++jb) {
        const uint ib = uint(I.v[idx_b + yb * p.taps_b + jb]);
        part = fma(T.v[wt_b + yb * p.taps_b + jb], float(X.v[(row + ib) * p.inner + i]), part);
      }
      acc = fma(wa, part, acc);
    }
    Y.v[e] = ELEM(acc);
  }
}
