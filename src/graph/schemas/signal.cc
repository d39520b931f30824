// Schemas of the signal-processing ops (opset 17): the cosine-sum windows HannWindow,
// HammingWindow and BlackmanWindow, DFT, STFT and MelWeightMatrix. Lengths that decide output
// shapes (window size, dft_length, frame_step, frame_length, num_mel_bins) must be known when the
// graph is built. Complex tensors are real tensors with a trailing dimension of 2 (real, imag).
#include <optional>
#include <string>
#include <vector>

#include "graph/onnx_dtype.h"
#include "graph/schema.h"

namespace lumen {
namespace {

// The one integer of a scalar (or one-element) input known at build time.
int64_t scalar_int(const InferContext& ctx, int i, const char* what) {
  const std::vector<int64_t> v = ctx.input_ints(i, what);
  if (v.size() != 1 || ctx.input_shape(i).rank() > 1)
    ctx.fail_shape(std::string(what) + " must be a scalar, got shape " +
                   ctx.input_shape(i).to_string());
  return v[0];
}

// The output_datatype attribute (default float32); the windows and MelWeightMatrix produce
// float32 or float64.
DType output_datatype(const InferContext& ctx) {
  const int64_t code = ctx.attr_int("output_datatype", 1);
  std::optional<DType> d = dtype_from_onnx(code);
  if (!d || (*d != DType::kFloat32 && *d != DType::kFloat64))
    ctx.fail_unsupported("output_datatype " + onnx_dtype_name(code) +
                         " is not supported (float32 and float64 are)");
  return *d;
}

void infer_window(InferContext& ctx) {
  const int64_t p = ctx.attr_int("periodic", 1);
  if (p != 0 && p != 1) ctx.fail_model("periodic must be 0 or 1, got " + std::to_string(p));
  const int64_t size = scalar_int(ctx, 0, "size");
  if (size < 0) ctx.fail_shape("size must not be negative, got " + std::to_string(size));
  ctx.set_output(0, output_datatype(ctx), Shape{size});
}

// The signal's trailing dimension: 1 (real) or 2 (complex).
void check_complex_dim(const InferContext& ctx, const Shape& s, const char* what) {
  if (s[-1] != 1 && s[-1] != 2)
    ctx.fail_shape(std::string(what) + " must end in a dimension of 1 (real) or 2 (complex), got " +
                   s.to_string());
}

void infer_dft(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (!is_floating(ctx.input_dtype(0)))
    ctx.fail_shape(std::string("input must be floating-point, not ") +
                   dtype_name(ctx.input_dtype(0)));
  if (x.rank() < 3)
    ctx.fail_shape("input must have rank 3 or more ([batch, ..., n, 1 or 2]), got " +
                   x.to_string());
  check_complex_dim(ctx, x, "input");
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < 0) axis += x.rank() - 1;
  if (axis < 1 || axis > x.rank() - 2)
    ctx.fail_shape("axis " + std::to_string(ctx.attr_int("axis", 1)) +
                   " must name a signal dimension of " + x.to_string() + " (1 to " +
                   std::to_string(x.rank() - 2) + ")");
  const int64_t inverse = ctx.attr_int("inverse", 0), onesided = ctx.attr_int("onesided", 0);
  if (inverse != 0 && inverse != 1) ctx.fail_model("inverse must be 0 or 1");
  if (onesided != 0 && onesided != 1) ctx.fail_model("onesided must be 0 or 1");
  // onesided: the forward transform of a real signal (RFFT, half the spectrum out), or the
  // inverse of a one-sided complex spectrum (IRFFT, a real signal out; opset 20's form).
  const bool irfft = onesided && inverse;
  if (onesided && !inverse && x[-1] != 1)
    ctx.fail_unsupported("onesided=1 with inverse=0 transforms a real signal only");
  if (irfft && x[-1] != 2)
    ctx.fail_shape("onesided=1 with inverse=1 takes a complex one-sided spectrum, got " +
                   x.to_string());
  int64_t n = irfft ? 2 * (x[static_cast<int>(axis)] - 1) : x[static_cast<int>(axis)];
  if (ctx.has_input(1)) {
    n = scalar_int(ctx, 1, "dft_length");
    if (n < 1) ctx.fail_shape("dft_length must be positive, got " + std::to_string(n));
  }
  if (n < 1) ctx.fail_shape("the transform's length must be positive, got " + std::to_string(n));
  std::vector<int64_t> out = x.dims();
  out[axis] = onesided && !inverse ? n / 2 + 1 : n;
  out.back() = irfft ? 1 : 2;
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
}

// Inputs: signal [batch, length, 1 or 2], frame_step, window [frame_length], frame_length.
void infer_stft(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (!is_floating(ctx.input_dtype(0)))
    ctx.fail_shape(std::string("signal must be floating-point, not ") +
                   dtype_name(ctx.input_dtype(0)));
  if (x.rank() != 3)
    ctx.fail_shape("signal must have shape [batch, length, 1 or 2], got " + x.to_string());
  check_complex_dim(ctx, x, "signal");
  const int64_t onesided = ctx.attr_int("onesided", 1);
  if (onesided != 0 && onesided != 1) ctx.fail_model("onesided must be 0 or 1");
  if (onesided && x[2] != 1) ctx.fail_unsupported("onesided=1 is defined for a real signal only");
  const int64_t step = scalar_int(ctx, 1, "frame_step");
  if (step < 1) ctx.fail_shape("frame_step must be positive, got " + std::to_string(step));
  int64_t length = -1;
  if (ctx.has_input(2)) {
    const Shape& w = ctx.input_shape(2);
    if (w.rank() != 1) ctx.fail_shape("window must be 1-D, got " + w.to_string());
    if (ctx.input_dtype(2) != ctx.input_dtype(0))
      ctx.fail_shape(std::string("window is ") + dtype_name(ctx.input_dtype(2)) +
                     " but signal is " + dtype_name(ctx.input_dtype(0)));
    length = w[0];
  }
  if (ctx.has_input(3)) {
    const int64_t l = scalar_int(ctx, 3, "frame_length");
    if (length >= 0 && l != length)
      ctx.fail_shape("frame_length " + std::to_string(l) + " differs from the window's length " +
                     std::to_string(length));
    length = l;
  }
  if (length < 0) ctx.fail_shape("needs a window or a frame_length");
  if (length < 1 || length > x[1])
    ctx.fail_shape("frame length " + std::to_string(length) + " must be in [1, " +
                   std::to_string(x[1]) + "] (the signal's length)");
  const int64_t frames = (x[1] - length) / step + 1;
  const int64_t bins = onesided ? length / 2 + 1 : length;
  ctx.set_output(0, ctx.input_dtype(0), Shape{x[0], frames, bins, 2});
}

// Inputs: num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz.
void infer_mel_weight_matrix(InferContext& ctx) {
  const int64_t bins = scalar_int(ctx, 0, "num_mel_bins");
  const int64_t dft_length = scalar_int(ctx, 1, "dft_length");
  if (bins < 1) ctx.fail_shape("num_mel_bins must be positive, got " + std::to_string(bins));
  if (dft_length < 1)
    ctx.fail_shape("dft_length must be positive, got " + std::to_string(dft_length));
  if (!is_integer(ctx.input_dtype(2)))
    ctx.fail_shape(std::string("sample_rate must be an integer, not ") +
                   dtype_name(ctx.input_dtype(2)));
  for (int i = 3; i < 5; ++i)
    if (!is_floating(ctx.input_dtype(i)))
      ctx.fail_shape(std::string(i == 3 ? "lower" : "upper") +
                     "_edge_hertz must be floating-point, not " + dtype_name(ctx.input_dtype(i)));
  ctx.set_output(0, output_datatype(ctx), Shape{dft_length / 2 + 1, bins});
}

}  // namespace

LUMEN_REGISTER_SCHEMA(HannWindow,
                      {.attrs = {{"periodic", AttrType::kInt}, {"output_datatype", AttrType::kInt}},
                       .infer = &infer_window});
LUMEN_REGISTER_SCHEMA(HammingWindow,
                      {.attrs = {{"periodic", AttrType::kInt}, {"output_datatype", AttrType::kInt}},
                       .infer = &infer_window});
LUMEN_REGISTER_SCHEMA(BlackmanWindow,
                      {.attrs = {{"periodic", AttrType::kInt}, {"output_datatype", AttrType::kInt}},
                       .infer = &infer_window});
LUMEN_REGISTER_SCHEMA(DFT, {.min_inputs = 1,
                            .max_inputs = 2,
                            .attrs = {{"axis", AttrType::kInt},
                                      {"inverse", AttrType::kInt},
                                      {"onesided", AttrType::kInt}},
                            .infer = &infer_dft});
LUMEN_REGISTER_SCHEMA(STFT, {.min_inputs = 2,
                             .max_inputs = 4,
                             .attrs = {{"onesided", AttrType::kInt}},
                             .infer = &infer_stft});
LUMEN_REGISTER_SCHEMA(MelWeightMatrix, {.min_inputs = 5,
                                        .max_inputs = 5,
                                        .attrs = {{"output_datatype", AttrType::kInt}},
                                        .infer = &infer_mel_weight_matrix});

}  // namespace lumen
