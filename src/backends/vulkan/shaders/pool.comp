#version 460
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
// 2-D max or average pooling (MAX = 1 or 0) over NCHW planes, one thread per output value; the
// window is clipped to the input (padding never wins a max; an average divides by the window's
// size inside the input, or by the whole window where count_include_pad). Global pooling is the
// window of the whole plane.
layout(local_size_x = 256) in;
layout(constant_id = 0) const int MAX = 0;

layout(push_constant) uniform P {
  uint64_t x;
  uint64_t y;
  int planes, h, w, oh, ow;
  int kh, kw, sh, sw, ph, pw, dh, dw;
  int count_include_pad;
  int pad_bottom, pad_right;
} p;

void main() {
  Floats X = Floats(p.x);
  Floats Y = Floats(p.y);
  const int per_plane = p.oh * p.ow;
  const int total = p.planes * per_plane;
  for (int i = int(gl_GlobalInvocationID.x); i < total; i += int(gl_NumWorkGroups.x) * 256) {
    const int plane = i / per_plane, pos = i - plane * per_plane;
    const int oy = pos / p.ow, ox = pos - oy * p.ow;
    const int base = plane * p.h * p.w;
    float best = -1.0 / 0.0, sum = 0.0;
    int count = 0;
    bool nan_seen = false;
    for (int ki = 0; ki < p.kh; ++ki) {
      const int iy = oy * p.sh - p.ph + ki * p.dh;
      if (iy < 0 || iy >= p.h) continue;
      for (int kj = 0; kj < p.kw; ++kj) {
        const int ix = ox * p.sw - p.pw + kj * p.dw;
        if (ix < 0 || ix >= p.w) continue;
        const float v = float(X.v[base + iy * p.w + ix]);
        nan_seen = nan_seen || is_nan(v);
        best = max(best, v);
        sum += v;
        ++count;
      }
    }
    float r;
    if (MAX == 1) {
      r = nan_seen ? 0.0 / 0.0 : best;
    } else if (p.count_include_pad != 0) {
      // The window inside the padded input (not past the padding at the far edges).
      const int y0 = oy * p.sh - p.ph, x0 = ox * p.sw - p.pw;
      const int y1 = min(y0 + (p.kh - 1) * p.dh + 1, p.h + p.pad_bottom);
      const int x1 = min(x0 + (p.kw - 1) * p.dw + 1, p.w + p.pad_right);
      const int rows = (y1 - y0 + p.dh - 1) / p.dh, cols = (x1 - x0 + p.dw - 1) / p.dw;
      r = sum / float(rows * cols);
    } else {
      r = count > 0 ? sum / float(count) : 0.0;
    }
    Y.v[i] = ELEM(r);
  }
}
