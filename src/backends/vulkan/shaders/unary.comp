#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// y[i] = f(x[i]) for a contiguous float32 tensor.
layout(local_size_x = 256) in;
layout(constant_id = 0) const int OP = 0;
layout(push_constant) uniform P {
  uint64_t x;
  uint64_t y;
  uint n;
  float alpha;
  float beta;
} p;

void main() {
  Floats x = Floats(p.x);
  Floats y = Floats(p.y);
  uint stride = gl_NumWorkGroups.x * 256;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) y.v[i] = ELEM(apply_unary(OP, float(x.v[i]), p.alpha, p.beta));
}
