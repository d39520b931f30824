// Precision: how exactly a compiled plan does float32 math (CompileOptions::precision), and what a
// backend's kernels are built for (Backend::make_kernel).
#pragma once

namespace lumen {

// How exactly float32 math is done where a backend offers a faster, rounder way.
enum class Precision {
  kFloat32,   // float32 accuracy throughout (the default). On CUDA a float32 product of 512
              // rows or more may run as 3xTF32 where measured faster: operands split into two
              // TF32 parts, three tensor-core products (worst error 2.2e-6 of sum |ab| against
              // float32 FMAs' 1.4e-7, inside float32's bound k 2^-24)
  kTF32,      // CUDA matrix products and convolutions may round their inputs to TF32 (10-bit
              // mantissa) on tensor cores, accumulating in float32; the CPU is unaffected
  kFloat16,   // the float32 values of nodes placed on CUDA, or on Vulkan where the device stores
              // 16-bit floats, are stored as float16 (weights converted once at compile time; on
              // CUDA tensor cores for products and convolutions; float32 accumulation and float32
              // math inside every kernel); casts at the edges keep the graph's inputs and outputs
              // float32. Converts the Graph in place, as optimize() does
  kBFloat16,  // as kFloat16, with bfloat16 (float32's range, 8-bit mantissa); CUDA only
  kFloat32Strict,  // as kFloat32, with every CUDA float32 product and convolution in float32
                   // FMAs (no 3xTF32): the most accurate and, for large products, the slowest
};

}  // namespace lumen
