#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// Y[b] = act(alpha A[b] B[b] + beta C[b] + D[b]) for float32, every operand addressed by element
// strides (batch, row, column), so transposes and broadcasts (stride 0) cost nothing; C (a Gemm's
// C, a FusedMatMul's bias row) and D (a residual) are optional (address 0). Y is contiguous
// (batch, m, n). A 16x16 workgroup computes a (16 TM) x (16 TN) tile, each thread TM x TN values
// spaced 16 apart, from A and B tiles of depth 16 staged in shared memory. Split-K (k_split > 0)
// as in gemm_tiled.comp.
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const int TM = 4;
layout(constant_id = 1) const int TN = 4;
layout(constant_id = 2) const int ACT = 0;
const int BK = 16;
const int BM = 16 * TM;
const int BN = 16 * TN;

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
  int k_split;
} p;

shared float As[BK * BM];
shared float Bs[BK * BN];

void main() {
  Floats A = Floats(p.a);
  Floats B = Floats(p.b);
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int tid = ty * 16 + tx;
  const int m0 = int(gl_WorkGroupID.y) * BM, n0 = int(gl_WorkGroupID.x) * BN;
  const int splits = p.k_split > 0 ? (p.k + p.k_split - 1) / p.k_split : 1;
  const int batch = int(gl_NumWorkGroups.z) / splits;
  const int z = int(gl_WorkGroupID.z), s = z / batch, bz = z - s * batch;
  const int kbeg = p.k_split > 0 ? s * p.k_split : 0;
  const int kend = p.k_split > 0 ? min(p.k, kbeg + p.k_split) : p.k;
  const int a_base = bz * p.a_bs, b_base = bz * p.b_bs;
  float acc[TM][TN];
  [[unroll]] for (int i = 0; i < TM; ++i)
    [[unroll]] for (int j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (int k0 = kbeg; k0 < kend; k0 += BK) {
    for (int e = tid; e < BM * BK; e += 256) {
      int r = e / BK, kk = e - r * BK;
      int gm = m0 + r, gk = k0 + kk;
      As[kk * BM + r] = gm < p.m && gk < kend ? float(A.v[a_base + gm * p.a_rs + gk * p.a_cs]) : 0.0;
    }
    for (int e = tid; e < BK * BN; e += 256) {
      int kk = e / BN, c = e - kk * BN;
      int gn = n0 + c, gk = k0 + kk;
      Bs[kk * BN + c] = gn < p.n && gk < kend ? float(B.v[b_base + gk * p.b_rs + gn * p.b_cs]) : 0.0;
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

  Floats C = Floats(p.c);
  Floats D = Floats(p.d);
  Floats Y = Floats(p.y);
  [[unroll]] for (int i = 0; i < TM; ++i) {
    int gm = m0 + ty + 16 * i;
    if (gm >= p.m) continue;
    [[unroll]] for (int j = 0; j < TN; ++j) {
      int gn = n0 + tx + 16 * j;
      if (gn >= p.n) continue;
      float v = p.alpha * acc[i][j];
      if (p.c != 0) v += p.beta * float(C.v[bz * p.c_bs + gm * p.c_rs + gn * p.c_cs]);
      if (p.d != 0) v += float(D.v[bz * p.d_bs + gm * p.d_rs + gn * p.d_cs]);
      Y.v[(z * p.m + gm) * p.n + gn] = ELEM(apply_unary(ACT, v, p.act_a, p.act_b));
    }
  }
}
