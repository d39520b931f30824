// CPU kernel of BitShift over uint8, uint16, uint32 and uint64, on the shared broadcasting
// BinaryKernel. A shift by the type's width or more gives 0 (C++ leaves it undefined).
#include <memory>
#include <string>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

template <bool kLeft>
struct ShiftOp {
  template <typename T>
  T operator()(T x, T bits) const {
    constexpr T kWidth = sizeof(T) * 8;
    if (bits >= kWidth) return T(0);
    return kLeft ? static_cast<T>(x << bits) : static_cast<T>(x >> bits);
  }
};

template <bool kLeft>
std::unique_ptr<Kernel> make_shift(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
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
  if (t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64)
    return "";
  return std::string("input is ") + dtype_name(t) +
         "; the CPU kernel takes uint8, uint16, uint32, uint64";
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(BitShift, &make_bit_shift, &check_bit_shift);

}  // namespace lumen::cpu
