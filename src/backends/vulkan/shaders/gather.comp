#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Gather along one axis with indices checked and made non-negative at compile time (int32):
// y[o, i, r] = x[o, idx[i], r] over outer o, index i and inner r.
layout(local_size_x = 256) in;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Ints {
  int v[];
};

layout(push_constant) uniform P {
  uint64_t x;
  uint64_t idx;
  uint64_t y;
  uint outer, num, axis_n, inner;
} p;

void main() {
  Floats X = Floats(p.x);
  Ints I = Ints(p.idx);
  Floats Y = Floats(p.y);
  const uint total = p.outer * p.num * p.inner;
  for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * 256) {
    const uint r = e % p.inner, rest = e / p.inner;
    const uint i = rest % p.num, o = rest / p.num;
    Y.v[e] = X.v[(o * p.axis_n + uint(I.v[i])) * p.inner + r];
  }
}
