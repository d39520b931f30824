// CUDA kernel classes of DFT and STFT (spectral.cu's kernels): float32 signals (and windows),
// their lengths and steps known at build time, as the CPU kernels (src/backends/cpu/dft.cc) read
// them.
#include <memory>
#include <string>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/spectral.h"

namespace lumen::cuda {
namespace {

std::string check_signal(const NodeContext& ctx, const std::vector<int>& constants) {
  for (int i : {0, 2})
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::kFloat32)
      return "input " + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
             "; float32 only";
  for (int i : constants)
    if (ctx.has_input(i) && ctx.input_value(i) == nullptr)
      return "input " + std::to_string(i) + " must be known at build time";
  return check_static_shapes(ctx);
}

// ---- DFT ----

std::string check_dft(const NodeContext& ctx) {
  return check_signal(ctx, {1});
}

std::unique_ptr<Kernel> make_dft(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  int64_t axis = ctx.attr_int("axis", 1);
  if (axis < 0) axis += x.rank() - 1;
  DftDesc d;
  for (int a = 0; a < axis; ++a) d.outer *= x[a];
  for (int a = static_cast<int>(axis) + 1; a < x.rank() - 1; ++a) d.inner *= x[a];
  d.n_in = x[static_cast<int>(axis)];
  d.complex_in = x[-1] == 2;
  d.inverse = ctx.attr_int("inverse", 0) != 0;
  d.irfft = d.inverse && ctx.attr_int("onesided", 0) != 0;
  // dft_length when given, else the axis' length (an IRFFT's axis holds half a spectrum).
  d.n = ctx.has_input(1) ? ctx.input_ints(1, "dft_length")[0] : d.irfft ? 2 * (d.n_in - 1) : d.n_in;
  d.bins = ctx.output(0).shape[static_cast<int>(axis)];
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_dft(d, static_cast<const float*>(in(k, 0)), static_cast<float*>(out(k)), s);
  });
}

// ---- STFT ----

std::string check_stft(const NodeContext& ctx) {
  return check_signal(ctx, {1, 3});
}

std::unique_ptr<Kernel> make_stft(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& y = ctx.output(0).shape;
  StftDesc d;
  d.batch = x[0];
  d.length = x[1];
  d.complex_in = x[2] == 2;
  d.n = ctx.has_input(2) ? ctx.input_shape(2)[0] : ctx.input_ints(3, "frame_length")[0];
  d.step = ctx.input_ints(1, "frame_step")[0];
  d.frames = y[1];
  d.bins = y[2];
  const bool has_window = ctx.has_input(2);
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    launch_stft(d, static_cast<const float*>(in(k, 0)),
                has_window ? static_cast<const float*>(in(k, 2)) : nullptr,
                static_cast<float*>(out(k)), s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(DFT, &make_dft, &check_dft);
LUMEN_REGISTER_CUDA_KERNEL(STFT, &make_stft, &check_stft);

}  // namespace lumen::cuda
