#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// FusedAttention for depths up to 128, in blocks: a workgroup of 16 BQ threads takes BQ query
// rows of one (b0, b1) and walks the keys in tiles of 32 staged in shared memory with V's rows,
// keeping each row's running maximum, sum and output (an online softmax), so K and V are read
// once per block instead of once per row. Thread (r, c) computes scores (r, c) and (r, c + 16) of
// the tile and output columns 4 (c + 16 q) .. 4 (c + 16 q) + 3 of row r. The depths are
// specialization constants (rounded up to 4, the rest zeros), so every loop over them and over
// the tile is unrolled and reads shared memory as vec4; the next tile of K and V is loaded into
// registers while the present one is used. VEC = 1 reads Q, K (KT = 0) and V as vec4 (depths,
// strides and offsets multiples of 4, the tensors 16-byte aligned). A row masked everywhere gives
// NaN, as the unfused ops do.
// Every operand is read by element strides over [b0, b1, row, depth] (the depth contiguous; for K
// with KT = 1 the row is contiguous and k_s steps the depth), so FusedAttention's contiguous
// tensors and StridedAttention's views of one projection (no Transposes) run alike.
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const int KT = 0;
layout(constant_id = 1) const int THREADS = 128;  // 16 BQ
layout(constant_id = 2) const int D4 = 16;        // Q and K's depth / 4, rounded up
layout(constant_id = 3) const int DV4 = 16;       // V's depth / 4, rounded up
layout(constant_id = 4) const int VEC = 0;
const int BQ = THREADS / 16;
const int TK = 32;
const int QV = (DV4 + 15) / 16;                      // output vec4 columns per thread
const int KN = (TK * D4 + THREADS - 1) / THREADS;   // K vec4s a thread loads per tile
const int VN = (TK * DV4 + THREADS - 1) / THREADS;  // V vec4s

layout(buffer_reference, std430, buffer_reference_align = ELEM_BYTES) readonly buffer FloatsIn {
  ELEM v[];
};
layout(buffer_reference, std430, buffer_reference_align = QUAD_BYTES) readonly buffer Vec4sIn {
  ELEM4 v[];
};

layout(push_constant) uniform P {
  uint64_t q;
  uint64_t k;
  uint64_t v;
  uint64_t mask;
  uint64_t y;
  int sq, sk;
  int depths;  // d | dv << 16
  int heads;   // b1's extent
  int nb;      // (b0, b1) pairs
  int q_b0, q_b1, q_s;
  int k_b0, k_b1, k_s;
  int v_b0, v_b1, v_s;
  int y_b0, y_b1, y_s;
  int m_b0, m_b1, m_i, m_j;
  float scale;
} p;

shared vec4 Qs[BQ][D4];
shared vec4 Ks[TK][D4 + 1];  // padded: the threads of a row read different banks
shared vec4 Vs[TK][DV4];
shared vec4 Ps[BQ][TK / 4];  // the tile's scores
shared vec4 Es[BQ][TK / 4];  // their weights

// Four values of a row from `base` on, zero at and past `n`.
vec4 load4(uint64_t address, int base, int e, int n) {
  if (VEC == 1) return vec4(Vec4sIn(address).v[(base + e) / 4]);
  FloatsIn t = FloatsIn(address);
  vec4 r = vec4(0.0);
  if (e < n) r.x = float(t.v[base + e]);
  if (e + 1 < n) r.y = float(t.v[base + e + 1]);
  if (e + 2 < n) r.z = float(t.v[base + e + 2]);
  if (e + 3 < n) r.w = float(t.v[base + e + 3]);
  return r;
}

// The tile of keys from j0 in registers: K's vec4 e of the tile is key e / D4 (KT = 0) or e % TK
// (KT = 1), V's key e / DV4; zeros past the keys and the depths.
vec4 kr[KN], vr[VN];

void fetch(int j0, int kb, int vb, int d, int dv) {
  FloatsIn K = FloatsIn(p.k);
  const int t = int(gl_LocalInvocationID.x);
  [[unroll]] for (int n = 0; n < KN; ++n) {
    const int e = t + n * THREADS;
    const int jj = KT == 1 ? e % TK : e / D4, e4 = KT == 1 ? e / TK : e % D4;
    kr[n] = vec4(0.0);
    if (e < TK * D4 && j0 + jj < p.sk) {
      if (KT == 1) {
        const int at = kb + j0 + jj, e0 = 4 * e4;
        if (e0 < d) kr[n].x = float(K.v[at + e0 * p.k_s]);
        if (e0 + 1 < d) kr[n].y = float(K.v[at + (e0 + 1) * p.k_s]);
        if (e0 + 2 < d) kr[n].z = float(K.v[at + (e0 + 2) * p.k_s]);
        if (e0 + 3 < d) kr[n].w = float(K.v[at + (e0 + 3) * p.k_s]);
      } else {
        kr[n] = load4(p.k, kb + (j0 + jj) * p.k_s, 4 * e4, d);
      }
    }
  }
  [[unroll]] for (int n = 0; n < VN; ++n) {
    const int e = t + n * THREADS, jj = e / DV4, e4 = e % DV4;
    vr[n] = e < TK * DV4 && j0 + jj < p.sk ? load4(p.v, vb + (j0 + jj) * p.v_s, 4 * e4, dv)
                                            : vec4(0.0);
  }
}

void main() {
  FloatsIn M = FloatsIn(p.mask);
  Floats Y = Floats(p.y);
  const int d = p.depths & 0xffff, dv = p.depths >> 16;
  const int t = int(gl_LocalInvocationID.x), r = t / 16, c = t % 16;
  const int blocks = (p.sq + BQ - 1) / BQ;
  const int wg = int(gl_WorkGroupID.x) + int(gl_WorkGroupID.y) * 65535;
  if (wg >= p.nb * blocks) return;  // the whole workgroup
  const int b = wg / blocks, i0 = (wg - b * blocks) * BQ, i = i0 + r;
  const int b0 = b / p.heads, b1 = b - b0 * p.heads;
  const int qb = b0 * p.q_b0 + b1 * p.q_b1, kb = b0 * p.k_b0 + b1 * p.k_b1;
  const int vb = b0 * p.v_b0 + b1 * p.v_b1;
  const bool live = i < p.sq;

  for (int e = t; e < BQ * D4; e += THREADS) {
    const int rr = e / D4, e4 = e - rr * D4;
    Qs[rr][e4] =
        i0 + rr < p.sq ? load4(p.q, qb + (i0 + rr) * p.q_s, 4 * e4, d) * p.scale : vec4(0.0);
  }
  vec4 acc[QV];
  [[unroll]] for (int q = 0; q < QV; ++q) acc[q] = vec4(0.0);
  float run_max = -1.0 / 0.0, run_sum = 0.0;

  if (p.sk > 0) fetch(0, kb, vb, d, dv);
  for (int j0 = 0; j0 < p.sk; j0 += TK) {
    const int tk = min(TK, p.sk - j0);
    [[unroll]] for (int n = 0; n < KN; ++n) {
      const int e = t + n * THREADS;
      if (e < TK * D4) {
        if (KT == 1)
          Ks[e % TK][e / TK] = kr[n];
        else
          Ks[e / D4][e % D4] = kr[n];
      }
    }
    [[unroll]] for (int n = 0; n < VN; ++n) {
      const int e = t + n * THREADS;
      if (e < TK * DV4) Vs[e / DV4][e % DV4] = vr[n];
    }
    barrier();
    // The next tile's loads are in flight while this one is used.
    const int j1 = j0 + TK;
    if (j1 < p.sk) fetch(j1, kb, vb, d, dv);
    {
      vec4 s0 = vec4(0.0), s1 = vec4(0.0);
      [[unroll]] for (int e = 0; e < D4; ++e) {
        const vec4 q4 = Qs[r][e];
        s0 = fma(q4, Ks[c][e], s0);
        s1 = fma(q4, Ks[c + 16][e], s1);
      }
      float a0 = (s0.x + s0.y) + (s0.z + s0.w), a1 = (s1.x + s1.y) + (s1.z + s1.w);
      if (p.mask != 0 && live) {
        const int mb = b0 * p.m_b0 + b1 * p.m_b1 + i * p.m_i;
        if (c < tk) a0 += float(M.v[mb + (j0 + c) * p.m_j]);
        if (c + 16 < tk) a1 += float(M.v[mb + (j0 + c + 16) * p.m_j]);
      }
      Ps[r][c >> 2][c & 3] = c < tk ? a0 : -1.0 / 0.0;
      Ps[r][(c + 16) >> 2][c & 3] = c + 16 < tk ? a1 : -1.0 / 0.0;
    }
    barrier();
    // Every thread of row r finds the same maximum, then weighs its two scores.
    vec4 m4 = Ps[r][0];
    [[unroll]] for (int q = 1; q < TK / 4; ++q) m4 = max(m4, Ps[r][q]);
    const float new_max = max(run_max, max(max(m4.x, m4.y), max(m4.z, m4.w)));
    // All keys so far masked (-inf): nothing to weigh yet.
    const bool none = new_max == -1.0 / 0.0;
    const float keep = none ? 1.0 : exp_accurate(run_max - new_max);
    const float p0 = Ps[r][c >> 2][c & 3], p1 = Ps[r][(c + 16) >> 2][c & 3];
    Es[r][c >> 2][c & 3] = none ? 0.0 : exp_accurate(p0 - new_max);
    Es[r][(c + 16) >> 2][c & 3] = none ? 0.0 : exp_accurate(p1 - new_max);
    barrier();
    vec4 sum4 = vec4(0.0);
    [[unroll]] for (int q = 0; q < QV; ++q) acc[q] *= keep;
    [[unroll]] for (int j4 = 0; j4 < TK / 4; ++j4) {
      const vec4 w = Es[r][j4];
      sum4 += w;
      [[unroll]] for (int q = 0; q < QV; ++q) {
        const int g = c + 16 * q;
        if (g < DV4) {
          acc[q] = fma(vec4(w.x), Vs[4 * j4][g], acc[q]);
          acc[q] = fma(vec4(w.y), Vs[4 * j4 + 1][g], acc[q]);
          acc[q] = fma(vec4(w.z), Vs[4 * j4 + 2][g], acc[q]);
          acc[q] = fma(vec4(w.w), Vs[4 * j4 + 3][g], acc[q]);
        }
      }
    }
    run_sum = run_sum * keep + ((sum4.x + sum4.y) + (sum4.z + sum4.w));
    run_max = new_max;
    barrier();
  }
  if (!live) return;
  const float inv = 1.0 / run_sum;
  const int yb = b0 * p.y_b0 + b1 * p.y_b1 + i * p.y_s;
  [[unroll]] for (int q = 0; q < QV; ++q) {
    const int e = 4 * (c + 16 * q);
    const vec4 o = acc[q] * inv;
    if (e < dv) Y.v[yb + e] = ELEM(o.x);
    if (e + 1 < dv) Y.v[yb + e + 1] = ELEM(o.y);
    if (e + 2 < dv) Y.v[yb + e + 2] = ELEM(o.z);
    if (e + 3 < dv) Y.v[yb + e + 3] = ELEM(o.w);
  }
}
