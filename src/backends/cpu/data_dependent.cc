// CPU kernels of the ops whose output shape depends on the data: NonZero, Compress, Unique and
// NonMaxSuppression. Each makes its own outputs (makes_outputs()), sized once the data is seen.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "backends/cpu/kernel_registry.h"
#include "core/narrow_types.h"

namespace lumen::cpu {
namespace {

// Whether element i of t (any dtype) is non-zero; floats compare as values (-0.0 is zero).
bool element_is_nonzero(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32:
      return t.data<float>()[i] != 0.0f;
    case DType::kFloat64:
      return t.data<double>()[i] != 0.0;
    case DType::kFloat16:
    case DType::kBFloat16:
      return (static_cast<const uint16_t*>(t.raw_data())[i] & 0x7fff) != 0;
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat8E8M0:
    case DType::kFloat4E2M1:
      return narrow_to_float(t.dtype(), static_cast<const uint8_t*>(t.raw_data())[i]) != 0.0f;
    default: {
      const size_t size = dtype_size(t.dtype());
      const auto* p = static_cast<const unsigned char*>(t.raw_data()) + i * size;
      return std::any_of(p, p + size, [](unsigned char b) { return b != 0; });
    }
  }
}

class NonZeroKernel final : public Kernel {
 public:
  explicit NonZeroKernel(const NodeContext&) {}
  bool makes_outputs() const override { return true; }
  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const int rank = x.rank();
    const int64_t n = x.numel();
    std::vector<int64_t> hits;
    for (int64_t i = 0; i < n; ++i)
      if (element_is_nonzero(x, i)) hits.push_back(i);
    const int64_t count = static_cast<int64_t>(hits.size());
    Tensor out = Tensor::empty(Shape{rank, count}, DType::kInt64);
    int64_t* y = out.data<int64_t>();
    const std::vector<int64_t> strides = x.shape().strides();
    for (int64_t j = 0; j < count; ++j) {
      int64_t rest = hits[j];
      for (int d = 0; d < rank; ++d) {
        y[d * count + j] = rest / strides[d];
        rest %= strides[d];
      }
    }
    ctx.outputs[0] = std::move(out);
  }
};

class CompressKernel final : public Kernel {
 public:
  explicit CompressKernel(const NodeContext& ctx) {
    const Shape& x = ctx.input_shape(0);
    if (ctx.has_attr("axis")) {
      axis_ = normalize_axis(ctx.attr_int("axis"), x.rank());
    } else {
      axis_ = -1;
    }
  }
  bool makes_outputs() const override { return true; }
  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const Tensor& cond = ctx.inputs[1];
    const bool* c = cond.data<bool>();
    const size_t esize = dtype_size(x.dtype());
    const auto* src = static_cast<const char*>(x.raw_data());
    // View x as [outer, dim, inner]; the flattened form (no axis) is [1, numel, 1].
    int64_t outer = 1, dim = x.numel(), inner = 1;
    if (axis_ >= 0) {
      dim = x.shape()[axis_];
      for (int d = 0; d < axis_; ++d) outer *= x.shape()[d];
      for (int d = axis_ + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    }
    std::vector<int64_t> kept;
    for (int64_t i = 0; i < std::min(dim, cond.numel()); ++i)
      if (c[i]) kept.push_back(i);
    Shape out_shape{static_cast<int64_t>(kept.size())};
    if (axis_ >= 0) {
      out_shape = x.shape();
      out_shape[axis_] = static_cast<int64_t>(kept.size());
    }
    Tensor out = Tensor::empty(out_shape, x.dtype());
    char* dst = static_cast<char*>(out.raw_data());
    const size_t row = static_cast<size_t>(inner) * esize;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t k : kept) {
        std::memcpy(dst, src + (o * dim + k) * row, row);
        dst += row;
      }
    ctx.outputs[0] = std::move(out);
  }

 private:
  int axis_;
};

// Three-way comparison of two elements of one dtype.
template <typename T>
int compare_elements(const void* a, const void* b, int64_t n) {
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] < y[i]) return -1;
    if (y[i] < x[i]) return 1;
  }
  return 0;
}

using CompareFn = int (*)(const void*, const void*, int64_t);

// The comparison for a dtype, or nullptr for one Unique does not take (float16, bfloat16).
CompareFn comparator(DType dt) {
  switch (dt) {
    case DType::kFloat32:
      return &compare_elements<float>;
    case DType::kFloat64:
      return &compare_elements<double>;
    case DType::kInt8:
      return &compare_elements<int8_t>;
    case DType::kUInt8:
    case DType::kBool:
      return &compare_elements<uint8_t>;
    case DType::kInt16:
      return &compare_elements<int16_t>;
    case DType::kUInt16:
      return &compare_elements<uint16_t>;
    case DType::kInt32:
      return &compare_elements<int32_t>;
    case DType::kUInt32:
      return &compare_elements<uint32_t>;
    case DType::kInt64:
      return &compare_elements<int64_t>;
    case DType::kUInt64:
      return &compare_elements<uint64_t>;
    default:
      return nullptr;
  }
}

std::string check_unique(const NodeContext& ctx) {
  if (comparator(ctx.input_dtype(0)) != nullptr) return "";
  return std::string("the CPU kernel does not take ") + dtype_name(ctx.input_dtype(0));
}

// Unique over slices: without an axis each element is a slice; with one, each index along the
// axis picks a slice of [outer, inner] elements. Slices compare lexicographically (NumPy's
// np.unique(axis=...) order), first occurrences keep their index.
class UniqueKernel final : public Kernel {
 public:
  explicit UniqueKernel(const NodeContext& ctx)
      : sorted_(ctx.attr_int("sorted", 1) != 0),
        compare_(comparator(ctx.input_dtype(0))),
        num_outputs_(ctx.num_outputs()) {
    if (ctx.has_attr("axis"))
      axis_ = normalize_axis(ctx.attr_int("axis"), ctx.input_shape(0).rank());
  }
  bool makes_outputs() const override { return true; }
  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const size_t esize = dtype_size(x.dtype());
    int64_t outer = 1, dim = x.numel(), inner = 1;
    if (axis_ >= 0) {
      dim = x.shape()[axis_];
      for (int d = 0; d < axis_; ++d) outer *= x.shape()[d];
      for (int d = axis_ + 1; d < x.rank(); ++d) inner *= x.shape()[d];
    }
    // Gather every slice contiguously so slices compare with one call.
    const int64_t slice = outer * inner;
    std::vector<char> slices(static_cast<size_t>(dim * slice) * esize);
    const auto* src = static_cast<const char*>(x.raw_data());
    // Empty slices (a zero dimension other than the axis) have nothing to copy, and their
    // buffers may be null.
    const int64_t copy_rows = inner > 0 ? outer : 0;
    for (int64_t i = 0; i < dim; ++i)
      for (int64_t o = 0; o < copy_rows; ++o)
        std::memcpy(slices.data() + (i * slice + o * inner) * esize,
                    src + (o * dim + i) * inner * esize, static_cast<size_t>(inner) * esize);
    auto at = [&](int64_t i) { return slices.data() + i * slice * esize; };
    // Order of slices: by value (stable, so equal slices keep their first occurrence first).
    std::vector<int64_t> order(static_cast<size_t>(dim));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return compare_(at(a), at(b), slice) < 0; });
    // Groups of equal slices: first index, count, and each slice's group.
    std::vector<int64_t> first, counts, group_of(static_cast<size_t>(dim));
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == 0 || compare_(at(order[k - 1]), at(order[k]), slice) != 0) {
        first.push_back(order[k]);
        counts.push_back(0);
      }
      counts.back() += 1;
      group_of[order[k]] = static_cast<int64_t>(first.size()) - 1;
    }
    // Output position of each group: sorted order, or order of first occurrence.
    const int64_t groups = static_cast<int64_t>(first.size());
    std::vector<int64_t> rank_of(static_cast<size_t>(groups));
    std::iota(rank_of.begin(), rank_of.end(), 0);
    std::vector<int64_t> by_pos(rank_of);  // group at each output position
    if (!sorted_) {
      std::sort(by_pos.begin(), by_pos.end(),
                [&](int64_t a, int64_t b) { return first[a] < first[b]; });
      for (int64_t p = 0; p < groups; ++p) rank_of[by_pos[p]] = p;
    }
    Shape y_shape{groups};
    if (axis_ >= 0) {
      y_shape = x.shape();
      y_shape[axis_] = groups;
    }
    Tensor y = Tensor::empty(y_shape, x.dtype());
    char* dst = static_cast<char*>(y.raw_data());
    for (int64_t p = 0; p < groups; ++p)
      for (int64_t o = 0; o < copy_rows; ++o)
        std::memcpy(dst + (o * groups + p) * inner * esize,
                    at(first[by_pos[p]]) + o * inner * esize, static_cast<size_t>(inner) * esize);
    ctx.outputs[0] = std::move(y);
    auto ints = [](const std::vector<int64_t>& v) {
      return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
    };
    std::vector<int64_t> indices(static_cast<size_t>(groups)), cnt(static_cast<size_t>(groups));
    for (int64_t p = 0; p < groups; ++p) {
      indices[p] = first[by_pos[p]];
      cnt[p] = counts[by_pos[p]];
    }
    std::vector<int64_t> inverse(static_cast<size_t>(dim));
    for (int64_t i = 0; i < dim; ++i) inverse[i] = rank_of[group_of[i]];
    if (num_outputs_ > 1) ctx.outputs[1] = ints(indices);
    if (num_outputs_ > 2) ctx.outputs[2] = ints(inverse);
    if (num_outputs_ > 3) ctx.outputs[3] = ints(cnt);
  }

 private:
  bool sorted_;
  CompareFn compare_;
  int num_outputs_;
  int axis_ = -1;
};

// Greedy non-maximum suppression per (batch, class): candidates above score_threshold in order of
// descending score (ties by lower box index), each kept unless its IoU with a kept box exceeds
// iou_threshold, at most max_output_boxes_per_class each. Output rows [batch, class, box].
class NonMaxSuppressionKernel final : public Kernel {
 public:
  explicit NonMaxSuppressionKernel(const NodeContext& ctx)
      : center_(ctx.attr_int("center_point_box", 0) == 1) {}
  bool makes_outputs() const override { return true; }
  void run(KernelContext& ctx) const override {
    const Tensor& boxes = ctx.inputs[0];
    const Tensor& scores = ctx.inputs[1];
    auto given = [&](size_t k) { return ctx.inputs.size() > k && ctx.inputs[k].defined(); };
    const int64_t max_out = given(2) ? ctx.inputs[2].data<int64_t>()[0] : 0;
    const float iou_threshold = given(3) ? ctx.inputs[3].data<float>()[0] : 0.0f;
    const bool use_score = given(4);
    const float score_threshold = use_score ? ctx.inputs[4].data<float>()[0] : 0.0f;
    const int64_t batches = boxes.shape()[0], n = boxes.shape()[1], classes = scores.shape()[1];
    std::vector<int64_t> rows;
    std::vector<float> corners(static_cast<size_t>(n) * 4);  // y1, x1, y2, x2 with y1<=y2, x1<=x2
    std::vector<int64_t> cand, kept;
    for (int64_t b = 0; b < batches && max_out > 0; ++b) {
      const float* bx = boxes.data<float>() + b * n * 4;
      for (int64_t i = 0; i < n; ++i) {
        const float* p = bx + i * 4;
        float y1, x1, y2, x2;
        if (center_) {
          x1 = p[0] - p[2] / 2;
          x2 = p[0] + p[2] / 2;
          y1 = p[1] - p[3] / 2;
          y2 = p[1] + p[3] / 2;
        } else {
          y1 = std::min(p[0], p[2]);
          y2 = std::max(p[0], p[2]);
          x1 = std::min(p[1], p[3]);
          x2 = std::max(p[1], p[3]);
        }
        float* q = &corners[i * 4];
        q[0] = y1;
        q[1] = x1;
        q[2] = y2;
        q[3] = x2;
      }
      for (int64_t c = 0; c < classes; ++c) {
        const float* s = scores.data<float>() + (b * classes + c) * n;
        cand.clear();
        for (int64_t i = 0; i < n; ++i)
          if (!use_score || s[i] > score_threshold) cand.push_back(i);
        std::stable_sort(cand.begin(), cand.end(),
                         [&](int64_t a, int64_t d) { return s[a] > s[d]; });
        kept.clear();
        for (int64_t i : cand) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          bool keep = true;
          for (int64_t k : kept)
            if (iou(&corners[i * 4], &corners[k * 4]) > iou_threshold) {
              keep = false;
              break;
            }
          if (!keep) continue;
          kept.push_back(i);
          rows.insert(rows.end(), {b, c, i});
        }
      }
    }
    ctx.outputs[0] = Tensor::from_vector<int64_t>({static_cast<int64_t>(rows.size() / 3), 3}, rows);
  }

 private:
  static float iou(const float* a, const float* b) {
    const float area_a = (a[2] - a[0]) * (a[3] - a[1]);
    const float area_b = (b[2] - b[0]) * (b[3] - b[1]);
    if (area_a <= 0.0f || area_b <= 0.0f) return 0.0f;
    const float h = std::min(a[2], b[2]) - std::max(a[0], b[0]);
    const float w = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (h <= 0.0f || w <= 0.0f) return 0.0f;
    const float inter = h * w;
    return inter / (area_a + area_b - inter);
  }
  bool center_;
};

template <typename K>
std::unique_ptr<Kernel> make(const NodeContext& ctx) {
  return std::make_unique<K>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(NonZero, &make<NonZeroKernel>, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Compress, &make<CompressKernel>, nullptr);
LUMEN_REGISTER_CPU_KERNEL(Unique, &make<UniqueKernel>, &check_unique);
LUMEN_REGISTER_CPU_KERNEL(NonMaxSuppression, &make<NonMaxSuppressionKernel>, nullptr);

}  // namespace lumen::cpu
