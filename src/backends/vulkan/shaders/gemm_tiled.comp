#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// The fast form of gemm.comp for row-major A (m x k) and B (k x n) with k and n multiples of 4,
// their rows and the tensors 16-byte aligned: a 16x16 workgroup computes a 128x128 tile of Y,
// each thread an 8x8 block, from A and B tiles of depth 8 staged in shared memory and read as
// vec4; the next tiles are loaded into registers while the present ones are multiplied. The
// epilogue is gemm.comp's: act(alpha AB + beta C + D).
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const int ACT = 0;
const int BM = 128;
const int BN = 128;
const int BK = 8;

layout(buffer_reference, std430, buffer_reference_align = 16) buffer Vec4s {
  vec4 v[];
};
layout(buffer_reference, std430, buffer_reference_align = 16) readonly buffer Vec4sIn {
  vec4 v[];
};

layout(push_constant) uniform P {
  uint64_t a;
  uint64_t b;
  uint64_t c;
  uint64_t d;
  uint64_t y;
  int m, n, k;
  int a_bs, a_rs, a_cs;
  int b_bs, b_rs, b_cs;
  int c_bs, c_rs, c_cs;
  int d_bs, d_rs, d_cs;
  float alpha, beta, act_a, act_b;
} p;

shared vec4 As[BK][BM / 4];  // As[k][m / 4], A transposed
shared vec4 Bs[BK][BN / 4];

void main() {
  Vec4sIn A = Vec4sIn(p.a);
  Vec4sIn B = Vec4sIn(p.b);
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int tid = ty * 16 + tx;
  const int m0 = int(gl_WorkGroupID.y) * BM, n0 = int(gl_WorkGroupID.x) * BN;
  const int bz = int(gl_WorkGroupID.z);
  // Units of vec4.
  const int a_row4 = p.a_rs / 4, b_row4 = p.b_rs / 4;
  const int a_base4 = bz * (p.a_bs / 4), b_base4 = bz * (p.b_bs / 4);

  // This thread's loads: A row (tid / 2), k quad (tid % 2); B k row (tid / 32), n quad (tid % 32).
  const int la_r = tid >> 1, la_k = (tid & 1) * 4;
  const int lb_k = tid >> 5, lb_n = (tid & 31) * 4;
  const int ga_r = m0 + la_r, gb_n = n0 + lb_n;

  vec4 acc[8][2];
  [[unroll]] for (int i = 0; i < 8; ++i) {
    acc[i][0] = vec4(0.0);
    acc[i][1] = vec4(0.0);
  }

  vec4 ra = vec4(0.0), rb = vec4(0.0);
  if (ga_r < p.m && la_k < p.k) ra = A.v[a_base4 + ga_r * a_row4 + la_k / 4];
  if (gb_n < p.n && lb_k < p.k) rb = B.v[b_base4 + lb_k * b_row4 + gb_n / 4];

  for (int k0 = 0; k0 < p.k; k0 += BK) {
    As[la_k + 0][la_r >> 2][la_r & 3] = ra.x;
    As[la_k + 1][la_r >> 2][la_r & 3] = ra.y;
    As[la_k + 2][la_r >> 2][la_r & 3] = ra.z;
    As[la_k + 3][la_r >> 2][la_r & 3] = ra.w;
    Bs[lb_k][lb_n >> 2] = rb;
    barrier();
    // The next tiles, in flight while this one is multiplied.
    const int k1 = k0 + BK;
    ra = vec4(0.0);
    rb = vec4(0.0);
    if (ga_r < p.m && k1 + la_k < p.k) ra = A.v[a_base4 + ga_r * a_row4 + (k1 + la_k) / 4];
    if (gb_n < p.n && k1 + lb_k < p.k) rb = B.v[b_base4 + (k1 + lb_k) * b_row4 + gb_n / 4];
    [[unroll]] for (int kk = 0; kk < BK; ++kk) {
      vec4 a0 = As[kk][ty * 2], a1 = As[kk][ty * 2 + 1];
      vec4 b0 = Bs[kk][tx * 2], b1 = Bs[kk][tx * 2 + 1];
      float av[8] = float[8](a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w);
      [[unroll]] for (int i = 0; i < 8; ++i) {
        acc[i][0] = fma(vec4(av[i]), b0, acc[i][0]);
        acc[i][1] = fma(vec4(av[i]), b1, acc[i][1]);
      }
    }
    barrier();
  }

  Floats C = Floats(p.c);
  Floats D = Floats(p.d);
  Vec4s Y = Vec4s(p.y);
  [[unroll]] for (int i = 0; i < 8; ++i) {
    const int gm = m0 + ty * 8 + i;
    if (gm >= p.m) break;
    [[unroll]] for (int h = 0; h < 2; ++h) {
      const int gn = n0 + tx * 8 + h * 4;
      if (gn >= p.n) break;
      vec4 v = p.alpha * acc[i][h];
      if (p.c != 0 || p.d != 0 || ACT != 0) {
        [[unroll]] for (int j = 0; j < 4; ++j) {
          float e = v[j];
          if (p.c != 0) e += p.beta * C.v[bz * p.c_bs + gm * p.c_rs + (gn + j) * p.c_cs];
          if (p.d != 0) e += D.v[bz * p.d_bs + gm * p.d_rs + (gn + j) * p.d_cs];
          v[j] = apply_unary(ACT, e, p.act_a, p.act_b);
        }
      }
      Y.v[((bz * p.m + gm) * p.n + gn) / 4] = v;
    }
  }
}
