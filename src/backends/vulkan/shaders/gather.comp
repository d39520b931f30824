#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Gather along one axis: y[o, i, r] = x[o, idx[i], r] over outer o, index i and inner r. KIND 0:
// int32 indices checked and made non-negative at compile time; 1: int64 and 2: int32 indices
// that come at run time, checked here (checked_index: a bad one is recorded for the host).
layout(local_size_x = 256) in;
layout(constant_id = 0) const int KIND = 0;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer Ints {
  int v[];
};
layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Longs {
  int64_t v[];
};

layout(push_constant) uniform P {
  uint64_t x;
  uint64_t idx;
  uint64_t y;
  uint64_t record;
  uint outer, num, axis_n, inner;
  int where;
} p;

void main() {
  Floats X = Floats(p.x);
  Ints I = Ints(p.idx);
  Floats Y = Floats(p.y);
  const uint total = p.outer * p.num * p.inner;
  for (uint e = gl_GlobalInvocationID.x; e < total; e += gl_NumWorkGroups.x * 256) {
    const uint r = e % p.inner, rest = e / p.inner;
    const uint i = rest % p.num, o = rest / p.num;
    uint at;
    if (KIND == 0) {
      at = uint(I.v[i]);
    } else {
      int64_t raw;
      if (KIND == 1) {
        raw = Longs(p.idx).v[i];
      } else {
        // Widened through its unsigned bits: lavapipe sign-extends negative ints wrongly.
        const int r = I.v[i];
        raw = int64_t(uint64_t(uint(r))) - (r < 0 ? int64_t(4294967296l) : int64_t(0));
      }
      at = uint(checked_index(raw, int64_t(p.axis_n), p.record, p.where));
    }
    Y.v[e] = X.v[(o * p.axis_n + at) * p.inner + r];
  }
}
