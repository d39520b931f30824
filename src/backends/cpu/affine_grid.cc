// CPU kernel of AffineGrid over float16, float32 and float64. The base coordinates along each
// axis are worked out once (in double); each output point is theta times (x, y[, z], 1),
// computed in double and rounded once. Batches and rows run in parallel.
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/numeric_types.h"

namespace lumen::cpu {
namespace {

constexpr int64_t kParallelPoints = 1 << 13;

// The evenly spaced coordinates of `size` points over [-1, 1]: pixel centres with
// align_corners=0, and corner pixels at exactly -1 and 1 with align_corners=1 (a single pixel
// is at 0, or -1 with align_corners=1).
std::vector<double> base_coordinates(int64_t size, bool align_corners) {
  std::vector<double> v(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; ++i) {
    if (align_corners)
      v[i] = size == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(size - 1);
    else
      v[i] = (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(size) - 1.0;
  }
  return v;
}

template <typename T>
class AffineGridKernel final : public Kernel {
 public:
  explicit AffineGridKernel(const NodeContext& ctx) {
    const Shape& out = ctx.output(0).shape;
    dims_ = static_cast<int>(out[-1]);
    batch_ = out[0];
    const bool align = ctx.attr_int("align_corners", 0) == 1;
    // Output (N, [D,] H, W, dims): x runs along W, y along H, z along D.
    for (int a = 0; a < dims_; ++a) coords_.push_back(base_coordinates(out[dims_ - a], align));
  }

  void run(KernelContext& ctx) const override {
    const T* theta = ctx.inputs[0].data<T>();
    T* grid = ctx.outputs[0].data<T>();
    const int dims = dims_;
    const int64_t width = static_cast<int64_t>(coords_[0].size());
    const int64_t height = static_cast<int64_t>(coords_[1].size());
    const int64_t depth = dims == 3 ? static_cast<int64_t>(coords_[2].size()) : 1;
    const int64_t rows = batch_ * depth * height;
    const bool parallel = rows * width > kParallelPoints;
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t h = r % height, d = (r / height) % depth, n = r / (height * depth);
      double m[3][4];
      for (int i = 0; i < dims; ++i)
        for (int j = 0; j <= dims; ++j)
          m[i][j] = static_cast<double>(theta[(n * dims + i) * (dims + 1) + j]);
      const double y = coords_[1][h];
      const double z = dims == 3 ? coords_[2][d] : 0.0;
      T* out = grid + r * width * dims;
      for (int64_t w = 0; w < width; ++w) {
        const double x = coords_[0][w];
        for (int i = 0; i < dims; ++i) {
          double v = m[i][0] * x + m[i][1] * y + m[i][dims];
          if (dims == 3) v += m[i][2] * z;
          if constexpr (std::is_same_v<T, double>)
            out[w * dims + i] = v;
          else
            out[w * dims + i] = static_cast<T>(static_cast<float>(v));
        }
      }
    }
  }

 private:
  int dims_ = 2;
  int64_t batch_ = 0;
  std::vector<std::vector<double>> coords_;  // x, y[, z]
};

std::string check_affine_grid(const NodeContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16) return "";
  return std::string("theta is ") + dtype_name(t) +
         "; the CPU kernel takes float16, float32, float64";
}

std::unique_ptr<Kernel> make_affine_grid(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kFloat64:
      return std::make_unique<AffineGridKernel<double>>(ctx);
    case DType::kFloat16:
      return std::make_unique<AffineGridKernel<Float16>>(ctx);
    case DType::kFloat32:
      return std::make_unique<AffineGridKernel<float>>(ctx);
    default:
      ctx.fail_unsupported("CPU: " + check_affine_grid(ctx));
  }
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(AffineGrid, &make_affine_grid, &check_affine_grid);

}  // namespace lumen::cpu
