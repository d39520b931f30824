// CPU kernels of the shape ops that move bytes without looking at them: the views (Identity,
// Reshape, Flatten, Squeeze, Unsqueeze), Concat, Split, Shape, ConstantOfShape and Range. Every
// dtype is handled by its element size. Cast lives in shape_ops_cast.cc.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

// Below this many bytes a copy runs on one thread: a parallel region costs more than it saves.
constexpr size_t kParallelBytes = size_t{1} << 18;
// Pieces of long blocks (and chunks of long copies), one per task, when copied in parallel.
constexpr size_t kPieceBytes = size_t{1} << 16;

// The layout shared by Concat and Split: `outer` rows of the whole tensor, each row the
// concatenation of one row of every part (part k's rows are part_row[k] bytes long).
struct RowLayout {
  int64_t outer = 0;
  size_t whole_row = 0;
  std::vector<size_t> part_row;
  std::vector<size_t> part_offset;  // byte offset of part k inside a whole row

  RowLayout(const std::vector<Shape>& parts, int axis, size_t elem) {
    outer = 1;
    for (int d = 0; d < axis; ++d) outer *= parts.empty() ? 0 : parts[0].dims()[d];
    for (const Shape& s : parts) {
      int64_t inner = 1;
      for (int d = axis; d < s.rank(); ++d) inner *= s.dims()[d];
      part_offset.push_back(whole_row);
      part_row.push_back(static_cast<size_t>(inner) * elem);
      whole_row += part_row.back();
    }
  }

  // Moves the bytes between the whole tensor and the parts: gather (Concat) copies parts into the
  // whole, otherwise (Split) the whole into the parts.
  template <bool kGather>
  void copy(char* whole, const std::vector<char*>& parts) const {
    size_t total = static_cast<size_t>(outer) * whole_row;
    if (total == 0) return;
    auto move = [&](int64_t o, size_t k, auto&& copy_fn) {
      char* w = whole + static_cast<size_t>(o) * whole_row + part_offset[k];
      char* p = parts[k] + static_cast<size_t>(o) * part_row[k];
      if constexpr (kGather) {
        copy_fn(w, p, part_row[k]);
      } else {
        copy_fn(p, w, part_row[k]);
      }
    };
    auto plain = [](char* d, const char* s, size_t n) { std::memcpy(d, s, n); };
    if (total < kParallelBytes) {
      for (int64_t o = 0; o < outer; ++o)
        for (size_t k = 0; k < parts.size(); ++k)
          if (part_row[k]) move(o, k, plain);
    } else if (outer >= 4 * static_cast<int64_t>(omp_get_max_threads())) {
#pragma omp parallel for schedule(static)
      for (int64_t o = 0; o < outer; ++o)
        for (size_t k = 0; k < parts.size(); ++k)
          if (part_row[k]) move(o, k, plain);
    } else {
      // Few long rows (a decoder's past and new keys, 12 heads of 200 x 64): one parallel region
      // over pieces of at most kPieceBytes of every (row, part) block, not one region per block
      // (24 such Concats ran 2.6 ms in a GPT-2 decoding step on 16 Xeon threads with a region
      // per block).
      std::vector<size_t> first_piece(parts.size() + 1, 0);
      for (size_t k = 0; k < parts.size(); ++k)
        first_piece[k + 1] = first_piece[k] + (part_row[k] + kPieceBytes - 1) / kPieceBytes;
      const size_t per_row = first_piece.back();
      const int64_t pieces = outer * static_cast<int64_t>(per_row);
#pragma omp parallel for schedule(static)
      for (int64_t t = 0; t < pieces; ++t) {
        const int64_t o = t / static_cast<int64_t>(per_row);
        const size_t piece = static_cast<size_t>(t) % per_row;
        const size_t k =
            static_cast<size_t>(std::upper_bound(first_piece.begin(), first_piece.end(), piece) -
                                first_piece.begin() - 1);
        const size_t begin = (piece - first_piece[k]) * kPieceBytes;
        const size_t n = std::min(kPieceBytes, part_row[k] - begin);
        char* w = whole + static_cast<size_t>(o) * whole_row + part_offset[k] + begin;
        char* p = parts[k] + static_cast<size_t>(o) * part_row[k] + begin;
        if constexpr (kGather) {
          std::memcpy(w, p, n);
        } else {
          std::memcpy(p, w, n);
        }
      }
    }
  }
};

// Identity, Reshape, Flatten, Squeeze and Unsqueeze: the output is the input seen with the shape
// the plan gives it (inferred at build time), sharing its memory.
class ViewKernel final : public Kernel {
 public:
  explicit ViewKernel(Shape shape) : shape_(std::move(shape)) {}
  bool makes_outputs() const override { return true; }
  bool runs_any_shape() const override { return true; }
  void run(KernelContext& ctx) const override {
    const bool planned = !ctx.output_types.empty() && ctx.output_types[0].shape.is_static();
    ctx.outputs[0] = ctx.inputs[0].reshape(planned ? ctx.output_types[0].shape : shape_);
  }

 private:
  Shape shape_;
};

std::unique_ptr<Kernel> make_view(const NodeContext& ctx) {
  return std::make_unique<ViewKernel>(ctx.output(0).shape);
}

int axis_of(const NodeContext& ctx, int64_t fallback, int rank) {
  int64_t axis = ctx.has_attr("axis") ? ctx.attr_int("axis") : fallback;
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

class ConcatKernel final : public Kernel {
 public:
  explicit ConcatKernel(const NodeContext& ctx)
      : layout_(input_shapes(ctx), axis_of(ctx, 0, ctx.output(0).shape.rank()),
                dtype_size(ctx.output(0).dtype)) {}

  void run(KernelContext& ctx) const override {
    std::vector<char*> parts(ctx.inputs.size());
    for (size_t k = 0; k < parts.size(); ++k)
      parts[k] = layout_.part_row[k] ? static_cast<char*>(ctx.inputs[k].raw_data()) : nullptr;
    layout_.copy<true>(static_cast<char*>(ctx.outputs[0].raw_data()), parts);
  }

 private:
  static std::vector<Shape> input_shapes(const NodeContext& ctx) {
    std::vector<Shape> shapes;
    for (int i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.input_shape(i));
    return shapes;
  }
  RowLayout layout_;
};

class SplitKernel final : public Kernel {
 public:
  explicit SplitKernel(const NodeContext& ctx)
      : layout_(output_shapes(ctx), axis_of(ctx, 0, ctx.input_shape(0).rank()),
                dtype_size(ctx.input_dtype(0))) {}

  void run(KernelContext& ctx) const override {
    std::vector<char*> parts(ctx.outputs.size());
    for (size_t k = 0; k < parts.size(); ++k)
      parts[k] = layout_.part_row[k] ? static_cast<char*>(ctx.outputs[k].raw_data()) : nullptr;
    layout_.copy<false>(static_cast<char*>(ctx.inputs[0].raw_data()), parts);
  }

 private:
  static std::vector<Shape> output_shapes(const NodeContext& ctx) {
    std::vector<Shape> shapes;
    for (int i = 0; i < ctx.num_outputs(); ++i) shapes.push_back(ctx.output(i).shape);
    return shapes;
  }
  RowLayout layout_;
};

// Shape's value is known at build time (the schema sets it); the kernel writes the same dims.
class ShapeKernel final : public Kernel {
 public:
  explicit ShapeKernel(const NodeContext& ctx) {
    const Shape& in = ctx.input_shape(0);
    const Shape& out = ctx.output(0).shape;
    int64_t rank = in.rank();
    int64_t start = ctx.attr_int("start", 0);
    if (start < 0) start += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    for (int64_t i = 0; i < out.dims()[0]; ++i) dims_.push_back(in.dims()[start + i]);
  }
  void run(KernelContext& ctx) const override {
    std::copy(dims_.begin(), dims_.end(), ctx.outputs[0].data<int64_t>());
  }

 private:
  std::vector<int64_t> dims_;
};

template <typename T>
void fill_parallel(T* dst, int64_t n, T value) {
  if (static_cast<size_t>(n) * sizeof(T) < kParallelBytes) {
    std::fill_n(dst, n, value);
    return;
  }
  constexpr int64_t kChunk = static_cast<int64_t>(kPieceBytes / sizeof(T));
#pragma omp parallel for schedule(static)
  for (int64_t begin = 0; begin < n; begin += kChunk)
    std::fill_n(dst + begin, std::min(kChunk, n - begin), value);
}

class ConstantOfShapeKernel final : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const NodeContext& ctx) {
    elem_ = dtype_size(ctx.output(0).dtype);
    if (const Attribute* a = ctx.attr("value"))
      std::memcpy(&bits_, a->as_tensor().raw_data(), elem_);
  }
  void run(KernelContext& ctx) const override {
    Tensor& out = ctx.outputs[0];
    void* p = out.raw_data();
    int64_t n = out.numel();
    switch (elem_) {
      case 1:
        fill_parallel(static_cast<uint8_t*>(p), n, static_cast<uint8_t>(bits_));
        break;
      case 2:
        fill_parallel(static_cast<uint16_t*>(p), n, static_cast<uint16_t>(bits_));
        break;
      case 4:
        fill_parallel(static_cast<uint32_t*>(p), n, static_cast<uint32_t>(bits_));
        break;
      default:
        fill_parallel(static_cast<uint64_t*>(p), n, bits_);
        break;
    }
  }

 private:
  size_t elem_ = 4;
  uint64_t bits_ = 0;  // the value's bytes (little-endian host), zero by default
};

// Range: output[i] = start + i * delta, as the ONNX reference computes it. Floating types are
// evaluated in double so long ranges do not accumulate rounding error.
template <typename T>
class RangeKernel final : public Kernel {
 public:
  void run(KernelContext& ctx) const override {
    T start = ctx.inputs[0].data<T>()[0];
    T delta = ctx.inputs[2].data<T>()[0];
    T* out = ctx.outputs[0].data<T>();
    int64_t n = ctx.outputs[0].numel();
#pragma omp parallel for schedule(static) if (n > 32768)
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<T>) {
        out[i] = static_cast<T>(static_cast<int64_t>(start) + i * static_cast<int64_t>(delta));
      } else {
        out[i] = static_cast<T>(static_cast<double>(start) +
                                static_cast<double>(i) * static_cast<double>(delta));
      }
    }
  }
};

std::unique_ptr<Kernel> make_concat(const NodeContext& ctx) {
  return std::make_unique<ConcatKernel>(ctx);
}
std::unique_ptr<Kernel> make_split(const NodeContext& ctx) {
  return std::make_unique<SplitKernel>(ctx);
}
std::unique_ptr<Kernel> make_shape(const NodeContext& ctx) {
  return std::make_unique<ShapeKernel>(ctx);
}
std::unique_ptr<Kernel> make_constant_of_shape(const NodeContext& ctx) {
  return std::make_unique<ConstantOfShapeKernel>(ctx);
}

std::unique_ptr<Kernel> make_range(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kFloat32:
      return std::make_unique<RangeKernel<float>>();
    case DType::kFloat64:
      return std::make_unique<RangeKernel<double>>();
    case DType::kInt32:
      return std::make_unique<RangeKernel<int32_t>>();
    case DType::kInt64:
      return std::make_unique<RangeKernel<int64_t>>();
    default:
      ctx.fail_unsupported(std::string("Range on ") + dtype_name(ctx.input_dtype(0)));
  }
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(Identity, &make_view, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Reshape, &make_view, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Flatten, &make_view, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Squeeze, &make_view, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Unsqueeze, &make_view, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Concat, &make_concat, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Split, &make_split, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Shape, &make_shape, nullptr);
LUMEN_REGISTER_CPU_KERNEL(ConstantOfShape, &make_constant_of_shape, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Range, &make_range, nullptr);

}  // namespace lumen::cpu
