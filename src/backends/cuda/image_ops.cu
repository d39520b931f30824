// CUDA kernels of Resize, GridSample, AffineGrid and ConvTranspose's crop (see image_ops.h).
// Templates over the storage type T (float, __half, __nv_bfloat16; storage.cuh), computing in
// float32; GridSample works out its coordinates in double, as the CPU kernel does, so both pick the
// same taps.
#include <cmath>

#include "backends/cuda/image_ops.h"
#include "backends/cuda/storage.cuh"

namespace lumen::cuda {
namespace {

constexpr int kThreads = 256;

int blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

// ---- Resize ----

template <typename T>
__global__ void resize_kernel(ResizeDesc d, const int64_t* __restrict__ idx,
                              const float* __restrict__ wt, const T* __restrict__ x,
                              T* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    // The fixed part of the input offset (one-tap axes) and the blended axes' tables.
    int64_t base = 0, rest = i;
    int nb = 0;
    int64_t row[kMaxRank], stride[kMaxRank];
    int taps[kMaxRank], at[kMaxRank];
    bool outside = false;
    for (int a = d.rank - 1; a >= 0; --a) {
      const int64_t o = rest % d.out_dims[a];
      rest /= d.out_dims[a];
      const int64_t first = d.map[a] + o * d.taps[a];
      if (idx[first] < 0) outside = true;
      if (d.taps[a] == 1) {
        base += idx[first] * d.in_strides[a];
      } else {
        row[nb] = first;
        stride[nb] = d.in_strides[a];
        taps[nb] = d.taps[a];
        at[nb] = 0;
        ++nb;
      }
    }
    if (outside) {
      y[i] = from_float<T>(d.extrapolation);
      continue;
    }
    float acc = 0.f;
    for (;;) {
      float w = 1.f;
      int64_t off = base;
      for (int b = 0; b < nb; ++b) {
        w *= wt[row[b] + at[b]];
        off += idx[row[b] + at[b]] * stride[b];
      }
      if (w != 0.f) acc += w * to_float(x[off]);
      int b = nb - 1;
      while (b >= 0 && ++at[b] == taps[b]) at[b--] = 0;
      if (b < 0) break;
    }
    y[i] = from_float<T>(acc);
  }
}

// ---- GridSample ----

constexpr double kCubicA = -0.75;

__device__ double unnormalize(double g, int64_t size, bool align) {
  const double n = static_cast<double>(size);
  return align ? (g + 1) / 2 * (n - 1) : ((g + 1) * n - 1) / 2;
}

// Reflects x into [low, high] (given doubled, so that half-pixel bounds stay integral).
__device__ double reflect(double x, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return 0;
  const double low = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  x = fabs(x - low);
  const double extra = fmod(x, span);
  const int64_t flips = static_cast<int64_t>(floor(x / span));
  return flips % 2 == 0 ? extra + low : span - extra + low;
}

__device__ double pad_coord(double x, int64_t size, int padding, bool align) {
  const double hi = static_cast<double>(size - 1);
  if (padding == 1) return fmin(fmax(x, 0.0), hi);
  if (padding == 2) {
    x = align ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
    return fmin(fmax(x, 0.0), hi);
  }
  return x;
}

__device__ void cubic_coeffs(double t, double* w) {
  auto near = [](double v) { return ((kCubicA + 2) * v - (kCubicA + 3)) * v * v + 1; };
  auto far = [](double v) {
    return ((kCubicA * v - 5 * kCubicA) * v + 8 * kCubicA) * v - 4 * kCubicA;
  };
  w[0] = far(1 + t);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

// The in-bounds taps (offset in an input plane, weight) of one grid point; returns their number.
struct Taps {
  int count = 0;
  int64_t off[16];
  float wt[16];
  __device__ void add(const GridSampleDesc& d, double ix, double iy, double iz, double weight) {
    if (!(ix >= 0 && ix < d.w && iy >= 0 && iy < d.h && iz >= 0 && iz < d.d) || weight == 0.0)
      return;
    off[count] = (static_cast<int64_t>(iz) * d.h + static_cast<int64_t>(iy)) * d.w +
                 static_cast<int64_t>(ix);
    wt[count] = static_cast<float>(weight);
    ++count;
  }
};

__device__ void grid_taps(const GridSampleDesc& d, double gx, double gy, double gz, Taps& t) {
  const bool align = d.align_corners;
  const double ux = unnormalize(gx, d.w, align), uy = unnormalize(gy, d.h, align);
  const double uz = d.volumetric ? unnormalize(gz, d.d, align) : 0.0;
  if (d.mode == 1) {
    const double px = pad_coord(ux, d.w, d.padding, align);
    const double py = pad_coord(uy, d.h, d.padding, align);
    const double pz = d.volumetric ? pad_coord(uz, d.d, d.padding, align) : 0.0;
    t.add(d, rint(px), rint(py), rint(pz), 1.0);
  } else if (d.mode == 0) {
    const double px = pad_coord(ux, d.w, d.padding, align);
    const double py = pad_coord(uy, d.h, d.padding, align);
    const double pz = d.volumetric ? pad_coord(uz, d.d, d.padding, align) : 0.0;
    const double fx = floor(px), fy = floor(py), fz = floor(pz);
    const double tx = px - fx, ty = py - fy, tz = pz - fz;
    for (int k = 0; k < (d.volumetric ? 2 : 1); ++k) {
      const double wz = d.volumetric ? (k == 0 ? 1 - tz : tz) : 1.0;
      t.add(d, fx, fy, fz + k, (1 - tx) * (1 - ty) * wz);
      t.add(d, fx + 1, fy, fz + k, tx * (1 - ty) * wz);
      t.add(d, fx, fy + 1, fz + k, (1 - tx) * ty * wz);
      t.add(d, fx + 1, fy + 1, fz + k, tx * ty * wz);
    }
  } else {
    // Taps around the unpadded coordinate; padding then applies to each tap's index.
    const double fx = floor(ux), fy = floor(uy);
    double cx[4], cy[4];
    cubic_coeffs(ux - fx, cx);
    cubic_coeffs(uy - fy, cy);
    for (int j = 0; j < 4; ++j) {
      const double ty = pad_coord(fy - 1 + j, d.h, d.padding, align);
      for (int i = 0; i < 4; ++i) {
        const double tx = pad_coord(fx - 1 + i, d.w, d.padding, align);
        t.add(d, tx, ty, 0.0, cx[i] * cy[j]);
      }
    }
  }
}

// A thread per output point (batch entry and position), looping over the channels.
template <typename T>
__global__ void grid_sample_kernel(GridSampleDesc d, const T* __restrict__ x,
                                   const T* __restrict__ grid, T* __restrict__ y) {
  const int64_t points = d.od * d.oh * d.ow;
  const int64_t total = d.n * points;
  const int dims = d.volumetric ? 3 : 2;
  const int64_t plane = d.d * d.h * d.w;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = i / points, p = i % points;
    const T* g = grid + i * dims;
    Taps t;
    grid_taps(d, to_float(g[0]), to_float(g[1]), d.volumetric ? to_float(g[2]) : 0.f, t);
    const T* xb = x + b * d.c * plane;
    T* yb = y + b * d.c * points + p;
    for (int64_t c = 0; c < d.c; ++c) {
      const T* xc = xb + c * plane;
      float acc = 0.f;
      for (int k = 0; k < t.count; ++k) acc += t.wt[k] * to_float(xc[t.off[k]]);
      yb[c * points] = from_float<T>(acc);
    }
  }
}

// ---- ConvTranspose's crop and bias ----

template <typename T>
__global__ void crop_bias_kernel(CropDesc d, const T* __restrict__ full, const T* __restrict__ bias,
                                 T* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t rest = i, off = 0, scale = 1;
    bool inside = true;
    for (int a = d.spatial - 1; a >= 0; --a) {
      const int64_t o = rest % d.out[a] + d.begin[a];
      rest /= d.out[a];
      inside = inside && o >= 0 && o < d.full[a];
      off += o * scale;
      scale *= d.full[a];
    }
    const int64_t plane = rest;  // n * channels + c
    float v = inside ? to_float(full[plane * scale + off]) : 0.f;
    if (bias != nullptr) v += to_float(bias[plane % d.channels]);
    y[i] = from_float<T>(v);
  }
}

// ---- AffineGrid ----

// Coordinate i of `size` points over [-1, 1] (affine_grid.cc's base_coordinates).
__device__ double grid_coordinate(int64_t i, int64_t size, bool align_corners) {
  if (align_corners)
    return size == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(size - 1);
  return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(size) - 1.0;
}

template <typename T>
__global__ void affine_grid_kernel(AffineGridDesc g, const T* theta, T* grid) {
  const int64_t points = g.n * g.d * g.h * g.w;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < points;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t w = i % g.w, h = (i / g.w) % g.h, dz = (i / (g.w * g.h)) % g.d;
    const int64_t n = i / (g.w * g.h * g.d);
    const double x = grid_coordinate(w, g.w, g.align_corners);
    const double y = grid_coordinate(h, g.h, g.align_corners);
    const double z = g.dims == 3 ? grid_coordinate(dz, g.d, g.align_corners) : 0.0;
    const T* m = theta + n * g.dims * (g.dims + 1);
    for (int r = 0; r < g.dims; ++r) {
      const T* row = m + r * (g.dims + 1);
      double v = static_cast<double>(to_float(row[0])) * x +
                 static_cast<double>(to_float(row[1])) * y +
                 static_cast<double>(to_float(row[g.dims]));
      if (g.dims == 3) v += static_cast<double>(to_float(row[2])) * z;
      grid[i * g.dims + r] = from_float<T>(static_cast<float>(v));
    }
  }
}

}  // namespace

void launch_resize(Storage st, const ResizeDesc& desc, const int64_t* idx, const float* wt,
                   const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    resize_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
        desc, idx, wt, static_cast<const T*>(x), static_cast<T*>(y), n);
  });
}

void launch_grid_sample(Storage st, const GridSampleDesc& desc, const void* x, const void* grid,
                        void* y, cudaStream_t stream) {
  const int64_t total = desc.n * desc.od * desc.oh * desc.ow;
  if (total == 0 || desc.c == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    grid_sample_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(
        desc, static_cast<const T*>(x), static_cast<const T*>(grid), static_cast<T*>(y));
  });
}

void launch_crop_bias(Storage st, const CropDesc& desc, const void* full, const void* bias, void* y,
                      cudaStream_t stream) {
  int64_t n = desc.batch * desc.channels;
  for (int a = 0; a < desc.spatial; ++a) n *= desc.out[a];
  if (n == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    crop_bias_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
        desc, static_cast<const T*>(full), static_cast<const T*>(bias), static_cast<T*>(y), n);
  });
}

void launch_affine_grid(Storage st, const AffineGridDesc& desc, const void* theta, void* grid,
                        cudaStream_t stream) {
  const int64_t points = desc.n * desc.d * desc.h * desc.w;
  if (points == 0) return;
  with_storage(st, [&](auto tag) {
    using T = decltype(tag);
    affine_grid_kernel<<<blocks_for(points), kThreads, 0, stream>>>(
        desc, static_cast<const T*>(theta), static_cast<T*>(grid));
  });
}

}  // namespace lumen::cuda
