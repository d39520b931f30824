// Launchers of the CUDA kernels of Resize, GridSample, AffineGrid and ConvTranspose's crop
// (image_ops.cu), in
// plain C++ types so that the kernel classes (image_ops.cc, conv_nd.cc) need no CUDA C++. Tensors
// are `void*` in the node's storage (launch.h); every kernel computes in float32 and rounds once on
// store.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/launch.h"

namespace lumen::cuda {

// Resize over `rank` axes: output coordinate o of axis a blends input idx[map[a] + o * taps[a] + j]
// (element stride in_strides[a]) with weight wt[map[a] + o * taps[a] + j], j < taps[a]; the
// output value is the sum over every combination of the axes' taps of the product of their
// weights times the input there. idx -1 (tf_crop_and_resize outside the region) makes the output
// `extrapolation`. idx and wt are device tables (resize_taps.h's maps, concatenated).
struct ResizeDesc {
  int rank = 0;
  int64_t out_dims[kMaxRank] = {};
  int64_t in_strides[kMaxRank] = {};
  int taps[kMaxRank] = {};
  int64_t map[kMaxRank] = {};
  float extrapolation = 0.f;
};
void launch_resize(Storage st, const ResizeDesc& desc, const int64_t* idx, const float* wt,
                   const void* x, void* y, int64_t n, cudaStream_t stream);

// GridSample (ONNX, as the CPU kernel grid_sample.cc): x (n, c, [d,] h, w), grid (n, [od,] oh, ow,
// 2 or 3) in x's storage, y (n, c, [od,] oh, ow). mode 0 linear, 1 nearest, 2 cubic (4-D only);
// padding 0 zeros, 1 border, 2 reflection.
struct GridSampleDesc {
  int64_t n = 0, c = 0, d = 1, h = 0, w = 0, od = 1, oh = 0, ow = 0;
  int mode = 0, padding = 0;
  bool align_corners = false, volumetric = false;
};
void launch_grid_sample(Storage st, const GridSampleDesc& desc, const void* x, const void* grid,
                        void* y, cudaStream_t stream);

// y[n, c, o...] = full[n, c, o + begin...] where that lies inside `full` (else 0), plus bias[c]
// (bias may be null): ConvTranspose's output cut from the unpadded transposed convolution, over
// `spatial` (1 to 3) axes.
struct CropDesc {
  int spatial = 0;
  int64_t batch = 0, channels = 0;
  int64_t out[3] = {1, 1, 1}, full[3] = {1, 1, 1}, begin[3] = {0, 0, 0};
};
void launch_crop_bias(Storage st, const CropDesc& desc, const void* full, const void* bias, void* y,
                      cudaStream_t stream);

// AffineGrid: grid (n, [d,] h, w, dims) = theta[n] (dims x dims+1) times (x, y[, z], 1), the
// base coordinates evenly spaced over [-1, 1] (pixel centres, or the corners with
// align_corners), worked out in double as the CPU kernel does; theta and grid of one storage.
struct AffineGridDesc {
  int dims = 2;
  int64_t n = 0, d = 1, h = 1, w = 1;
  bool align_corners = false;
};
void launch_affine_grid(Storage st, const AffineGridDesc& desc, const void* theta, void* grid,
                        cudaStream_t stream);

}  // namespace lumen::cuda
