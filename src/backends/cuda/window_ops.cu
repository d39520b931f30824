// CUDA kernels of LpPool, GlobalLpPool, MaxUnpool, Col2Im, RoiAlign and DeformConv
// (window_ops.h): a thread per output element everywhere but GlobalLpPool (a block per row), each
// output gathering what lands on it, so that no two threads write one element and sums run in the
// host's order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <type_traits>

#include "backends/cuda/any_types.cuh"
#include "backends/cuda/index_check.cuh"
#include "backends/cuda/window_ops.h"

namespace lumen::cuda {
namespace {

// The sum type of element type T: double for double, float for the others.
template <typename T>
using sum_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// |v|^p: 1 and 2 exactly, other whole p up to 16 by repeated products, any other p by pow (the
// CPU kernel's three ways, so both round alike).
template <typename C>
__device__ __forceinline__ C lp_power(C v, C p) {
  const C a = v < C(0) ? -v : v;
  if (p == C(1)) return a;
  if (p == C(2)) return a * a;
  if (p == floor(p) && p <= C(16)) {
    C r = a;
    for (int k = 1; k < static_cast<int>(p); ++k) r *= a;
    return r;
  }
  return pow(a, p);
}

template <typename C>
__device__ __forceinline__ C lp_root(C s, C p) {
  if (p == C(1)) return s;
  if (p == C(2)) return sqrt(s);
  return pow(s, C(1) / p);
}

template <typename T>
__global__ void lp_pool_kernel(WindowDesc d, int64_t planes, sum_t<T> p, const T* x, T* y) {
  using C = sum_t<T>;
  const int64_t total = planes * d.out[0] * d.out[1] * d.out[2];
  ANY_GRID_LOOP(i, total) {
    const int64_t ow = i % d.out[2], oh = (i / d.out[2]) % d.out[1];
    const int64_t od = (i / (d.out[2] * d.out[1])) % d.out[0];
    const int64_t plane = i / (d.out[2] * d.out[1] * d.out[0]);
    const T* in = x + plane * d.in[0] * d.in[1] * d.in[2];
    C acc = C(0);
    for (int64_t kd = 0; kd < d.k[0]; ++kd) {
      const int64_t id = od * d.stride[0] - d.pad_begin[0] + kd * d.dilation[0];
      if (id < 0 || id >= d.in[0]) continue;
      for (int64_t kh = 0; kh < d.k[1]; ++kh) {
        const int64_t ih = oh * d.stride[1] - d.pad_begin[1] + kh * d.dilation[1];
        if (ih < 0 || ih >= d.in[1]) continue;
        const T* row = in + (id * d.in[1] + ih) * d.in[2];
        for (int64_t kw = 0; kw < d.k[2]; ++kw) {
          const int64_t iw = ow * d.stride[2] - d.pad_begin[2] + kw * d.dilation[2];
          if (iw < 0 || iw >= d.in[2]) continue;
          acc += lp_power(static_cast<C>(load(row, iw)), p);
        }
      }
    }
    y[i] = store_as<T>(lp_root(acc, p));
  }
}

template <typename T>
__global__ void global_lp_pool_kernel(sum_t<T> p, const T* x, T* y, int64_t n) {
  using C = sum_t<T>;
  __shared__ C partial[kAnyThreads];
  const T* row = x + blockIdx.x * n;
  C acc = C(0);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
    acc += lp_power(static_cast<C>(load(row, j)), p);
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = store_as<T>(lp_root(partial[0], p));
}

template <typename U>
__global__ void max_unpool_kernel(UnpoolDesc d, const U* x, const int64_t* idx, int64_t n, U* y,
                                  IndexCheck check) {
  ANY_GRID_LOOP(i, n) {
    int64_t at = idx[i];
    if (at < 0 || at >= d.total) {
      report_bad_index(check, at, 0, d.total);
      continue;
    }
    if (d.reshaped) {
      int64_t pos = 0, stride = 1;
      for (int a = d.rank - 1; a >= 0; --a) {
        pos += (at % d.dims[a]) * stride;
        at /= d.dims[a];
        stride *= d.out_dims[a];
      }
      at = pos;
    }
    y[at] = x[i];
  }
}

template <typename T>
__global__ void col2im_kernel(Col2ImDesc d, const T* x, T* y) {
  using A = std::conditional_t<kIsFloat<T>, sum_t<T>, T>;
  ANY_GRID_LOOP(i, d.planes * d.plane) {
    const int64_t p = i / d.plane;
    int64_t pos[6];
    int64_t rest = i % d.plane;
    for (int a = d.rank - 1; a >= 0; --a) {
      pos[a] = rest % d.image[a];
      rest /= d.image[a];
    }
    A acc = A(0);
    for (int64_t k = 0; k < d.block_size; ++k) {
      // Block offset k's index along each axis, and the block whose offset k lands on pos.
      int64_t kr = k, l = 0, l_stride = 1;
      bool hit = true;
      for (int a = d.rank - 1; a >= 0 && hit; --a) {
        const int64_t ka = kr % d.block[a];
        kr /= d.block[a];
        const int64_t start = pos[a] + d.pad_begin[a] - ka * d.dilation[a];
        hit = start >= 0 && start % d.stride[a] == 0 && start / d.stride[a] < d.counts[a];
        l += (start / d.stride[a]) * l_stride;
        l_stride *= d.counts[a];
      }
      if (hit)
        acc = static_cast<A>(acc + static_cast<A>(load(x, (p * d.block_size + k) * d.blocks + l)));
    }
    y[i] = store_as<T>(acc);
  }
}

template <typename T>
__global__ void deform_conv_kernel(DeformConvDesc d, const T* x, const T* w, const T* offset,
                                   const T* bias, const T* mask, T* y) {
  // Spatial axis i (of sp) is window axis lead + i.
  const int sp = d.spatial, corners = 1 << sp, lead = 3 - sp;
  int64_t in_size = 1, out_size = 1, taps = 1;
  for (int i = 0; i < sp; ++i) {
    in_size *= d.window.in[lead + i];
    out_size *= d.window.out[lead + i];
    taps *= d.window.k[lead + i];
  }
  const int64_t cg = d.channels / d.group, og = d.out_channels / d.group;
  const int64_t per_offset_group = d.channels / d.offset_group;
  ANY_GRID_LOOP(j, d.batch * d.out_channels * out_size) {
    const int64_t p = j % out_size, m = (j / out_size) % d.out_channels;
    const int64_t n = j / (out_size * d.out_channels), g = m / og;
    int64_t oidx[3] = {0, 0, 0};
    for (int64_t i = sp - 1, rest = p; i >= 0; --i) {
      oidx[i] = rest % d.window.out[lead + i];
      rest /= d.window.out[lead + i];
    }
    T acc = bias != nullptr ? bias[m] : T(0);
    for (int64_t cl = 0; cl < cg; ++cl) {
      const int64_t c = g * cg + cl;
      const int64_t ogrp = c / per_offset_group;
      const T* plane = x + (n * d.channels + c) * in_size;
      for (int64_t k = 0; k < taps; ++k) {
        int64_t kidx[3] = {0, 0, 0};
        int64_t rest = k;
        for (int i = sp - 1; i >= 0; --i) {
          kidx[i] = rest % d.window.k[lead + i];
          rest /= d.window.k[lead + i];
        }
        const int64_t gk = ogrp * taps + k;
        const T* off = offset + (n * d.offset_group * taps + gk) * sp * out_size;
        int64_t low[3] = {0, 0, 0};
        T frac[3] = {0, 0, 0};
        bool is_nan = false;
        for (int i = 0; i < sp; ++i) {
          T pos =
              static_cast<T>(oidx[i] * d.window.stride[lead + i] - d.window.pad_begin[lead + i] +
                             kidx[i] * d.window.dilation[lead + i]) +
              off[i * out_size + p];
          is_nan = is_nan || pos != pos;
          pos = pos < T(-2) ? T(-2)
                            : (pos > static_cast<T>(d.window.in[lead + i] + 1)
                                   ? static_cast<T>(d.window.in[lead + i] + 1)
                                   : pos);
          const T fl = floor(pos);
          low[i] = is_nan ? 0 : static_cast<int64_t>(fl);
          frac[i] = pos - fl;
        }
        T v = T(0);
        if (is_nan) {
          v = static_cast<T>(nan(""));
        } else {
          const T scale =
              mask != nullptr ? mask[(n * d.offset_group * taps + gk) * out_size + p] : T(1);
          for (int q = 0; q < corners; ++q) {
            T wq = scale;
            int64_t flat = 0;
            bool inside = true;
            for (int i = 0; i < sp; ++i) {
              const int bit = (q >> (sp - 1 - i)) & 1;
              const int64_t at = low[i] + bit;
              inside = inside && at >= 0 && at < d.window.in[lead + i];
              wq *= bit ? frac[i] : T(1) - frac[i];
              flat = flat * d.window.in[lead + i] + at;
            }
            if (inside) v += wq * plane[flat];
          }
        }
        acc += w[(m * cg + cl) * taps + k] * v;
      }
    }
    y[j] = acc;
  }
}

// The bilinear sample of a (height x width) plane at (sy, sx), as roi_align.cc's bilinear_sample:
// nothing more than a pixel outside, clamped to the edge nearer.
__device__ float roi_sample(const float* plane, double sy, double sx, int64_t height,
                            int64_t width) {
  if (height <= 0 || width <= 0 || sy < -1.0 || sy > static_cast<double>(height) || sx < -1.0 ||
      sx > static_cast<double>(width))
    return 0.f;
  sy = sy > 0.0 ? sy : 0.0;
  sx = sx > 0.0 ? sx : 0.0;
  int64_t y0 = static_cast<int64_t>(sy), x0 = static_cast<int64_t>(sx), y1, x1;
  if (y0 >= height - 1) {
    y0 = y1 = height - 1;
    sy = static_cast<double>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= width - 1) {
    x0 = x1 = width - 1;
    sx = static_cast<double>(x0);
  } else {
    x1 = x0 + 1;
  }
  const double ly = sy - y0, lx = sx - x0, hy = 1 - ly, hx = 1 - lx;
  return static_cast<float>(hy * hx) * plane[y0 * width + x0] +
         static_cast<float>(hy * lx) * plane[y0 * width + x1] +
         static_cast<float>(ly * hx) * plane[y1 * width + x0] +
         static_cast<float>(ly * lx) * plane[y1 * width + x1];
}

__global__ void roi_align_kernel(RoiAlignDesc d, const float* x, const float* rois,
                                 const int64_t* batch_index, float* y, IndexCheck check) {
  ANY_GRID_LOOP(i, d.count * d.c * d.out_h * d.out_w) {
    const int64_t pw = i % d.out_w, ph = (i / d.out_w) % d.out_h;
    const int64_t c = (i / (d.out_w * d.out_h)) % d.c, r = i / (d.out_w * d.out_h * d.c);
    const int64_t b = batch_index[r];
    if (b < 0 || b >= d.n) {
      if (c == 0 && ph == 0 && pw == 0) report_bad_index(check, b, 0, d.n);
      y[i] = 0.f;
      continue;
    }
    const float* roi = rois + 4 * r;
    const double offset = d.half_pixel ? 0.5 : 0.0, scale = d.spatial_scale;
    const double x0 = roi[0] * scale - offset, y0 = roi[1] * scale - offset;
    double rw = roi[2] * scale - offset - x0, rh = roi[3] * scale - offset - y0;
    if (!d.half_pixel) {
      rw = rw > 1.0 ? rw : 1.0;
      rh = rh > 1.0 ? rh : 1.0;
    }
    const double bh = rh / static_cast<double>(d.out_h), bw = rw / static_cast<double>(d.out_w);
    int64_t gh = d.sampling_ratio > 0 ? d.sampling_ratio : static_cast<int64_t>(ceil(rh / d.out_h));
    int64_t gw = d.sampling_ratio > 0 ? d.sampling_ratio : static_cast<int64_t>(ceil(rw / d.out_w));
    gh = gh > 0 ? gh : 0;
    gw = gw > 0 ? gw : 0;
    const float* plane = x + (b * d.c + c) * d.h * d.w;
    float acc = 0.f;
    for (int64_t iy = 0; iy < gh; ++iy) {
      const double sy = y0 + ph * bh + (iy + 0.5) * bh / static_cast<double>(gh);
      for (int64_t ix = 0; ix < gw; ++ix) {
        const double sx = x0 + pw * bw + (ix + 0.5) * bw / static_cast<double>(gw);
        acc += roi_sample(plane, sy, sx, d.h, d.w);
      }
    }
    const int64_t count = gh * gw > 1 ? gh * gw : 1;
    y[i] = acc / static_cast<float>(count);
  }
}

template <typename F>
void with_float_elem(Elem t, F&& f) {
  switch (t) {
    case Elem::kF16:
      return f(__half{});
    case Elem::kBF16:
      return f(__nv_bfloat16{});
    case Elem::kF64:
      return f(double{});
    default:
      return f(float{});
  }
}

}  // namespace

void launch_lp_pool(Elem t, const WindowDesc& desc, int64_t planes, float p, const void* x, void* y,
                    cudaStream_t stream) {
  const int64_t total = planes * desc.out[0] * desc.out[1] * desc.out[2];
  if (total == 0) return;
  with_float_elem(t, [&](auto v) {
    using T = decltype(v);
    lp_pool_kernel<T><<<any_blocks(total), kAnyThreads, 0, stream>>>(
        desc, planes, static_cast<sum_t<T>>(p), static_cast<const T*>(x), static_cast<T*>(y));
  });
}

void launch_global_lp_pool(Elem t, float p, const void* x, void* y, int64_t rows, int64_t n,
                           cudaStream_t stream) {
  if (rows == 0) return;
  with_float_elem(t, [&](auto v) {
    using T = decltype(v);
    global_lp_pool_kernel<T><<<static_cast<unsigned>(rows), kAnyThreads, 0, stream>>>(
        static_cast<sum_t<T>>(p), static_cast<const T*>(x), static_cast<T*>(y), n);
  });
}

void launch_max_unpool(int elem_bytes, const UnpoolDesc& desc, const void* x, const int64_t* idx,
                       int64_t n, void* y, const IndexCheck& check, cudaStream_t stream) {
  cudaMemsetAsync(y, 0, static_cast<size_t>(desc.out_n) * elem_bytes, stream);
  if (n == 0) return;
  with_word(elem_bytes, [&](auto v) {
    using U = decltype(v);
    max_unpool_kernel<U><<<any_blocks(n), kAnyThreads, 0, stream>>>(
        desc, static_cast<const U*>(x), idx, n, static_cast<U*>(y), check);
  });
}

void launch_col2im(Elem t, const Col2ImDesc& desc, const void* x, void* y, cudaStream_t stream) {
  const int64_t total = desc.planes * desc.plane;
  if (total == 0) return;
  with_elem(t, [&](auto v) {
    using T = decltype(v);
    if constexpr (!std::is_same_v<T, bool>)
      col2im_kernel<T><<<any_blocks(total), kAnyThreads, 0, stream>>>(
          desc, static_cast<const T*>(x), static_cast<T*>(y));
  });
}

void launch_roi_align(const RoiAlignDesc& desc, const float* x, const float* rois,
                      const int64_t* batch_index, float* y, const IndexCheck& check,
                      cudaStream_t stream) {
  const int64_t total = desc.count * desc.c * desc.out_h * desc.out_w;
  if (total == 0) return;
  roi_align_kernel<<<any_blocks(total), kAnyThreads, 0, stream>>>(desc, x, rois, batch_index, y,
                                                                  check);
}

void launch_deform_conv(bool is_double, const DeformConvDesc& desc, const void* x, const void* w,
                        const void* offset, const void* bias, const void* mask, void* y,
                        cudaStream_t stream) {
  const int64_t out_size = desc.window.out[0] * desc.window.out[1] * desc.window.out[2];
  const int64_t total = desc.batch * desc.out_channels * out_size;
  if (total == 0) return;
  auto go = [&](auto v) {
    using T = decltype(v);
    deform_conv_kernel<T><<<any_blocks(total), kAnyThreads, 0, stream>>>(
        desc, static_cast<const T*>(x), static_cast<const T*>(w), static_cast<const T*>(offset),
        static_cast<const T*>(bias), static_cast<const T*>(mask), static_cast<T*>(y));
  };
  if (is_double)
    go(double{});
  else
    go(float{});
}

}  // namespace lumen::cuda
