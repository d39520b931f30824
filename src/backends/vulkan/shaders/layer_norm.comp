#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// LayerNormalization over the last n values of each row: y = (x - mean) / sqrt(var + eps) *
// scale + bias (bias 0 where absent). One workgroup per row; mean, then variance about it.
// RMS = 1: RMSNormalization, y = x / sqrt(mean(x^2) + eps) * scale (the mean taken as 0).
// CHANNELS = 1: scale and bias per channel of an (N, C, spatial...) tensor whose rows are the
// groups of each sample (`groups` rows per sample, C / groups channels of `spatial` values each):
// GroupNormalization, and InstanceNormalization as one channel per group.
layout(local_size_x = 256) in;
layout(constant_id = 0) const int RMS = 0;
layout(constant_id = 1) const int CHANNELS = 0;
layout(push_constant) uniform P {
  uint64_t x;
  uint64_t scale;
  uint64_t bias;
  uint64_t y;
  uint rows;
  uint n;
  float eps;
  uint groups;
  uint spatial;
} p;

shared float red[256];

float reduce_sum(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = 128; s > 0; s >>= 1) {
    if (t < s) red[t] += red[t + s];
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

void main() {
  Floats x = Floats(p.x);
  Floats g = Floats(p.scale);
  Floats b = Floats(p.bias);
  Floats y = Floats(p.y);
  uint t = gl_LocalInvocationID.x;
  for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
    uint base = row * p.n;
    float mean = 0.0;
    if (RMS == 0) {
      float s = 0.0;
      for (uint j = t; j < p.n; j += 256) s += float(x.v[base + j]);
      mean = reduce_sum(s) / float(p.n);
    }
    float q = 0.0;
    for (uint j = t; j < p.n; j += 256) {
      float d = float(x.v[base + j]) - mean;
      q += d * d;
    }
    float rstd = 1.0 / sqrt(reduce_sum(q) / float(p.n) + p.eps);
    // The channel of the row's first value (CHANNELS = 1).
    const uint first = CHANNELS == 1 ? row % p.groups * (p.n / p.spatial) : 0;
    for (uint j = t; j < p.n; j += 256) {
      const uint c = CHANNELS == 1 ? first + j / p.spatial : j;
      float v = (float(x.v[base + j]) - mean) * rstd * float(g.v[c]);
      if (p.bias != 0) v += float(b.v[c]);
      y.v[base + j] = ELEM(v);
    }
  }
}
