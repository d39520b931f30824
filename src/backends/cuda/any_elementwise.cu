// Dtype-generic element-wise kernels: broadcast binary ops and comparisons, unary math, Where,
// Cast between any two types and Clip with bounds read on the device. One thread per output
// element, grid-stride loops; the op is a kernel argument, the element type a template.
#include <cfloat>
#include <cmath>

#include "backends/cuda/any_launch.h"
#include "backends/cuda/any_types.cuh"

namespace lumen::cuda {
namespace {

template <typename V>
__device__ __forceinline__ V floor_mod(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    const V r = fmod(a, b);
    if (r == V(0)) return copysign(V(0), b);
    return (r < 0) != (b < 0) ? r + b : r;
  } else if constexpr (std::is_signed_v<V>) {
    if (b == V(0) || b == V(-1)) return V(0);
    const V r = static_cast<V>(a % b);
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<V>(r + b) : r;
  } else {
    return b == V(0) ? V(0) : static_cast<V>(a % b);
  }
}

template <typename V>
__device__ __forceinline__ V trunc_mod(V a, V b) {
  if constexpr (std::is_floating_point_v<V>) {
    return fmod(a, b);
  } else if constexpr (std::is_signed_v<V>) {
    return b == V(0) || b == V(-1) ? V(0) : static_cast<V>(a % b);
  } else {
    return b == V(0) ? V(0) : static_cast<V>(a % b);
  }
}

// BitShift as the CPU's: signed right shifts sign-extend, left shifts drop the bits past the
// top; a shift by the width or more (or a negative one) leaves -1 (right shift of a negative) or 0.
template <typename V>
__device__ __forceinline__ V shift(bool left, V x, V bits) {
  constexpr int kWidth = sizeof(V) * 8;
  using U = std::make_unsigned_t<V>;
  if constexpr (std::is_signed_v<V>) {
    if (bits < 0 || bits >= kWidth) return !left && x < 0 ? V(-1) : V(0);
    if (left) return static_cast<V>(static_cast<U>(static_cast<U>(x) << bits));
    return static_cast<V>(x >> bits);
  } else {
    if (bits >= static_cast<V>(kWidth)) return V(0);
    return left ? static_cast<V>(x << bits) : static_cast<V>(x >> bits);
  }
}

template <typename V>
__device__ __forceinline__ V apply_any_binary(AnyBinaryOp op, V a, V b) {
  if constexpr (std::is_same_v<V, bool>) {
    switch (op) {
      case AnyBinaryOp::kAnd:
        return a && b;
      case AnyBinaryOp::kOr:
        return a || b;
      case AnyBinaryOp::kXor:
        return a != b;
      default:
        return a;
    }
  } else {
    switch (op) {
      case AnyBinaryOp::kAdd:
        return static_cast<V>(a + b);
      case AnyBinaryOp::kSub:
        return static_cast<V>(a - b);
      case AnyBinaryOp::kMul:
        return static_cast<V>(a * b);
      case AnyBinaryOp::kDiv:
        if constexpr (std::is_integral_v<V>) {
          if (b == V(0)) return V(0);
          if constexpr (std::is_signed_v<V>)
            if (b == V(-1)) return static_cast<V>(V(0) - a);
        }
        return static_cast<V>(a / b);
      case AnyBinaryOp::kPow:
        if constexpr (std::is_integral_v<V>)
          return static_cast<V>(pow(static_cast<double>(a), static_cast<double>(b)));
        else
          return pow(a, b);
      case AnyBinaryOp::kMin:
        return (b < a || b != b) ? b : a;
      case AnyBinaryOp::kMax:
        return (b > a || b != b) ? b : a;
      case AnyBinaryOp::kMod:
        return floor_mod(a, b);
      case AnyBinaryOp::kFMod:
        return trunc_mod(a, b);
      case AnyBinaryOp::kBitAnd:
        if constexpr (std::is_integral_v<V>) return static_cast<V>(a & b);
        return a;
      case AnyBinaryOp::kBitOr:
        if constexpr (std::is_integral_v<V>) return static_cast<V>(a | b);
        return a;
      case AnyBinaryOp::kBitXor:
        if constexpr (std::is_integral_v<V>) return static_cast<V>(a ^ b);
        return a;
      case AnyBinaryOp::kShiftLeft:
      case AnyBinaryOp::kShiftRight:
        if constexpr (std::is_integral_v<V>) return shift(op == AnyBinaryOp::kShiftLeft, a, b);
        return a;
      case AnyBinaryOp::kPRelu:
        if constexpr (std::is_signed_v<V>) return a < V(0) ? static_cast<V>(a * b) : a;
        return a;
      default:
        return a;
    }
  }
}

template <typename V>
__device__ __forceinline__ bool apply_compare(CompareOp op, V a, V b) {
  switch (op) {
    case CompareOp::kLess:
      return a < b;
    case CompareOp::kLessEqual:
      return a <= b;
    case CompareOp::kGreater:
      return a > b;
    case CompareOp::kGreaterEqual:
      return a >= b;
    case CompareOp::kEqual:
      return a == b;
  }
  return false;
}

// kBroadcast false: both inputs have the output's shape.
template <typename T, bool kBroadcast>
__global__ void any_binary_kernel(AnyBinaryOp op, const T* a, const T* b, T* y, int64_t n,
                                  BroadcastDesc d) {
  ANY_GRID_LOOP(i, n) {
    int64_t ia = i, ib = i;
    if constexpr (kBroadcast) {
      ia = strided_offset(i, d.rank, d.dims, d.a_strides);
      ib = strided_offset(i, d.rank, d.dims, d.b_strides);
    }
    y[i] = store_as<T>(apply_any_binary<math_t<T>>(op, load(a, ia), load(b, ib)));
  }
}

template <typename T, bool kBroadcast>
__global__ void compare_kernel(CompareOp op, const T* a, const T* b, bool* y, int64_t n,
                               BroadcastDesc d) {
  ANY_GRID_LOOP(i, n) {
    int64_t ia = i, ib = i;
    if constexpr (kBroadcast) {
      ia = strided_offset(i, d.rank, d.dims, d.a_strides);
      ib = strided_offset(i, d.rank, d.dims, d.b_strides);
    }
    y[i] = apply_compare<math_t<T>>(op, load(a, ia), load(b, ib));
  }
}

template <typename A, typename B>
__global__ void pow_mixed_kernel(const A* a, const B* b, A* y, int64_t n, BroadcastDesc d) {
  ANY_GRID_LOOP(i, n) {
    const double base = static_cast<double>(load(a, strided_offset(i, d.rank, d.dims, d.a_strides)));
    const double e = static_cast<double>(load(b, strided_offset(i, d.rank, d.dims, d.b_strides)));
    y[i] = store_as<A>(pow(base, e));
  }
}

bool is_plain(const BroadcastDesc& d) {
  int64_t stride = 1;
  for (int k = d.rank - 1; k >= 0; --k) {
    if (d.dims[k] != 1 && (d.a_strides[k] != stride || d.b_strides[k] != stride)) return false;
    stride *= d.dims[k];
  }
  return true;
}

template <typename V>
__device__ __forceinline__ V apply_float_unary(AnyUnaryOp op, V v, const UnaryParams& p) {
  const V alpha = p.alpha, beta = p.beta, gamma = p.gamma;
  switch (op) {
    case AnyUnaryOp::kNeg:
      return -v;
    case AnyUnaryOp::kAbs:
      return fabs(v);
    case AnyUnaryOp::kSign:
      return v > V(0) ? V(1) : v < V(0) ? V(-1) : v;  // 0 and NaN stay
    case AnyUnaryOp::kRound:
      return rint(v);  // halves to even
    case AnyUnaryOp::kTan:
      return tan(v);
    case AnyUnaryOp::kAsin:
      return asin(v);
    case AnyUnaryOp::kAcos:
      return acos(v);
    case AnyUnaryOp::kAtan:
      return atan(v);
    case AnyUnaryOp::kSinh:
      return sinh(v);
    case AnyUnaryOp::kCosh:
      return cosh(v);
    case AnyUnaryOp::kAsinh:
      return asinh(v);
    case AnyUnaryOp::kAcosh:
      return acosh(v);
    case AnyUnaryOp::kAtanh:
      return atanh(v);
    case AnyUnaryOp::kSelu:
      return v > V(0) ? gamma * v : gamma * (alpha * exp(v) - alpha);
    case AnyUnaryOp::kCelu:
      if (v != v) return v;  // NaN stays NaN, as on the host
      return (v > V(0) ? v : V(0)) +
             (alpha * (exp(v / alpha) - V(1)) < V(0) ? alpha * (exp(v / alpha) - V(1)) : V(0));
    case AnyUnaryOp::kSoftsign:
      return v / (V(1) + fabs(v));
    case AnyUnaryOp::kMish:
      return v * tanh(v > V(20) ? v : log1p(exp(v)));
    case AnyUnaryOp::kThresholdedRelu:
      return v > alpha ? v : V(0);
    case AnyUnaryOp::kShrink:  // alpha: bias, beta: lambd
      return v < -beta ? v + alpha : v > beta ? v - alpha : V(0);
    case AnyUnaryOp::kErf:
      return erf(v);
    case AnyUnaryOp::kExp:
      return exp(v);
    case AnyUnaryOp::kLog:
      return log(v);
    case AnyUnaryOp::kSqrt:
      return sqrt(v);
    case AnyUnaryOp::kReciprocal:
      return V(1) / v;
    case AnyUnaryOp::kFloor:
      return floor(v);
    case AnyUnaryOp::kCeil:
      return ceil(v);
    case AnyUnaryOp::kSin:
      return sin(v);
    case AnyUnaryOp::kCos:
      return cos(v);
    case AnyUnaryOp::kRelu:
      return v < V(0) ? V(0) : v;
    case AnyUnaryOp::kSigmoid:
      return V(1) / (V(1) + exp(-v));
    case AnyUnaryOp::kTanh:
      return tanh(v);
    case AnyUnaryOp::kScale:
      return v * alpha;
    default:
      return v;
  }
}

template <typename V>
__device__ __forceinline__ V apply_int_unary(AnyUnaryOp op, V v, const UnaryParams& p) {
  switch (op) {
    case AnyUnaryOp::kNot:
      return !v;
    case AnyUnaryOp::kBitNot:
      if constexpr (std::is_same_v<V, bool>) return !v;
      else return static_cast<V>(~v);
    case AnyUnaryOp::kNeg:
      return static_cast<V>(V(0) - v);
    case AnyUnaryOp::kAbs:
      if constexpr (std::is_signed_v<V>) return v < V(0) ? static_cast<V>(V(0) - v) : v;
      return v;
    case AnyUnaryOp::kSign:
      if constexpr (std::is_signed_v<V>) return v > V(0) ? V(1) : v < V(0) ? V(-1) : V(0);
      return v > V(0) ? V(1) : V(0);
    case AnyUnaryOp::kRelu:
      if constexpr (std::is_signed_v<V>) return v < V(0) ? V(0) : v;
      return v;
    case AnyUnaryOp::kShrink: {
      const double d = static_cast<double>(v);
      return static_cast<V>(d < -p.beta ? d + p.alpha : d > p.beta ? d - p.alpha : 0.0);
    }
    case AnyUnaryOp::kRound:
    case AnyUnaryOp::kFloor:
    case AnyUnaryOp::kCeil:
      return v;
    default:
      return v;
  }
}

template <typename T>
__global__ void any_unary_kernel(AnyUnaryOp op, UnaryParams p, const T* x, T* y, int64_t n) {
  ANY_GRID_LOOP(i, n) {
    const math_t<T> v = load(x, i);
    if constexpr (kIsFloat<T>)
      y[i] = store_as<T>(apply_float_unary(op, v, p));
    else
      y[i] = store_as<T>(apply_int_unary(op, v, p));
  }
}

template <typename T>
__global__ void is_special_kernel(AnyUnaryOp op, UnaryParams p, const T* x, bool* y, int64_t n) {
  ANY_GRID_LOOP(i, n) {
    const math_t<T> v = load(x, i);
    if (op == AnyUnaryOp::kIsNaN) {
      y[i] = v != v;
    } else {
      const bool inf = isinf(static_cast<double>(v));
      y[i] = inf && ((v > 0 && p.detect_positive) || (v < 0 && p.detect_negative));
    }
  }
}

template <typename T>
__global__ void where_kernel(const bool* c, const T* a, const T* b, T* y, int64_t n,
                             WhereDesc d) {
  ANY_GRID_LOOP(i, n) {
    int64_t ic = 0, ia = 0, ib = 0, rest = i;
    for (int k = d.rank - 1; k >= 0; --k) {
      const int64_t q = rest % d.dims[k];
      rest /= d.dims[k];
      ic += q * d.c_strides[k];
      ia += q * d.a_strides[k];
      ib += q * d.b_strides[k];
    }
    y[i] = c[ic] ? a[ia] : b[ib];
  }
}

// A float to a signed integer type I, truncating toward zero: NaN gives 0 and values beyond I's
// range saturate (as the CPU's Cast does; the plain conversion would be undefined).
template <typename I>
__device__ __forceinline__ I truncate_saturated(double d) {
  constexpr I kMax = static_cast<I>(~static_cast<std::make_unsigned_t<I>>(0) >> 1);
  constexpr I kMin = static_cast<I>(-kMax - 1);
  if (d != d) return I(0);
  if (d <= static_cast<double>(kMin)) return kMin;
  if (d >= static_cast<double>(kMax)) return kMax;
  return static_cast<I>(d);
}

// A float to integer type D as the CPU's Cast: narrow types through int32 (wrapping), uint32
// through int64, uint64 saturating above and wrapping below zero.
template <typename D>
__device__ __forceinline__ D float_to_int(double d) {
  if constexpr (sizeof(D) < 4) {
    return static_cast<D>(truncate_saturated<int32_t>(d));
  } else if constexpr (std::is_same_v<D, uint32_t>) {
    return static_cast<D>(truncate_saturated<int64_t>(d));
  } else if constexpr (std::is_same_v<D, uint64_t>) {
    if (!(d >= 0.0)) return static_cast<D>(truncate_saturated<int64_t>(d));
    return d >= 18446744073709551616.0 ? ~D(0) : static_cast<D>(d);
  } else {
    return truncate_saturated<D>(d);
  }
}

template <typename S, typename D>
__global__ void any_cast_kernel(const S* x, D* y, int64_t n) {
  ANY_GRID_LOOP(i, n) {
    const math_t<S> v = load(x, i);
    if constexpr (kIsFloat<S> && std::is_integral_v<D> && !std::is_same_v<D, bool>)
      y[i] = float_to_int<D>(static_cast<double>(v));
    else if constexpr (std::is_same_v<S, bool>)
      y[i] = store_as<D>(static_cast<int>(v));
    else
      y[i] = store_as<D>(v);
  }
}

template <typename T>
__global__ void clip_kernel(const T* x, const T* lo, const T* hi, T* y, int64_t n) {
  using V = math_t<T>;
  const bool has_lo = lo != nullptr, has_hi = hi != nullptr;
  const V l = has_lo ? load(lo, 0) : V(0), h = has_hi ? load(hi, 0) : V(0);
  ANY_GRID_LOOP(i, n) {
    V v = load(x, i);
    if (v == v) {
      if (has_lo && v < l) v = l;
      if (has_hi && v > h) v = h;
    }
    y[i] = store_as<T>(v);
  }
}

}  // namespace

void launch_any_binary(Elem t, AnyBinaryOp op, const void* a, const void* b, void* y, int64_t n,
                       const BroadcastDesc& desc, cudaStream_t stream) {
  if (n == 0) return;
  const bool plain = is_plain(desc);
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    if (plain)
      any_binary_kernel<T, false>
          <<<any_blocks(n), kAnyThreads, 0, stream>>>(op, pa, pb, static_cast<T*>(y), n, desc);
    else
      any_binary_kernel<T, true>
          <<<any_blocks(n), kAnyThreads, 0, stream>>>(op, pa, pb, static_cast<T*>(y), n, desc);
  });
}

void launch_pow_mixed(Elem base_t, Elem exp_t, const void* a, const void* b, void* y, int64_t n,
                      const BroadcastDesc& desc, cudaStream_t stream) {
  if (n == 0) return;
  with_elem(base_t, [&](auto atag) {
    using A = decltype(atag);
    auto run = [&](auto btag) {
      using B = decltype(btag);
      if constexpr (!std::is_same_v<A, bool>)
        pow_mixed_kernel<A, B><<<any_blocks(n), kAnyThreads, 0, stream>>>(
            static_cast<const A*>(a), static_cast<const B*>(b), static_cast<A*>(y), n, desc);
    };
    switch (exp_t) {
      case Elem::kF32: return run(float{});
      case Elem::kF64: return run(double{});
      case Elem::kI32: return run(int32_t{});
      default: return run(int64_t{});
    }
  });
}

void launch_compare(Elem t, CompareOp op, const void* a, const void* b, bool* y, int64_t n,
                    const BroadcastDesc& desc, cudaStream_t stream) {
  if (n == 0) return;
  const bool plain = is_plain(desc);
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = static_cast<const T*>(a);
    const T* pb = static_cast<const T*>(b);
    if (plain)
      compare_kernel<T, false><<<any_blocks(n), kAnyThreads, 0, stream>>>(op, pa, pb, y, n, desc);
    else
      compare_kernel<T, true><<<any_blocks(n), kAnyThreads, 0, stream>>>(op, pa, pb, y, n, desc);
  });
}

void launch_any_unary(Elem t, AnyUnaryOp op, const UnaryParams& p, const void* x, void* y,
                      int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    if (op == AnyUnaryOp::kIsNaN || op == AnyUnaryOp::kIsInf) {
      if constexpr (kIsFloat<T>)
        is_special_kernel<T><<<any_blocks(n), kAnyThreads, 0, stream>>>(
            op, p, static_cast<const T*>(x), static_cast<bool*>(y), n);
      return;
    }
    any_unary_kernel<T><<<any_blocks(n), kAnyThreads, 0, stream>>>(op, p, static_cast<const T*>(x),
                                                                   static_cast<T*>(y), n);
  });
}

void launch_where(Elem t, const bool* cond, const void* a, const void* b, void* y, int64_t n,
                  const WhereDesc& desc, cudaStream_t stream) {
  if (n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    where_kernel<T><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        cond, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(y), n, desc);
  });
}

void launch_any_cast(Elem from, const void* x, Elem to, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_elem(from, [&](auto stag) {
    using S = decltype(stag);
    with_elem(to, [&](auto dtag) {
      using D = decltype(dtag);
      any_cast_kernel<S, D><<<any_blocks(n), kAnyThreads, 0, stream>>>(static_cast<const S*>(x),
                                                                       static_cast<D*>(y), n);
    });
  });
}

void launch_clip(Elem t, const void* x, const void* lo, const void* hi, void* y, int64_t n,
                 cudaStream_t stream) {
  if (n == 0) return;
  with_elem(t, [&](auto tag) {
    using T = decltype(tag);
    clip_kernel<T><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(lo), static_cast<const T*>(hi),
        static_cast<T*>(y), n);
  });
}

}  // namespace lumen::cuda
