#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// y = a OP b under NumPy broadcasting: element strides of a and b per output dim (0 where
// broadcast), up to 6 dims. OP: 0 add, 1 sub, 2 mul, 3 div, 4 pow, 5 max, 6 min.
layout(local_size_x = 256) in;
layout(constant_id = 0) const int OP = 0;
layout(push_constant) uniform P {
  uint64_t a;
  uint64_t b;
  uint64_t y;
  uint n;
  uint rank;
  uint dims[6];
  uint sa[6];
  uint sb[6];
} p;

void main() {
  Floats a = Floats(p.a);
  Floats b = Floats(p.b);
  Floats y = Floats(p.y);
  uint stride = gl_NumWorkGroups.x * 256;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    uint rest = i, ia = 0, ib = 0;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
      uint q = rest / p.dims[d];
      uint c = rest - q * p.dims[d];
      rest = q;
      ia += c * p.sa[d];
      ib += c * p.sb[d];
    }
    y.v[i] = ELEM(apply_binary(OP, float(a.v[ia]), float(b.v[ib])));
  }
}
