// Launchers of the CUDA kernels of the window and region ops (window_ops.cu): LpPool,
// GlobalLpPool, MaxUnpool, Col2Im, RoiAlign and DeformConv. Plain C++ types, so the kernel classes
// (window_ops.cc) need no CUDA C++. Float tensors are `void*` of the element type `Elem`
// (any_launch.h); sums are in float32 for 16-bit and float32 data, double for float64, as on the
// host.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/any_launch.h"
#include "backends/cuda/index_check.h"

namespace lumen {
struct ConvGeometry;
}  // namespace lumen

namespace lumen::cuda {

// A window over up to three spatial axes, right-aligned: missing leading axes are size-1 axes
// (in = out = k = 1).
struct WindowDesc {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1}, pad_begin[3] = {0, 0, 0};
};
// The window of a pooling or convolution geometry (graph/schemas/conv_geometry.h).
WindowDesc window_desc(const ConvGeometry& g);

// LpPool over `planes` (batch * channels) planes: y = (sum over the window of |x|^p)^(1/p),
// padding counting as zeros; one thread per output element.
void launch_lp_pool(Elem t, const WindowDesc& desc, int64_t planes, float p, const void* x, void* y,
                    cudaStream_t stream);

// GlobalLpPool over `rows` contiguous rows of n: y[r] = (sum |x|^p)^(1/p); a block per row.
void launch_global_lp_pool(Elem t, float p, const void* x, void* y, int64_t rows, int64_t n,
                           cudaStream_t stream);

// MaxUnpool: y (out_n elements, zeroed here) gets x[i] at the flat position idx[i] of the default
// output shape `dims` (rank dims, total `total`), moved to the same coordinates of the output
// shape `out_dims` when it is larger. An index outside [0, total) is reported through `check`
// and skipped. Any element size of 1 to 8 bytes.
struct UnpoolDesc {
  int rank = 0;
  int64_t dims[8] = {};
  int64_t out_dims[8] = {};
  int64_t total = 0, out_n = 0;
  bool reshaped = false;
};
void launch_max_unpool(int elem_bytes, const UnpoolDesc& desc, const void* x, const int64_t* idx,
                       int64_t n, void* y, const IndexCheck& check, cudaStream_t stream);

// Col2Im: x (batch, channels * block_size, blocks) summed into y (batch, channels, image...), one
// thread per output element gathering the blocks that cover it (deterministic).
struct Col2ImDesc {
  int rank = 0;  // spatial axes, at most 6
  int64_t planes = 0, block_size = 1, blocks = 1, plane = 1;
  int64_t image[6] = {}, block[6] = {}, stride[6] = {}, dilation[6] = {}, pad_begin[6] = {},
          counts[6] = {};
};
void launch_col2im(Elem t, const Col2ImDesc& desc, const void* x, void* y, cudaStream_t stream);

// RoiAlign, mode avg (as the CPU kernel roi_align.cc): x (n, c, h, w), rois (count, 4) and y
// (count, c, out_h, out_w) float32; batch_index (count) int64, an index outside [0, n) reported
// through `check` and its region's outputs zero.
struct RoiAlignDesc {
  int64_t n = 0, c = 0, h = 0, w = 0, count = 0, out_h = 1, out_w = 1, sampling_ratio = 0;
  double spatial_scale = 1.0;
  bool half_pixel = true;
};
void launch_roi_align(const RoiAlignDesc& desc, const float* x, const float* rois,
                      const int64_t* batch_index, float* y, const IndexCheck& check,
                      cudaStream_t stream);

// DeformConv (float32 or float64, `is_double`): y[n, m, p] = bias[m] + sum over the group's
// channels c and kernel taps k of w[m, c, k] times x[n, c] sampled multilinearly at tap k's
// window position plus its learned offset (offset group of c), times the mask. Corners outside x
// weigh nothing; a NaN offset gives NaN. `spatial` 1 to 3 axes.
struct DeformConvDesc {
  int spatial = 2;
  int64_t batch = 1, channels = 1, out_channels = 1, group = 1, offset_group = 1;
  WindowDesc window;
};
void launch_deform_conv(bool is_double, const DeformConvDesc& desc, const void* x, const void* w,
                        const void* offset, const void* bias, const void* mask, void* y,
                        cudaStream_t stream);

}  // namespace lumen::cuda
