#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// Y[b] = act(alpha A[b] B[b] + beta C[b] + D[b]) in square tiles: a 16x16 workgroup computes a
// (16 TM) x (16 TM) tile of Y, each thread a TM x TM block, from A and B tiles of depth 64 / TM
// staged in shared memory as vec4; the next tiles are loaded into registers while the present
// ones are multiplied. Operands are addressed by element strides as in gemm.comp. VEC = 1 reads
// them as vec4 (A and B row-major with k, n and the row and batch strides multiples of 4, the
// tensors 16-byte aligned), else element by element. BT = 1 reads B along k (B stored n x k,
// a transposed weight), else along n.
// Split-K: with k_split > 0 the z groups are splits x batch; split s multiplies the k range
// [s k_split, (s + 1) k_split) and writes alpha times its sum to Y[s batch + b] (C, D and ACT off:
// gemm_reduce.comp sums the splits and applies the epilogue).
layout(local_size_x = 16, local_size_y = 16) in;
layout(constant_id = 0) const int ACT = 0;
layout(constant_id = 1) const int TM = 8;
layout(constant_id = 2) const int VEC = 1;
layout(constant_id = 3) const int BT = 0;
const int BM = 16 * TM;  // the tile's rows and columns
const int BK = 64 / TM;  // its depth
const int KQ = BK / 4;   // k quads per tile row of A
const int MQ = BM / 4;   // quads per tile row of B
const int TQ = TM / 4;   // quads per thread row

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

shared vec4 As[BK][MQ];  // As[k][m / 4]: A transposed
shared vec4 Bs[BK][MQ];  // Bs[k][n / 4]

// Four elements of a matrix along its column index: rows[row], columns col..col+3 (below `cols`),
// zeros outside.
vec4 quad(uint64_t base_address, int base, int row, int rows, int rs, int col, int cols, int cs) {
  if (row >= rows || col >= cols) return vec4(0.0);
  if (VEC == 1) return vec4(Quads(base_address).v[(base + row * rs + col) / 4]);
  Floats X = Floats(base_address);
  vec4 r = vec4(0.0);
  [[unroll]] for (int j = 0; j < 4; ++j)
    if (col + j < cols) r[j] = float(X.v[base + row * rs + (col + j) * cs]);
  return r;
}

void main() {
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int tid = ty * 16 + tx;
  const int m0 = int(gl_WorkGroupID.y) * BM, n0 = int(gl_WorkGroupID.x) * BM;
  const int splits = p.k_split > 0 ? (p.k + p.k_split - 1) / p.k_split : 1;
  const int batch = int(gl_NumWorkGroups.z) / splits;
  const int z = int(gl_WorkGroupID.z), s = z / batch, bz = z - s * batch;
  const int kbeg = p.k_split > 0 ? s * p.k_split : 0;
  const int kend = p.k_split > 0 ? min(p.k, kbeg + p.k_split) : p.k;
  const int a_base = bz * p.a_bs, b_base = bz * p.b_bs;

  // This thread's loads: A row la_r, k offset la_k; B k row (or n row when BT) lb_r, offset lb_c.
  const int la_r = tid / KQ, la_k = (tid % KQ) * 4;
  const int lb_r = BT == 1 ? tid / KQ : tid / MQ;
  const int lb_c = BT == 1 ? (tid % KQ) * 4 : (tid % MQ) * 4;

  vec4 acc[TM][TQ];
  [[unroll]] for (int i = 0; i < TM; ++i)
    [[unroll]] for (int q = 0; q < TQ; ++q) acc[i][q] = vec4(0.0);

  vec4 ra = quad(p.a, a_base, m0 + la_r, p.m, p.a_rs, kbeg + la_k, kend, p.a_cs);
  vec4 rb = BT == 1 ? quad(p.b, b_base, n0 + lb_r, p.n, p.b_cs, kbeg + lb_c, kend, p.b_rs)
                    : quad(p.b, b_base, kbeg + lb_r, kend, p.b_rs, n0 + lb_c, p.n, p.b_cs);

  for (int k0 = kbeg; k0 < kend; k0 += BK) {
    [[unroll]] for (int j = 0; j < 4; ++j) As[la_k + j][la_r >> 2][la_r & 3] = ra[j];
    if (BT == 1) {
      [[unroll]] for (int j = 0; j < 4; ++j) Bs[lb_c + j][lb_r >> 2][lb_r & 3] = rb[j];
    } else {
      Bs[lb_r][lb_c >> 2] = rb;
    }
    barrier();
    // The next tiles, in flight while this one is multiplied.
    const int k1 = k0 + BK;
    ra = quad(p.a, a_base, m0 + la_r, p.m, p.a_rs, k1 + la_k, kend, p.a_cs);
    rb = BT == 1 ? quad(p.b, b_base, n0 + lb_r, p.n, p.b_cs, k1 + lb_c, kend, p.b_rs)
                 : quad(p.b, b_base, k1 + lb_r, kend, p.b_rs, n0 + lb_c, p.n, p.b_cs);
    [[unroll]] for (int kk = 0; kk < BK; ++kk) {
      vec4 av[TQ], bv[TQ];
      [[unroll]] for (int q = 0; q < TQ; ++q) {
        av[q] = As[kk][ty * TQ + q];
        bv[q] = Bs[kk][tx * TQ + q];
      }
      [[unroll]] for (int i = 0; i < TM; ++i) {
        const vec4 a = vec4(av[i >> 2][i & 3]);
        [[unroll]] for (int q = 0; q < TQ; ++q) acc[i][q] = fma(a, bv[q], acc[i][q]);
      }
    }
    barrier();
  }

  Floats C = Floats(p.c);
  Floats D = Floats(p.d);
  Floats Y = Floats(p.y);
  Quads Y4 = Quads(p.y);
  [[unroll]] for (int i = 0; i < TM; ++i) {
    const int gm = m0 + ty * TM + i;
    if (gm >= p.m) break;
    [[unroll]] for (int q = 0; q < TQ; ++q) {
      const int gn = n0 + tx * TM + q * 4;
      if (gn >= p.n) break;
      vec4 v = p.alpha * acc[i][q];
      if (p.c != 0 || p.d != 0 || ACT != 0) {
        [[unroll]] for (int j = 0; j < 4; ++j) {
          float e = v[j];
          if (gn + j < p.n) {
            if (p.c != 0) e += p.beta * float(C.v[bz * p.c_bs + gm * p.c_rs + (gn + j) * p.c_cs]);
            if (p.d != 0) e += float(D.v[bz * p.d_bs + gm * p.d_rs + (gn + j) * p.d_cs]);
          }
          v[j] = apply_unary(ACT, e, p.act_a, p.act_b);
        }
      }
      const int at = (z * p.m + gm) * p.n + gn;
      if (VEC == 1) {
        Y4.v[at / 4] = ELEM4(v);
      } else {
        [[unroll]] for (int j = 0; j < 4; ++j)
          if (gn + j < p.n) Y.v[at + j] = ELEM(v[j]);
      }
    }
  }
}
