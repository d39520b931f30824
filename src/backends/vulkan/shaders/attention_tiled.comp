#version 460
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// FusedAttention for depths up to 128, in blocks: a workgroup of 16 BQ threads takes BQ query
// rows of one (b0, b1) and walks the keys in tiles of 32 staged in shared memory with V's rows,
// keeping each row's running maximum, sum and output (an online softmax), so K and V are read
// once per block instead of once per row. Thread (r, c) computes scores (r, c) and (r, c + 16) of
// the tile and output columns c, c + 16, ... of row r. A row masked everywhere gives NaN, as the
// unfused ops do.
// Every operand is read by element strides over [b0, b1, row, depth] (the depth contiguous; for K
// with KT = 1 the row is contiguous and k_s steps the depth), so FusedAttention's contiguous
// tensors and StridedAttention's views of one projection (no Transposes) run alike.
layout(local_size_x_id = 1) in;
layout(constant_id = 0) const int KT = 0;
layout(constant_id = 1) const int THREADS = 128;  // 16 BQ
const int BQ = THREADS / 16;
const int TK = 32;
const int DMAX = 128;

layout(buffer_reference, std430, buffer_reference_align = 4) readonly buffer FloatsIn {
  float v[];
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

shared float Qs[BQ][DMAX];
shared float Ks[TK][DMAX + 1];  // padded: threads of a row read different banks
shared float Vs[TK][DMAX];
shared float Ps[BQ][TK];

void main() {
  FloatsIn Q = FloatsIn(p.q);
  FloatsIn K = FloatsIn(p.k);
  FloatsIn V = FloatsIn(p.v);
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

  for (int e = t; e < BQ * d; e += THREADS) {
    const int rr = e / d, ee = e - rr * d;
    Qs[rr][ee] = i0 + rr < p.sq ? Q.v[qb + (i0 + rr) * p.q_s + ee] * p.scale : 0.0;
  }
  float acc[DMAX / 16];
  [[unroll]] for (int q = 0; q < DMAX / 16; ++q) acc[q] = 0.0;
  float run_max = -1.0 / 0.0, run_sum = 0.0;

  for (int j0 = 0; j0 < p.sk; j0 += TK) {
    const int tk = min(TK, p.sk - j0);
    if (KT == 1) {
      for (int e = t; e < TK * d; e += THREADS) {
        const int ee = e / TK, jj = e - ee * TK;
        Ks[jj][ee] = jj < tk ? K.v[kb + ee * p.k_s + j0 + jj] : 0.0;
      }
    } else {
      for (int e = t; e < TK * d; e += THREADS) {
        const int jj = e / d, ee = e - jj * d;
        Ks[jj][ee] = jj < tk ? K.v[kb + (j0 + jj) * p.k_s + ee] : 0.0;
      }
    }
    for (int e = t; e < TK * dv; e += THREADS) {
      const int jj = e / dv, ee = e - jj * dv;
      Vs[jj][ee] = jj < tk ? V.v[vb + (j0 + jj) * p.v_s + ee] : 0.0;
    }
    barrier();
    [[unroll]] for (int h = 0; h < 2; ++h) {
      const int jj = c + 16 * h;
      float s = -1.0 / 0.0;
      if (jj < tk) {
        s = 0.0;
        for (int e = 0; e < d; ++e) s = fma(Qs[r][e], Ks[jj][e], s);
        if (p.mask != 0 && live)
          s += M.v[b0 * p.m_b0 + b1 * p.m_b1 + i * p.m_i + (j0 + jj) * p.m_j];
      }
      Ps[r][jj] = s;
    }
    barrier();
    // Every thread of row r finds the same maximum, then turns its two scores into weights.
    float tile_max = -1.0 / 0.0;
    for (int jj = 0; jj < tk; ++jj) tile_max = max(tile_max, Ps[r][jj]);
    const float new_max = max(run_max, tile_max);
    // All keys so far masked (-inf): nothing to weigh yet.
    const bool none = new_max == -1.0 / 0.0;
    const float keep = none ? 1.0 : exp_accurate(run_max - new_max);
    barrier();
    [[unroll]] for (int h = 0; h < 2; ++h) {
      const int jj = c + 16 * h;
      Ps[r][jj] = none || jj >= tk ? 0.0 : exp_accurate(Ps[r][jj] - new_max);
    }
    barrier();
    float tile_sum = 0.0;
    for (int jj = 0; jj < tk; ++jj) tile_sum += Ps[r][jj];
    run_sum = run_sum * keep + tile_sum;
    run_max = new_max;
    [[unroll]] for (int q = 0; q < DMAX / 16; ++q) {
      const int e = c + 16 * q;
      if (e < dv) {
        float a = acc[q] * keep;
        for (int jj = 0; jj < tk; ++jj) a = fma(Ps[r][jj], Vs[jj][e], a);
        acc[q] = a;
      }
    }
    barrier();
  }
  if (!live) return;
  const float inv = 1.0 / run_sum;
  const int yb = b0 * p.y_b0 + b1 * p.y_b1 + i * p.y_s;
  [[unroll]] for (int q = 0; q < DMAX / 16; ++q) {
    const int e = c + 16 * q;
    if (e < dv) Y.v[yb + e] = acc[q] * inv;
  }
}
