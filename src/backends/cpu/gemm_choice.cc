// pick_gemm (gemm_choice.h).
#include "backends/cpu/gemm_choice.h"

#include <vector>

namespace lumen::cpu {

KernelChoice pick_gemm(const std::string& key, const Graph& graph, const Tensor& b, int64_t rows,
                       int64_t k, int64_t n, const GemmEpilogue& epilogue, bool with_bias,
                       PackedMatrix& packed, DnnlMatmul& mm, bool onednn_any_size) {
  std::vector<float> a, bias, c;
  const bool cold = b.nbytes() > kColdWeightBytes && weights_stream_from_memory(graph);
  KernelChoice choice = pick_lumen_kernel(
      key + (cold ? " cold-weights" : ""),
      [&] {
        a = timing_data(rows * k);
        c = timing_data(rows * n);
        if (with_bias) bias = timing_data(n);
      },
      [&](bool lumen) {
        if (!cold) return;
        if (lumen)
          packed.evict();
        else
          mm.evict(b);
      },
      [&] {
        GemmEpilogue e = epilogue;
        e.bias = with_bias ? bias.data() : nullptr;
        packed_gemm(rows, a.data(), k, packed, c.data(), n, e);
      },
      [&] { mm.execute(a.data(), b.data<float>(), with_bias ? bias.data() : nullptr, c.data()); },
      onednn_any_size);
  if (choice.lumen)
    mm = DnnlMatmul();
  else
    packed = PackedMatrix();
  return choice;
}

}  // namespace lumen::cpu
