#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// 2-D convolution (NCHW, groups) as an implicit GEMM per (image, group): Y[o, p] = sum_q
// W[o, q] X'[q, p] with o < O/groups, p < OH*OW and q < C/groups*KH*KW, where X' (the im2col of X)
// is read straight from X while the tile is staged, zeros outside the padded input. A 16x16
// workgroup computes a (16 TM) x (16 TN) tile, each thread TM x TN values spaced 16 apart. The epilogue is
// FusedConv's: act(acc + B[o] + Z). Split-K (k_split > 0): the z groups are splits x images x
// groups, split s sums q in [s k_split, (s + 1) k_split) and writes its sum to the s-th copy of Y
// (B, Z and ACT off; gemm_reduce.comp adds the splits and applies the epilogue).
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const int ACT = 0;
layout(constant_id = 1) const int TM = 4;
layout(constant_id = 2) const int TN = 4;
const int BK = 16;
const int BM = 16 * TM;
const int BN = 16 * TN;

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
  int k_split;
} p;

shared float As[BK * BM];
shared float Bs[BK * BN];

void main() {
  FloatsIn X = FloatsIn(p.x);
  FloatsIn W = FloatsIn(p.w);
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int tid = ty * 16 + tx;
  const int cg = p.c / p.groups, og = p.o / p.groups;
  const int m = og, n = p.oh * p.ow, k = cg * p.kh * p.kw, khw = p.kh * p.kw;
  const int m0 = int(gl_WorkGroupID.y) * BM, n0 = int(gl_WorkGroupID.x) * BN;
  const int splits = p.k_split > 0 ? (k + p.k_split - 1) / p.k_split : 1;
  const int planes = int(gl_NumWorkGroups.z) / splits;
  const int s = int(gl_WorkGroupID.z) / planes, ig = int(gl_WorkGroupID.z) - s * planes;
  const int image = ig / p.groups, group = ig % p.groups;
  const int kbeg = p.k_split > 0 ? s * p.k_split : 0;
  const int kend = p.k_split > 0 ? min(k, kbeg + p.k_split) : k;
  const int y_base = s * (planes / p.groups) * p.o * n;
  const int x_base = (image * p.c + group * cg) * p.h * p.wd;
  const int w_base = group * og * k;
  float acc[TM][TN];
  [[unroll]] for (int i = 0; i < TM; ++i)
    [[unroll]] for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (int k0 = kbeg; k0 < kend; k0 += BK) {
    for (int e = tid; e < BM * BK; e += 256) {
      int r = e / BK, kk = e - r * BK;
      int gm = m0 + r, gk = k0 + kk;
      As[kk * BM + r] = gm < m && gk < kend ? float(W.v[w_base + gm * k + gk]) : 0.0;
    }
    for (int e = tid; e < BK * BN; e += 256) {
      int kk = e / BN, col = e - kk * BN;
      int gn = n0 + col, gk = k0 + kk;
      float v = 0.0;
      if (gn < n && gk < kend) {
        int ci = gk / khw, r = gk - ci * khw;
        int ki = r / p.kw, kj = r - ki * p.kw;
        int oy = gn / p.ow, ox = gn - oy * p.ow;
        int iy = oy * p.sh - p.ph + ki * p.dh, ix = ox * p.sw - p.pw + kj * p.dw;
        if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.wd) v = float(X.v[x_base + (ci * p.h + iy) * p.wd + ix]);
      }
      Bs[kk * BN + col] = v;
    }
    barrier();
    [[unroll]] for (int kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TN];
      [[unroll]] for (int i = 0; i < TM; ++i) av[i] = As[kk * BM + ty + 16 * i];
      [[unroll]] for (int j = 0; j < TN; ++j) bv[j] = Bs[kk * BN + tx + 16 * j];
      [[unroll]] for (int i = 0; i < TM; ++i)
        [[unroll]] for (int j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier();
  }

  Floats B = Floats(p.b);
  Floats Z = Floats(p.z);
  Floats Y = Floats(p.y);
  [[unroll]] for (int i = 0; i < TM; ++i) {
    const int gm = m0 + ty + 16 * i;
    if (gm >= m) continue;
    const int oc = group * og + gm;
    const float bias = p.b != 0 ? float(B.v[oc]) : 0.0;
    [[unroll]] for (int j = 0; j < TN; ++j) {
      const int gn = n0 + tx + 16 * j;
      if (gn >= n) continue;
      const int at = y_base + (image * p.o + oc) * n + gn;
      float v = acc[i][j] + bias;
      if (p.z != 0) v += float(Z.v[at - y_base]);
      Y.v[at] = ELEM(apply_unary(ACT, v, p.act_a, p.act_b));
    }
  }
}
