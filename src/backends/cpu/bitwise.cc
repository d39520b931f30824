// CPU kernels of the bit ops: BitShift over 8- to 64-bit integers (signed since opset 28), and
// BitwiseAnd, Or, Xor over the eight integer dtypes, all on the shared broadcasting BinaryKernel;
// BitwiseNot on UnaryKernel; BitCast as a byte copy. A shift by the type's width or more gives 0
// (C++ leaves it undefined), or -1 for a right shift of a negative signed value.
#include <cstring>
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
  if (is_integer(t) && t != DType::kInt4 && t != DType::kUInt4 && t != DType::kInt2 &&
      t != DType::kUInt2)
    return "";
  return std::string("input is ") + dtype_name(t) + "; the CPU kernel takes 8- to 64-bit integers";
}

struct AndOp {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a & b);
  }
};
struct OrOp {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a | b);
  }
};
struct XorOp {
  template <typename T>
  T operator()(T a, T b) const {
    return static_cast<T>(a ^ b);
  }
};
struct NotOp {
  template <typename T>
  T operator()(T a) const {
    return static_cast<T>(~a);
  }
};

// The eight integer dtypes of ONNX's bitwise ops.
std::string check_bitwise(const NodeContext& ctx) {
  switch (ctx.input_dtype(0)) {
    case DType::kInt8:
    case DType::kUInt8:
    case DType::kInt16:
    case DType::kUInt16:
    case DType::kInt32:
    case DType::kUInt32:
    case DType::kInt64:
    case DType::kUInt64:
      return "";
    default:
      return std::string("input is ") + dtype_name(ctx.input_dtype(0)) +
             "; the CPU kernel takes the 8-, 16-, 32- and 64-bit integers";
  }
}

// The kernel for input 0's integer dtype (check_bitwise has refused the rest).
template <typename Op>
std::unique_ptr<Kernel> make_bitwise_binary(const NodeContext& ctx) {
  return visit_numeric<kNumericOnly>(ctx.input_dtype(0),
                                     [&]<typename T>(T) -> std::unique_ptr<Kernel> {
                                       if constexpr (std::is_integral_v<T>) {
                                         return std::make_unique<BinaryKernel<T, T, Op>>(ctx);
                                       } else {
                                         ctx.fail_unsupported("CPU: bitwise ops take integers");
                                       }
                                     });
}

std::unique_ptr<Kernel> make_bitwise_not(const NodeContext& ctx) {
  return visit_numeric<kNumericOnly>(ctx.input_dtype(0),
                                     [&]<typename T>(T) -> std::unique_ptr<Kernel> {
                                       if constexpr (std::is_integral_v<T>) {
                                         return unary<T>(NotOp{});
                                       } else {
                                         ctx.fail_unsupported("CPU: bitwise ops take integers");
                                       }
                                     });
}

// BitCast: the bytes copied unchanged (little-endian hosts), except where Lumen's storage is not
// the raw bits: a bool byte is normalised to 0 or 1, and the unpacked 4- and 2-bit types keep
// their low bits, sign-extended for int4 and int2.
class BitCastKernel final : public Kernel {
 public:
  explicit BitCastKernel(const NodeContext& ctx) {
    const DType out = ctx.output(0).dtype;
    switch (out) {
      case DType::kBool:
        mode_ = Mode::kToBool;
        break;
      case DType::kUInt4:
      case DType::kFloat4E2M1:
        mode_ = Mode::kNarrow;
        bits_ = 4;
        break;
      case DType::kInt4:
        mode_ = Mode::kNarrow;
        bits_ = 4;
        signed_ = true;
        break;
      case DType::kUInt2:
        mode_ = Mode::kNarrow;
        bits_ = 2;
        break;
      case DType::kInt2:
        mode_ = Mode::kNarrow;
        bits_ = 2;
        signed_ = true;
        break;
      default:
        break;
    }
  }

  void run(KernelContext& ctx) const override {
    const auto* x = static_cast<const uint8_t*>(ctx.inputs[0].raw_data());
    auto* y = static_cast<uint8_t*>(ctx.outputs[0].raw_data());
    const int64_t n = static_cast<int64_t>(ctx.outputs[0].nbytes());
    if (mode_ == Mode::kCopy) {
      if (x != y)
        parallel_chunks(n, [&](int64_t b, int64_t e) { std::memcpy(y + b, x + b, e - b); });
      return;
    }
    const uint8_t mask = static_cast<uint8_t>((1u << bits_) - 1);
    const uint8_t sign = static_cast<uint8_t>(1u << (bits_ - 1));
    const Mode mode = mode_;
    const bool is_signed = signed_;
    parallel_chunks(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if (mode == Mode::kToBool) {
          y[i] = x[i] != 0;
          continue;
        }
        uint8_t v = x[i] & mask;
        if (is_signed && (v & sign)) v |= static_cast<uint8_t>(~mask);
        y[i] = v;
      }
    });
  }
  int in_place_input() const override { return 0; }

 private:
  enum class Mode { kCopy, kToBool, kNarrow };
  Mode mode_ = Mode::kCopy;
  int bits_ = 8;
  bool signed_ = false;
};

std::unique_ptr<Kernel> make_bit_cast(const NodeContext& ctx) {
  return std::make_unique<BitCastKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(BitShift, &make_bit_shift, &check_bit_shift);
LUMEN_REGISTER_CPU_KERNEL(BitwiseAnd, &make_bitwise_binary<AndOp>, &check_bitwise);
LUMEN_REGISTER_CPU_KERNEL(BitwiseOr, &make_bitwise_binary<OrOp>, &check_bitwise);
LUMEN_REGISTER_CPU_KERNEL(BitwiseXor, &make_bitwise_binary<XorOp>, &check_bitwise);
LUMEN_REGISTER_CPU_KERNEL(BitwiseNot, &make_bitwise_not, &check_bitwise);
LUMEN_REGISTER_CPU_KERNEL(BitCast, &make_bit_cast);

}  // namespace lumen::cpu
