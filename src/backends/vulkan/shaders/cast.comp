#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
// Cast between float32 and float16, the edges of a Precision::kFloat16 compile: y[i] = x[i]
// converted, float16 rounded as the device's conversions round (Vulkan allows to nearest even or
// toward zero). Built in both forms like every shader; either reads and writes both types.
layout(local_size_x = 256) in;
layout(constant_id = 0) const int FROM_HALF = 0;
layout(constant_id = 1) const int TO_HALF = 1;

layout(buffer_reference, std430, buffer_reference_align = 2) buffer Halves {
  float16_t v[];
};

layout(push_constant) uniform P {
  uint64_t x;
  uint64_t y;
  uint n;
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * 256;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const float v = FROM_HALF == 1 ? float(Halves(p.x).v[i]) : Float32s(p.x).v[i];
    if (TO_HALF == 1) {
      Halves(p.y).v[i] = float16_t(v);
    } else {
      Float32s(p.y).v[i] = v;
    }
  }
}
