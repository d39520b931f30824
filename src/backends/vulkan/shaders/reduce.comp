#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// The Reduce ops over any set of axes: one workgroup per output element, whose threads walk the
// reduced elements (the reduced dims and their input strides, up to 6) from the input offset of
// that output (the kept dims and their strides), then combine through shared memory.
// OP: 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 sum of squares, 6 L1, 7 L2, 8 log sum,
// 9 log sum exp. Max and min carry NaN through, as the CPU kernels do.
layout(local_size_x = 64) in;
layout(constant_id = 0) const int OP = 0;

layout(push_constant) uniform P {
  uint64_t x;
  uint64_t y;
  uint n_out, n_red;
  uint kept_rank, red_rank;
  uint kept_dims[6];
  uint kept_strides[6];
  uint red_dims[6];
  uint red_strides[6];
} p;

shared float part[64];

float identity() {
  if (OP == 2) return -1.0 / 0.0;
  if (OP == 3) return 1.0 / 0.0;
  if (OP == 4) return 1.0;
  return 0.0;
}

float combine(float a, float b) {
  if (OP == 2) return is_nan(a) || a > b ? a : b;
  if (OP == 3) return is_nan(a) || a < b ? a : b;
  if (OP == 4) return a * b;
  return a + b;
}

float term(float v, float shift) {
  if (OP == 5 || OP == 7) return v * v;
  if (OP == 6) return abs(v);
  if (OP == 9) return exp_accurate(v - shift);
  return v;
}

uint offset_of(uint e) {
  uint at = 0;
  for (int d = int(p.red_rank) - 1; d >= 0; --d) {
    const uint q = e / p.red_dims[d];
    at += (e - q * p.red_dims[d]) * p.red_strides[d];
    e = q;
  }
  return at;
}

float workgroup_combine(float v) {
  const uint t = gl_LocalInvocationID.x;
  part[t] = v;
  barrier();
  for (uint s = 32; s > 0; s >>= 1) {
    if (t < s) part[t] = combine(part[t], part[t + s]);
    barrier();
  }
  const float r = part[0];
  barrier();
  return r;
}

void main() {
  Floats X = Floats(p.x);
  Floats Y = Floats(p.y);
  const uint t = gl_LocalInvocationID.x;
  const uint o = gl_WorkGroupID.x + gl_WorkGroupID.y * 65535;
  if (o >= p.n_out) return;  // the whole workgroup
  uint base = 0, rest = o;
  for (int d = int(p.kept_rank) - 1; d >= 0; --d) {
    const uint q = rest / p.kept_dims[d];
    base += (rest - q * p.kept_dims[d]) * p.kept_strides[d];
    rest = q;
  }
  // log sum exp: the maximum first, so no term overflows.
  float shift = 0.0;
  if (OP == 9) {
    float m = -1.0 / 0.0;
    for (uint e = t; e < p.n_red; e += 64) m = max(m, float(X.v[base + offset_of(e)]));
    part[t] = m;
    barrier();
    for (uint s = 32; s > 0; s >>= 1) {
      if (t < s) part[t] = max(part[t], part[t + s]);
      barrier();
    }
    shift = part[0];
    barrier();
    if (shift == -1.0 / 0.0 || shift == 1.0 / 0.0) shift = 0.0;
  }
  float acc = identity();
  for (uint e = t; e < p.n_red; e += 64) acc = combine(acc, term(float(X.v[base + offset_of(e)]), shift));
  acc = workgroup_combine(acc);
  if (t != 0) return;
  if (OP == 1) acc /= float(p.n_red);
  if (OP == 7) acc = sqrt(acc);
  if (OP == 8) acc = log(acc);
  if (OP == 9) acc = log(acc) + shift;
  Y.v[o] = ELEM(acc);
}
