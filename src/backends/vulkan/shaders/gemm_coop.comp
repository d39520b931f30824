#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
// Y[b] = act(alpha A[b] B[b] + beta C[b] + D[b]) on the tensor cores of NVIDIA GPUs through
// VK_NV_cooperative_matrix: float16 operands, 16x16x16 products accumulated in float32. Only the
// float16 form is used (a Precision::kFloat16 compile; the float32 form converts on staging).
// A workgroup of four subgroups of 32 computes a 64x64 tile of Y, each subgroup a 32x32 quarter
// (2x2 matrices); A and B tiles of depth 32 are staged in shared memory by every thread (zeros
// outside), and the next ones are loaded into registers while the present ones are multiplied.
// VEC = 1 loads four elements at a time along each operand's contiguous dim (as gemm_tiled.comp's
// vec4 form, checked by the host), else one at a time by strides. BT = 1 stages B as it is stored
// (n x k, a transposed weight) and reads it column-major. The accumulators go through shared
// memory to the epilogue (C, D, activation), which writes Y element by element. Push constants,
// split-K and the layout of Y as in gemm_tiled.comp.
layout(local_size_x = 128) in;
layout(constant_id = 0) const int ACT = 0;
layout(constant_id = 1) const int VEC = 0;
layout(constant_id = 2) const int BT = 0;
const int BM = 64, BK = 32, FR = 16;
const int QUADS = BM * BK / 4 / 128;  // quads of A (and of B) each thread stages per tile

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

// The staged tiles hold four float16 per uvec2 (one 8-byte store per quad; glslang takes no f16vec4
// arrays for coopMatLoadNV), so the loads' offsets and strides count quads.
shared uvec2 As[BM * BK / 4];  // [m][k], row stride BK
shared uvec2 Bs[BK * BM / 4];  // [k][n] with row stride BM, or (BT) [n][k] with row stride BK
shared float Cs[BM * BM];      // the accumulators, [m][n]

f16vec4 ra[QUADS], rb[QUADS];

// Four elements of an operand along its contiguous dim: (row, col..col+3) of a matrix with
// `rows` x `cols` (cols a multiple of 4 in the VEC form), element strides rs and cs; zeros outside.
f16vec4 quad(uint64_t address, int base, int row, int rows, int rs, int col, int cols, int cs) {
  if (row >= rows || col >= cols) return f16vec4(0.0);
  if (VEC == 1) return f16vec4(Quads(address).v[(base + row * rs + col) / 4]);
  Floats X = Floats(address);
  f16vec4 r = f16vec4(0.0);
  [[unroll]] for (int j = 0; j < 4; ++j)
    if (col + j < cols) r[j] = float16_t(X.v[base + row * rs + (col + j) * cs]);
  return r;
}

// The tiles at depth k0 into registers: A's rows along k; B's rows along n, or (BT) along k.
void fetch(int m0, int n0, int k0, int kend, int a_base, int b_base) {
  const int t = int(gl_LocalInvocationID.x);
  [[unroll]] for (int i = 0; i < QUADS; ++i) {
    const int q = t + 128 * i;
    ra[i] = quad(p.a, a_base, m0 + q / (BK / 4), p.m, p.a_rs, k0 + 4 * (q % (BK / 4)), kend, p.a_cs);
    rb[i] = BT == 1 ? quad(p.b, b_base, n0 + q / (BK / 4), p.n, p.b_cs, k0 + 4 * (q % (BK / 4)),
                           kend, p.b_rs)
                    : quad(p.b, b_base, k0 + q / (BM / 4), kend, p.b_rs, n0 + 4 * (q % (BM / 4)),
                           p.n, p.b_cs);
  }
}

void main() {
  const int t = int(gl_LocalInvocationID.x);
  const int sg = t / 32;  // this subgroup's quarter: rows qm, columns qn
  const int qm = (sg / 2) * 32, qn = (sg % 2) * 32;
  const int m0 = int(gl_WorkGroupID.y) * BM, n0 = int(gl_WorkGroupID.x) * BM;
  const int splits = p.k_split > 0 ? (p.k + p.k_split - 1) / p.k_split : 1;
  const int batch = int(gl_NumWorkGroups.z) / splits;
  const int z = int(gl_WorkGroupID.z), s = z / batch, bz = z - s * batch;
  const int kbeg = p.k_split > 0 ? s * p.k_split : 0;
  const int kend = p.k_split > 0 ? min(p.k, kbeg + p.k_split) : p.k;
  const int a_base = bz * p.a_bs, b_base = bz * p.b_bs;

  fcoopmatNV<32, gl_ScopeSubgroup, FR, FR> acc[2][2];
  [[unroll]] for (int i = 0; i < 2; ++i)
    [[unroll]] for (int j = 0; j < 2; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, FR, FR>(0.0);

  fetch(m0, n0, kbeg, kend, a_base, b_base);
  for (int k0 = kbeg; k0 < kend; k0 += BK) {
    [[unroll]] for (int i = 0; i < QUADS; ++i) {
      As[t + 128 * i] = uvec2(packFloat2x16(ra[i].xy), packFloat2x16(ra[i].zw));
      Bs[t + 128 * i] = uvec2(packFloat2x16(rb[i].xy), packFloat2x16(rb[i].zw));
    }
    barrier();
    fetch(m0, n0, k0 + BK, kend, a_base, b_base);
    [[unroll]] for (int kk = 0; kk < BK; kk += FR) {
      fcoopmatNV<16, gl_ScopeSubgroup, FR, FR> fa[2], fb[2];
      [[unroll]] for (int i = 0; i < 2; ++i)
        coopMatLoadNV(fa[i], As, uint(((qm + 16 * i) * BK + kk) / 4), uint(BK / 4), false);
      [[unroll]] for (int j = 0; j < 2; ++j)
        if (BT == 1) {
          coopMatLoadNV(fb[j], Bs, uint(((qn + 16 * j) * BK + kk) / 4), uint(BK / 4), true);
        } else {
          coopMatLoadNV(fb[j], Bs, uint((kk * BM + qn + 16 * j) / 4), uint(BM / 4), false);
        }
      [[unroll]] for (int i = 0; i < 2; ++i)
        [[unroll]] for (int j = 0; j < 2; ++j) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
    }
    barrier();
  }
  [[unroll]] for (int i = 0; i < 2; ++i)
    [[unroll]] for (int j = 0; j < 2; ++j)
      coopMatStoreNV(acc[i][j], Cs, uint((qm + 16 * i) * BM + qn + 16 * j), uint(BM), false);
  barrier();

  Floats C = Floats(p.c);
  Floats D = Floats(p.d);
  Floats Y = Floats(p.y);
  for (int e = t; e < BM * BM; e += 128) {
    const int gm = m0 + e / BM, gn = n0 + e % BM;
    if (gm >= p.m || gn >= p.n) continue;
    float v = p.alpha * Cs[e];
    if (p.c != 0) v += p.beta * float(C.v[bz * p.c_bs + gm * p.c_rs + gn * p.c_cs]);
    if (p.d != 0) v += float(D.v[bz * p.d_bs + gm * p.d_rs + gn * p.d_cs]);
    Y.v[(z * p.m + gm) * p.n + gn] = ELEM(apply_unary(ACT, v, p.act_a, p.act_b));
  }
}
