// The CPU kernel of MatMulNBits (matmul_nbits.cc): what tests reach of it.
#pragma once

namespace lumen::cpu {

// While on, MatMulNBits kernels compiled afterwards use their AVX2 code even where the CPU has
// AVX-512 (tests check both variants on one machine). Off by default.
void set_matmul_nbits_avx2_only(bool on);

}  // namespace lumen::cpu
