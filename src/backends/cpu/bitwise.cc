// CPU kernel of BitShift over 8- to 64-bit integers (signed since opset 28), on the shared
// broadcasting BinaryKernel. A shift by the type's width or more gives 0 (C++ leaves it undefined),
// or -1 for a right shift of a negative signed value.
#include <memory>
#include <string>
#include <type_traits>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

// Signed types (opset 28): a right shift is arithmetic (sign-extending), a left shift drops the
// bits pushed past the sign bit; a negative shift, or one by the width or more, leaves only the
// sign extension: -1 for a right shift of a negative x, else 0.
template <bool kLeft>
struct ShiftOp {
  template <typename T>
  T operator()(T x, T bits) const {
    constexpr T kWidth = sizeof(T) * 8;
    using U = std::make_unsigned_t<T>;
    if constexpr (std::is_signed_v<T>) {
      if (bits < 0 || bits >= kWidth) return !kLeft && x < 0 ? T(-1) : T(0);
      if (kLeft) return static_cast<T>(static_cast<U>(static_cast<U>(x) << bits));
      return static_cast<T>(x >> bits);  // arithmetic on every compiler Lumen builds with
    } else {
      if (bits >= kWidth) return T(0);
      return kLeft ? static_cast<T>(x << bits) : static_cast<T>(x >> bits);
    }
  }
};

template <bool kLeft>
std::unique_ptr<Kernel> make_shift(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kInt8:
      return std::make_unique<BinaryKernel<int8_t, int8_t, ShiftOp<kLeft>>>(ctx);
    case DType::kInt16:
      return std::make_unique<BinaryKernel<int16_t, int16_t, ShiftOp<kLeft>>>(ctx);
    case DType::kInt32:
      return std::make_unique<BinaryKernel<int32_t, int32_t, ShiftOp<kLeft>>>(ctx);
    case DType::kInt64:
      return std::make_unique<BinaryKernel<int64_t, int64_t, ShiftOp<kLeft>>>(ctx);
    case DType::kUInt16:
      return std::make_unique<BinaryKernel<uint16_t, uint16_t, ShiftOp<kLeft>>>(ctx);
    case DType::kUInt32:
      return std::make_unique<BinaryKernel<uint32_t, uint32_t, ShiftOp<kLeft>>>(ctx);
    case DType::kUInt64:
      return std::make_unique<BinaryKernel<uint64_t, uint64_t, ShiftOp<kLeft>>>(ctx);
    default:
      return std::make_unique<BinaryKernel<uint8_t, uint8_t, ShiftOp<kLeft>>>(ctx);
  }
}

std::unique_ptr<Kernel> make_bit_shift(const NodeContext& ctx) {
  return ctx.attr_string("direction", "") == "LEFT" ? make_shift<true>(ctx)
                                                    : make_shift<false>(ctx);
}

std::string check_bit_shift(const NodeContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (is_integer(t) && t != DType::kInt4 && t != DType::kUInt4 && t != DType::kInt2 && t != DType::kUInt2)
    return "";
  return std::string("input is ") + dtype_name(t) + "; the CPU kernel takes 8- to 64-bit integers";
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(BitShift, &make_bit_shift, &check_bit_shift);

}  // namespace lumen::cpu
