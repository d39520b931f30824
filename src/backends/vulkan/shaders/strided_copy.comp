#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// y[sum c_d ys_d] = x[sum c_d xs_d] over every index c of `dims` (up to 6): Transpose, Expand,
// Concat's pieces, Slice. Strides are signed element counts; x0 and y0 are the first element's
// index, so that with negative strides (Slice's negative steps) every index stays non-negative
// (x and y point at the lowest element read or written: a negative array index is undefined).
layout(local_size_x = 256) in;
layout(push_constant) uniform P {
  uint64_t x;
  uint64_t y;
  uint n;
  uint rank;
  uint dims[6];
  int xs[6];
  int ys[6];
  int x0;
  int y0;
} p;

void main() {
  Floats x = Floats(p.x);
  Floats y = Floats(p.y);
  uint stride = gl_NumWorkGroups.x * 256;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    uint rest = i;
    int ix = p.x0, iy = p.y0;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
      uint q = rest / p.dims[d];
      int c = int(rest - q * p.dims[d]);
      rest = q;
      ix += c * p.xs[d];
      iy += c * p.ys[d];
    }
    y.v[iy] = x.v[ix];
  }
}
