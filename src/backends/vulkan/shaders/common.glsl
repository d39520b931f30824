// Shared by every shader: tensors reached by device address, and the element-wise functions.
#extension GL_EXT_buffer_reference : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

// The element type of float tensors: float32, or float16 where the shader is compiled with
// LUMEN_F16 (cmake/vulkan_shaders.cmake builds every shader both ways). Math stays float32: loads
// widen with float()/vec4(), stores narrow with ELEM()/ELEM4().
#ifdef LUMEN_F16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define ELEM float16_t
#define ELEM4 f16vec4
#define ELEM_BYTES 2
#define QUAD_BYTES 8
#else
#define ELEM float
#define ELEM4 vec4
#define ELEM_BYTES 4
#define QUAD_BYTES 16
#endif

layout(buffer_reference, std430, buffer_reference_align = ELEM_BYTES) buffer Floats {
  ELEM v[];
};
// Float32 whatever the tensors' type: tables the host computes.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer Float32s {
  float v[];
};
// Four elements at a time (tensors aligned to four elements, checked by the host).
layout(buffer_reference, std430, buffer_reference_align = QUAD_BYTES) buffer Quads {
  ELEM4 v[];
};

// The record of the first out-of-range index (vulkan_context.h, Context::index_record): a kernel
// claims it with its id and leaves the index and the valid range for the host to raise.
layout(buffer_reference, std430, buffer_reference_align = 8) buffer IndexErrors {
  int claim;
  int pad;
  int64_t value, lo, hi;
};

// `index` made non-negative against an axis of n; an index outside [-n, n) is recorded (the first
// one only) and read as 0.
int64_t checked_index(int64_t index, int64_t n, uint64_t record, int where) {
  const int64_t v = index < 0 ? index + n : index;
  if (v >= 0 && v < n) return v;
  IndexErrors e = IndexErrors(record);
  if (atomicCompSwap(e.claim, 0, -1) == 0) {
    e.value = index;
    e.lo = -n;
    e.hi = n;
    memoryBarrierBuffer();
    atomicExchange(e.claim, where);
  }
  return 0;
}

// NaN from the bits: a driver may compile float math assuming no NaN, and fold isnan() away.
bool is_nan(float x) {
  return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u;
}

// The activations and unary functions, by the codes of activation.h (UnaryCode).
// exp within about 1 ulp (a driver's exp may be several ulp off, and flush results below 2^-126):
// x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts), e^r by its Taylor series to r^8, then
// 2^n; a result below 2^-126 is built from its bits, so no arithmetic on denormals is needed.
float exp_accurate(float x) {
  if (is_nan(x)) return x;
  if (x > 88.72284) return 1.0 / 0.0;
  if (x < -103.97208) return 0.0;
  float n = roundEven(x * 1.44269504);
  // precise: the two-part reduction must not be merged into one rounded product.
  precise float r = fma(n, -0.693145752, x);
  r = fma(n, -1.42860677e-6, r);
  float p = 1.0 / 40320.0;
  p = fma(p, r, 1.0 / 5040.0);
  p = fma(p, r, 1.0 / 720.0);
  p = fma(p, r, 1.0 / 120.0);
  p = fma(p, r, 1.0 / 24.0);
  p = fma(p, r, 1.0 / 6.0);
  p = fma(p, r, 0.5);
  p = fma(p, r, 1.0);
  p = fma(p, r, 1.0);
  // 2^e made from its bits: a driver's exp2 may be approximate even at integers.
  int e = int(n);
  if (e > 127) return p * 2.0 * intBitsToFloat((e - 1 + 127) << 23);
  if (e >= -125) return p * intBitsToFloat((e + 127) << 23);  // p * 2^e stays normal
  return intBitsToFloat(int(roundEven(p * intBitsToFloat((e + 149 + 127) << 23))));
}

// e^y - 1 for y <= 0 without cancellation near 0.
float expm1_nonpositive(float y) {
  if (y > -0.34657359) {
    float p = 1.0 / 3628800.0;
    p = fma(p, y, 1.0 / 362880.0);
    p = fma(p, y, 1.0 / 40320.0);
    p = fma(p, y, 1.0 / 5040.0);
    p = fma(p, y, 1.0 / 720.0);
    p = fma(p, y, 1.0 / 120.0);
    p = fma(p, y, 1.0 / 24.0);
    p = fma(p, y, 1.0 / 6.0);
    p = fma(p, y, 0.5);
    p = fma(p, y, 1.0);
    return p * y;
  }
  return exp_accurate(y) - 1.0;
}

// erf: its Maclaurin series below 1 (relative error below 1e-7 there, exact sign and scale near
// 0), Abramowitz and Stegun 7.1.26 above (absolute error below 1.5e-7).
float erf_approx(float x) {
  float a = abs(x);
  if (a < 1.0) {
    float z = x * x;
    // 2/sqrt(pi) sum (-1)^k x^(2k+1) / (k! (2k+1)), k = 0..11
    float p = -1.0 / (39916800.0 * 23.0);
    p = fma(p, z, 1.0 / (3628800.0 * 21.0));
    p = fma(p, z, -1.0 / (362880.0 * 19.0));
    p = fma(p, z, 1.0 / (40320.0 * 17.0));
    p = fma(p, z, -1.0 / (5040.0 * 15.0));
    p = fma(p, z, 1.0 / (720.0 * 13.0));
    p = fma(p, z, -1.0 / (120.0 * 11.0));
    p = fma(p, z, 1.0 / (24.0 * 9.0));
    p = fma(p, z, -1.0 / (6.0 * 7.0));
    p = fma(p, z, 1.0 / (2.0 * 5.0));
    p = fma(p, z, -1.0 / 3.0);
    p = fma(p, z, 1.0);
    return 1.1283791670955126 * x * p;
  }
  float t = 1.0 / (1.0 + 0.3275911 * a);
  float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t +
                   0.254829592) * t * exp_accurate(-a * a);
  return x < 0.0 ? -y : y;
}

// log(1 + t) for t >= 0, exact near 0: its series below 1/64 (written so that a compiler that
// reassociates float math, as lavapipe's does, cannot cancel it), log(1 + t) above.
float log1p_nonnegative(float t) {
  if (t < 0.015625) return t * (1.0 - t * (0.5 - t * (1.0 / 3.0 - t * (0.25 - t * 0.2))));
  return log(1.0 + t);
}

float sigmoid_of(float x) {
  return 1.0 / (1.0 + exp_accurate(-x));
}

// tanh |x| = -expm1(-2|x|) / (2 + expm1(-2|x|)), exact to a few ulp down to 0.
float tanh_of(float x) {
  if (is_nan(x)) return x;
  float m = expm1_nonpositive(-2.0 * abs(x));
  float r = -m / (2.0 + m);
  return x < 0.0 ? -r : r;
}

float apply_unary(int op, float x, float a, float b) {
  switch (op) {
    case 0: return x;
    case 1: return x > 0.0 ? x : (is_nan(x) ? x : 0.0);
    case 2: return x < 0.0 ? a * x : x;
    case 3: return is_nan(x) ? x : (x < a ? a : (x > b ? b : x));
    case 4: return sigmoid_of(x);
    case 5: return tanh_of(x);
    case 6: return clamp(a * x + b, 0.0, 1.0);
    case 7: return x * clamp(x / 6.0 + 0.5, 0.0, 1.0);
    case 8: return x * sigmoid_of(x);
    case 9: return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752));
    case 10: return x * sigmoid_of(x * (1.59576912161 + 0.0713548162726 * x * x));
    case 11: return exp_accurate(x);
    case 12: return log(x);
    case 13: return sqrt(x);
    case 14: return -x;
    case 15: return abs(x);
    case 16: return 1.0 / x;
    case 17: return floor(x);
    case 18: return ceil(x);
    case 19: return max(x, 0.0) + log1p_nonnegative(exp_accurate(-abs(x)));
    case 20: return x < 0.0 ? a * expm1_nonpositive(x) : x;
    case 21: return erf_approx(x);
    case 22: return x / (1.0 + abs(x));
    case 23: return x <= 0.0 ? b * a * expm1_nonpositive(x) : b * x;
    default: return x;
  }
}

// x^e as ONNX's Pow on floats: NaN for a negative base with a fractional exponent.
float power(float x, float e) {
  if (e == 0.0) return 1.0;
  if (x == 0.0) return e > 0.0 ? 0.0 : 1.0 / 0.0;
  if (x > 0.0) return exp2(e * log2(x));
  if (e != floor(e)) return 0.0 / 0.0;
  float r = exp2(e * log2(-x));
  return mod(e, 2.0) == 1.0 ? -r : r;
}

// The binary ops by code: 0 add, 1 sub, 2 mul, 3 div, 4 pow, 5 max, 6 min (NaN carried through
// max and min).
float apply_binary(int op, float x, float z) {
  switch (op) {
    case 0: return x + z;
    case 1: return x - z;
    case 2: return x * z;
    case 3: return x / z;
    case 4: return power(x, z);
    case 5: return is_nan(x) || is_nan(z) ? x + z : max(x, z);
    default: return is_nan(x) || is_nan(z) ? x + z : min(x, z);
  }
}
