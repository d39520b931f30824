// CPU kernel of Cast between every pair of lumen's dtypes. Float to integer truncates toward zero
// (to narrow and unsigned targets through a wider signed integer, so negative values wrap),
// anything to bool is x != 0, float16 and bfloat16 round to nearest even (through float32,
// rounded to odd from wider types), with an F16C fast path for float32 <-> float16.
//
// ONNX's narrow types go through float32 the same way: a narrow source is decoded exactly (a
// table of its 256 patterns), a narrow float target is rounded from float32 by
// core/narrow_types.h under the `saturate` and `round_mode` attributes, and the 4- and 2-bit
// integer targets take an integer (floats truncated as for int8) and wrap to their width.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "backends/cpu/isa.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/shape_ops_cast.h"
#include "backends/cpu/simd_convert.h"
#include "core/half.h"
#include "core/narrow_types.h"

namespace lumen::cpu {
namespace {

// Storage types of the dtypes without a C++ arithmetic type of their own. Bool is read as a byte
// so that a byte other than 0 or 1 (raw data from a file) still means true.
struct F16 {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};
struct Bool8 {
  uint8_t v;
};

// Narrows a double to float rounding to odd (truncate, then set the last bit when inexact). A
// second rounding of that float to float16 or bfloat16 (nearest even) then equals rounding the
// double directly, which plain double -> float -> half does not guarantee.
inline float narrow_to_odd_float(double x) {
  float f = static_cast<float>(x);
  if (static_cast<double>(f) == x || std::isnan(x)) return f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) --bits;  // rounded up: step back
  bits |= 1;
  std::memcpy(&f, &bits, 4);
  return f;
}

// float, and everything exactly representable in float, stays as it is; wider types (double,
// 32- and 64-bit integers) round to odd first.
template <typename S>
inline float to_float_for_half(S x) {
  if constexpr (std::is_same_v<S, double> || (std::is_integral_v<S> && sizeof(S) >= 4)) {
    return narrow_to_odd_float(static_cast<double>(x));
  } else {
    return static_cast<float>(x);
  }
}

// Float to a signed integer type I, truncating toward zero. ONNX leaves NaN and values beyond
// I's range undefined (and C++ makes them undefined behaviour): here NaN becomes 0 and the rest
// saturate at I's limits.
template <typename I, typename F>
inline I truncate_saturated(F x) {
  constexpr F kLow = static_cast<F>(std::numeric_limits<I>::min());   // -2^(bits-1), exact
  constexpr F kHigh = static_cast<F>(std::numeric_limits<I>::max());  // may round up to 2^(bits-1)
  if (!(x == x)) return 0;
  if (x <= kLow) return std::numeric_limits<I>::min();
  if (x >= kHigh) return std::numeric_limits<I>::max();
  return static_cast<I>(x);
}

template <typename D, typename S>
inline D convert(S x) {
  if constexpr (std::is_same_v<S, F16>) {
    return convert<D>(half_to_float(x.bits));
  } else if constexpr (std::is_same_v<S, BF16>) {
    return convert<D>(bfloat16_to_float(x.bits));
  } else if constexpr (std::is_same_v<S, Bool8>) {
    return convert<D>(static_cast<uint8_t>(x.v != 0));
  } else if constexpr (std::is_same_v<D, Bool8>) {
    return Bool8{static_cast<uint8_t>(x != S(0))};
  } else if constexpr (std::is_same_v<D, F16>) {
    return F16{float_to_half(to_float_for_half(x))};
  } else if constexpr (std::is_same_v<D, BF16>) {
    return BF16{float_to_bfloat16(to_float_for_half(x))};
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D> && sizeof(D) < 4) {
    // Truncate toward zero through int32, then wrap into the narrow type.
    return static_cast<D>(truncate_saturated<int32_t>(x));
  } else if constexpr (std::is_floating_point_v<S> && std::is_same_v<D, uint32_t>) {
    return static_cast<D>(truncate_saturated<int64_t>(x));  // negative values wrap
  } else if constexpr (std::is_floating_point_v<S> && std::is_same_v<D, uint64_t>) {
    constexpr S kTwo64 = static_cast<S>(18446744073709551616.0);
    if (!(x >= S(0))) return static_cast<D>(truncate_saturated<int64_t>(x));  // NaN: 0
    return x >= kTwo64 ? std::numeric_limits<D>::max() : static_cast<D>(x);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    return truncate_saturated<D>(x);  // int32, int64
  } else {
    return static_cast<D>(x);
  }
}

template <typename D, typename S>
void cast_range(const void* src, void* dst, int64_t begin, int64_t end) {
  const S* s = static_cast<const S*>(src);
  D* d = static_cast<D*>(dst);
  int64_t i = begin;
  if constexpr (std::is_same_v<D, F16> && std::is_same_v<S, float>) {
    i += floats_to_halves_f16c(s + begin, reinterpret_cast<uint16_t*>(d + begin), end - begin);
  } else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, F16>) {
    i +=
        halves_to_floats_f16c(reinterpret_cast<const uint16_t*>(s + begin), d + begin, end - begin);
  }
  const auto rest = [&](int64_t from) {
    for (int64_t j = from; j < end; ++j) d[j] = convert<D>(s[j]);
  };
  isa_call(rest, i);
}

using CastFn = void (*)(const void* src, void* dst, int64_t begin, int64_t end);

// Calls f with a value of the storage type of `dtype` (a standard dtype; the narrow ones get
// nullptr).
template <typename Fn, typename F>
Fn visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f(float{});
    case DType::kFloat16:
      return f(F16{});
    case DType::kBFloat16:
      return f(BF16{});
    case DType::kFloat64:
      return f(double{});
    case DType::kInt8:
      return f(int8_t{});
    case DType::kUInt8:
      return f(uint8_t{});
    case DType::kInt32:
      return f(int32_t{});
    case DType::kInt64:
      return f(int64_t{});
    case DType::kBool:
      return f(Bool8{});
    case DType::kInt16:
      return f(int16_t{});
    case DType::kUInt16:
      return f(uint16_t{});
    case DType::kUInt32:
      return f(uint32_t{});
    case DType::kUInt64:
      return f(uint64_t{});
    default:
      return nullptr;
  }
}

// --- Casts from or to a narrow type ---

// How values become a narrow target, and the table of a narrow source's 256 values.
struct NarrowCast {
  DType from;
  DType to;
  bool saturate = true;
  // Opsets 19-23: infinity to float8 FNUZ is NaN even when saturating (set by the importer).
  bool fnuz_inf_to_nan = false;
  E8M0Rounding mode = E8M0Rounding::kUp;
  float decoded[256] = {};
};

// x of storage type S as float32 on the way to a narrow float (rounded to odd from wider types, so
// that the narrow rounding after it is the only one).
template <typename S>
inline float float_of(S x) {
  if constexpr (std::is_same_v<S, F16>) {
    return half_to_float(x.bits);
  } else if constexpr (std::is_same_v<S, BF16>) {
    return bfloat16_to_float(x.bits);
  } else if constexpr (std::is_same_v<S, Bool8>) {
    return x.v != 0 ? 1.0f : 0.0f;
  } else {
    return to_float_for_half(x);
  }
}

// x as an integer on the way to a 4- or 2-bit integer (floats truncated as for int8).
template <typename S>
inline int64_t integer_of(S x) {
  if constexpr (std::is_same_v<S, F16> || std::is_same_v<S, BF16>) {
    return convert<int32_t>(x);
  } else if constexpr (std::is_same_v<S, Bool8>) {
    return x.v != 0;
  } else if constexpr (std::is_floating_point_v<S>) {
    return truncate_saturated<int32_t>(x);
  } else {
    return static_cast<int64_t>(x);  // uint64 wraps, keeping the low bits
  }
}

// d[i] = encode(float_of(s[i])) for i in [begin, end).
template <typename S, typename Encode>
inline void encode_range(const S* s, uint8_t* d, int64_t begin, int64_t end, Encode encode) {
  for (int64_t i = begin; i < end; ++i) d[i] = encode(float_of(s[i]));
}

using NarrowFn = void (*)(const void* src, void* dst, int64_t begin, int64_t end,
                          const NarrowCast& c);

// A dtype of storage type S (a standard one, or float for decoded narrow values) to a narrow one;
// the target's conversion is chosen once per range.
template <typename S>
void to_narrow_range(const void* src, void* dst, int64_t begin, int64_t end, const NarrowCast& c) {
  const S* s = static_cast<const S*>(src);
  uint8_t* d = static_cast<uint8_t*>(dst);
  const bool sat = c.saturate, inf_nan = c.fnuz_inf_to_nan;
  switch (c.to) {
    case DType::kFloat8E4M3FN:
      return encode_range(s, d, begin, end,
                          [sat](float f) { return float_to_float8e4m3fn(f, sat); });
    case DType::kFloat8E5M2:
      return encode_range(s, d, begin, end, [sat](float f) { return float_to_float8e5m2(f, sat); });
    case DType::kFloat8E4M3FNUZ:
      return encode_range(s, d, begin, end, [sat, inf_nan](float f) -> uint8_t {
        return inf_nan && std::isinf(f) ? 0x80 : float_to_float8e4m3fnuz(f, sat);
      });
    case DType::kFloat8E5M2FNUZ:
      return encode_range(s, d, begin, end, [sat, inf_nan](float f) -> uint8_t {
        return inf_nan && std::isinf(f) ? 0x80 : float_to_float8e5m2fnuz(f, sat);
      });
    case DType::kFloat8E8M0: {
      const E8M0Rounding mode = c.mode;
      return encode_range(s, d, begin, end,
                          [sat, mode](float f) { return float_to_float8e8m0(f, sat, mode); });
    }
    case DType::kFloat4E2M1:
      return encode_range(s, d, begin, end, [](float f) { return float_to_float4e2m1(f); });
    default:  // the 4- and 2-bit integers
      for (int64_t i = begin; i < end; ++i) d[i] = wrap_sub_byte(c.to, integer_of(s[i]));
  }
}

// A narrow dtype to a standard one (storage type D), through the exact float32 value.
template <typename D>
void from_narrow_range(const void* src, void* dst, int64_t begin, int64_t end,
                       const NarrowCast& c) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  D* d = static_cast<D*>(dst);
  for (int64_t i = begin; i < end; ++i) d[i] = convert<D>(c.decoded[s[i]]);
}

// A narrow dtype to another narrow one, through the decoded values in blocks.
void narrow_to_narrow_range(const void* src, void* dst, int64_t begin, int64_t end,
                            const NarrowCast& c) {
  const uint8_t* s = static_cast<const uint8_t*>(src);
  uint8_t* d = static_cast<uint8_t*>(dst);
  constexpr int64_t kBlock = 256;
  float values[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t n = std::min(kBlock, end - b);
    for (int64_t i = 0; i < n; ++i) values[i] = c.decoded[s[b + i]];
    to_narrow_range<float>(values, d + b, 0, n, c);
  }
}

E8M0Rounding e8m0_rounding(const NodeContext& ctx) {
  const std::string mode = ctx.attr_string("round_mode", "up");
  if (mode == "up") return E8M0Rounding::kUp;
  if (mode == "down") return E8M0Rounding::kDown;
  return E8M0Rounding::kNearest;  // the schema admits only these three
}

class CastKernel final : public Kernel {
 public:
  explicit CastKernel(const NodeContext& ctx) {
    DType from = ctx.input_dtype(0);
    DType to = ctx.output(0).dtype;
    elem_ = dtype_size(to);
    if (from == to) return;  // a plain copy
    if (is_narrow(from) || is_narrow(to)) {
      narrow_ = std::make_unique<NarrowCast>();
      narrow_->from = from;
      narrow_->to = to;
      narrow_->saturate = ctx.attr_int("saturate", 1) != 0;
      narrow_->fnuz_inf_to_nan = ctx.attr_int("fnuz_inf_to_nan", 0) != 0;
      narrow_->mode = e8m0_rounding(ctx);
      if (is_narrow(from)) {
        for (int b = 0; b < 256; ++b)
          narrow_->decoded[b] = narrow_to_float(from, static_cast<uint8_t>(b));
      }
      if (is_narrow(from) && is_narrow(to)) {
        narrow_fn_ = &narrow_to_narrow_range;
      } else if (is_narrow(to)) {
        narrow_fn_ = visit_dtype<NarrowFn>(
            from, [](auto s) -> NarrowFn { return &to_narrow_range<decltype(s)>; });
      } else {
        narrow_fn_ = visit_dtype<NarrowFn>(
            to, [](auto d) -> NarrowFn { return &from_narrow_range<decltype(d)>; });
      }
      return;
    }
    fn_ = visit_dtype<CastFn>(from, [&](auto s) {
      return visit_dtype<CastFn>(
          to, [&](auto d) -> CastFn { return &cast_range<decltype(d), decltype(s)>; });
    });
  }

  void run(KernelContext& ctx) const override {
    const Tensor& in = ctx.inputs[0];
    Tensor& out = ctx.outputs[0];
    int64_t n = in.numel();
    if (n == 0) return;
    if (fn_ == nullptr && narrow_fn_ == nullptr) {
      std::memcpy(out.raw_data(), in.raw_data(), static_cast<size_t>(n) * elem_);
      return;
    }
    const void* src = in.raw_data();
    void* dst = out.raw_data();
    const NarrowCast* narrow = narrow_.get();
    auto range = [&](int64_t begin, int64_t end) {
      if (fn_ != nullptr)
        fn_(src, dst, begin, end);
      else
        narrow_fn_(src, dst, begin, end, *narrow);
    };
    if (n < kParallelElements) {
      range(0, n);
      return;
    }
    // Contiguous chunks of 4K elements, so each thread's stores stay on whole cache lines.
    constexpr int64_t kChunk = 4096;
    int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) range(c * kChunk, std::min(n, (c + 1) * kChunk));
  }

 private:
  static constexpr int64_t kParallelElements = 32768;
  CastFn fn_ = nullptr;
  NarrowFn narrow_fn_ = nullptr;
  std::unique_ptr<NarrowCast> narrow_;
  size_t elem_ = 0;
};

}  // namespace

std::unique_ptr<Kernel> make_cast_kernel(const NodeContext& ctx) {
  return std::make_unique<CastKernel>(ctx);
}

LUMEN_REGISTER_CPU_KERNEL(Cast, &make_cast_kernel, nullptr);

}  // namespace lumen::cpu
