#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// Softmax (LOG = 0) or LogSoftmax (LOG = 1) over the middle dim of (outer, n, inner): one
// workgroup per (outer, inner) line, reductions in shared memory.
layout(local_size_x = 256) in;
layout(constant_id = 0) const int LOG = 0;
layout(push_constant) uniform P {
  uint64_t x;
  uint64_t y;
  uint lines;
  uint n;
  uint inner;
} p;

shared float red[256];

float reduce_max(float v) {
  uint t = gl_LocalInvocationID.x;
  red[t] = v;
  barrier();
  for (uint s = 128; s > 0; s >>= 1) {
    if (t < s) red[t] = max(red[t], red[t + s]);
    barrier();
  }
  float r = red[0];
  barrier();
  return r;
}

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
  Floats y = Floats(p.y);
  uint t = gl_LocalInvocationID.x;
  for (uint line = gl_WorkGroupID.x; line < p.lines; line += gl_NumWorkGroups.x) {
    uint o = line / p.inner, in_ = line - o * p.inner;
    uint base = o * p.n * p.inner + in_;
    float m = -1.0 / 0.0;
    for (uint j = t; j < p.n; j += 256) m = max(m, float(x.v[base + j * p.inner]));
    m = reduce_max(m);
    float s = 0.0;
    for (uint j = t; j < p.n; j += 256) s += exp_accurate(float(x.v[base + j * p.inner]) - m);
    s = reduce_sum(s);
    if (LOG == 1) {
      float ls = log(s);
      for (uint j = t; j < p.n; j += 256) y.v[base + j * p.inner] = ELEM(float(x.v[base + j * p.inner]) - m - ls);
    } else {
      float r = 1.0 / s;
      for (uint j = t; j < p.n; j += 256) y.v[base + j * p.inner] = ELEM(exp_accurate(float(x.v[base + j * p.inner]) - m) * r);
    }
  }
}
