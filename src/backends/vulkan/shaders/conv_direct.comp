#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// 2-D convolution with one thread per output value: for groups of few output channels each
// (depthwise convolutions), where conv.comp's 64-row tiles would sit mostly idle. Same push
// constants and epilogue as conv.comp.
layout(local_size_x = 256) in;
layout(constant_id = 0) const int ACT = 0;

layout(buffer_reference, std430, buffer_reference_align = ELEM_BYTES) readonly buffer FloatsIn {
  ELEM v[];
};

layout(push_constant) uniform P {
  uint64_t x;
  uint64_t w;
  uint64_t b;
  uint64_t z;
  uint64_t y;
  int c, h, wd, o, oh, ow;
  int kh, kw, sh, sw, ph, pw, dh, dw;
  int groups;
  float act_a, act_b;
} p;

void main() {
  FloatsIn X = FloatsIn(p.x);
  FloatsIn W = FloatsIn(p.w);
  Floats B = Floats(p.b);
  Floats Z = Floats(p.z);
  Floats Y = Floats(p.y);
  const int cg = p.c / p.groups, og = p.o / p.groups;
  const int plane = p.oh * p.ow;
  const int image = int(gl_WorkGroupID.y);
  for (int i = int(gl_GlobalInvocationID.x); i < p.o * plane; i += int(gl_NumWorkGroups.x) * 256) {
    const int oc = i / plane, pos = i - oc * plane;
    const int oy = pos / p.ow, ox = pos - oy * p.ow;
    const int group = oc / og;
    float acc = p.b != 0 ? float(B.v[oc]) : 0.0;
    for (int ci = 0; ci < cg; ++ci) {
      const int x_plane = (image * p.c + group * cg + ci) * p.h;
      const int w_at = (oc * cg + ci) * p.kh * p.kw;
      for (int ki = 0; ki < p.kh; ++ki) {
        const int iy = oy * p.sh - p.ph + ki * p.dh;
        if (iy < 0 || iy >= p.h) continue;
        for (int kj = 0; kj < p.kw; ++kj) {
          const int ix = ox * p.sw - p.pw + kj * p.dw;
          if (ix < 0 || ix >= p.wd) continue;
          acc = fma(float(W.v[w_at + ki * p.kw + kj]), float(X.v[(x_plane + iy) * p.wd + ix]), acc);
        }
      }
    }
    const int at = image * p.o * plane + i;
    if (p.z != 0) acc += float(Z.v[at]);
    Y.v[at] = ELEM(apply_unary(ACT, acc, p.act_a, p.act_b));
  }
}
