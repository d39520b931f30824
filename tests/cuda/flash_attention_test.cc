// The tensor-core attention kernel (src/backends/cuda/flash_attention.cu), launched directly on
// float16 and bfloat16 tensors against a double-precision reference computed from the same rounded
// values: partial key tiles, query rows that do not fill a block, broadcast and per-row masks with
// -inf, grouped key/value heads, heads of 64 and 128, every block shape, and what it refuses.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cuda/launch.h"
#include "cuda/cuda_test_util.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen::test {
namespace {

struct Case {
  int64_t heads, kv_heads, sq, sk, depth;
  enum class Mask { kNone, kPerBatch, kCausal } mask;
};

std::string name(const Case& c, DType dtype) {
  const char* masks[] = {"no mask", "key-padding mask", "causal mask"};
  return std::string(dtype == DType::kFloat16 ? "float16" : "bfloat16") + ", heads " +
         std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + ", sq " +
         std::to_string(c.sq) + ", sk " + std::to_string(c.sk) + ", depth " +
         std::to_string(c.depth) + ", " + masks[static_cast<int>(c.mask)];
}

void check(const Case& c, DType dtype, uint64_t seed) {
  SCOPED_TRACE(name(c, dtype));
  const int64_t d = c.depth, group = c.heads / c.kv_heads;
  const float scale = 1.f / std::sqrt(static_cast<float>(d));
  std::vector<double> q, k, v, mask;
  // Spread scores (about +-4 before the mask), so that the softmax is far from uniform.
  Tensor qf = random_tensor(Shape{c.heads, c.sq, d}, seed, -2.f, 2.f);
  Tensor kf = random_tensor(Shape{c.kv_heads, c.sk, d}, seed + 1, -2.f, 2.f);
  Tensor vf = random_tensor(Shape{c.kv_heads, c.sk, d}, seed + 2);
  const Tensor qh = to_16bit(qf, dtype), kh = to_16bit(kf, dtype), vh = to_16bit(vf, dtype);
  q = to_doubles(qf);
  k = to_doubles(kf);
  v = to_doubles(vf);
  cuda::AttentionDesc desc;
  desc.batch = c.heads;
  desc.sq = c.sq;
  desc.sk = c.sk;
  desc.depth = desc.depth_v = d;
  desc.scale = scale;
  desc.kv_group = group;
  desc.lead_rank = 1;
  desc.lead_dims[0] = c.heads;
  Tensor mf;
  if (c.mask == Case::Mask::kPerBatch) {  // [heads, 1, sk]: random, a run of keys at -inf
    mf = random_tensor(Shape{c.heads, 1, c.sk}, seed + 3);
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t j = c.sk / 3; j < c.sk / 3 + 70 && j < c.sk - 1; ++j)
        mf.data<float>()[h * c.sk + j] = -std::numeric_limits<float>::infinity();
    desc.mask_lead_strides[0] = c.sk;
    desc.mask_k_stride = 1;
  } else if (c.mask == Case::Mask::kCausal) {  // [sq, sk]: key j hidden from row i when j > i + off
    mf = Tensor::empty(Shape{c.sq, c.sk});
    const int64_t off = c.sk - c.sq;
    for (int64_t i = 0; i < c.sq; ++i)
      for (int64_t j = 0; j < c.sk; ++j)
        mf.data<float>()[i * c.sk + j] =
            j > i + off ? -std::numeric_limits<float>::infinity() : 0.f;
    desc.mask_q_stride = c.sk;
    desc.mask_k_stride = 1;
  }
  Tensor mh;
  if (c.mask != Case::Mask::kNone) {
    mh = to_16bit(mf, dtype);
    mask = to_doubles(mf);
  }

  Tensor qd = qh.to(Device::cuda()), kd = kh.to(Device::cuda()), vd = vh.to(Device::cuda());
  Tensor md = c.mask == Case::Mask::kNone ? Tensor() : mh.to(Device::cuda());
  Tensor y = Tensor::empty(Shape{c.heads, c.sq, d}, dtype, Device::cuda());
  const cuda::Storage st =
      dtype == DType::kFloat16 ? cuda::Storage::kFloat16 : cuda::Storage::kBFloat16;
  ASSERT_TRUE(cuda::flash_attention_fits(st, desc));
  ASSERT_TRUE(cuda::launch_flash_attention(st, desc, qd.raw_data(), kd.raw_data(), vd.raw_data(),
                                           c.mask == Case::Mask::kNone ? nullptr : md.raw_data(),
                                           y.raw_data(), nullptr));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  std::vector<double> want(static_cast<size_t>(c.heads * c.sq * d), 0.0), s(c.sk);
  for (int64_t h = 0; h < c.heads; ++h) {
    const int64_t kvh = h / group;
    for (int64_t i = 0; i < c.sq; ++i) {
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < c.sk; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x)
          dot += q[(h * c.sq + i) * d + x] * k[(kvh * c.sk + j) * d + x];
        s[j] = scale * dot;
        if (c.mask == Case::Mask::kPerBatch) s[j] += mask[h * c.sk + j];
        if (c.mask == Case::Mask::kCausal) s[j] += mask[i * c.sk + j];
        mx = std::max(mx, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < c.sk; ++j) sum += s[j] = std::exp(s[j] - mx);
      double* out = &want[(h * c.sq + i) * d];
      for (int64_t j = 0; j < c.sk; ++j)
        for (int64_t x = 0; x < d; ++x) out[x] += s[j] / sum * v[(kvh * c.sk + j) * d + x];
    }
  }
  // P is rounded to the storage type before P V, and Y as it is stored.
  const bool half = dtype == DType::kFloat16;
  expect_close(y.to(Device::cpu()), Shape{c.heads, c.sq, d}, want, half ? 2e-3 : 1.6e-2,
               half ? 2e-3 : 1.6e-2);
}

TEST(FlashAttention, MatchesReference) {
  SKIP_WITHOUT_CUDA();
  const Case cases[] = {
      {6, 6, 200, 333, 64, Case::Mask::kPerBatch},  // partial tiles of rows and keys
      {4, 2, 77, 64, 128, Case::Mask::kNone},       // grouped key/value heads, one key tile
      {3, 3, 150, 150, 128, Case::Mask::kCausal},   // a per-row mask
      {5, 1, 5, 700, 64, Case::Mask::kCausal},      // just above the split-key kernel's rows
      // Grids of 128-row blocks (more than two per multiprocessor of an H100 or H200): masked,
      // unmasked, with three blocks per multiprocessor, and heads of 128.
      {300, 300, 260, 200, 64, Case::Mask::kPerBatch},
      {400, 400, 130, 96, 64, Case::Mask::kNone},
      {390, 130, 100, 90, 64, Case::Mask::kNone},
      {140, 140, 130, 70, 128, Case::Mask::kCausal},
  };
  uint64_t seed = 700;
  for (const Case& c : cases)
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      check(c, dtype, seed);
      seed += 4;
    }
}

TEST(FlashAttention, RefusesWhatItDoesNotRun) {
  SKIP_WITHOUT_CUDA();
  cuda::AttentionDesc desc;
  desc.batch = 2;
  desc.sq = 40;
  desc.sk = 50;
  desc.depth = desc.depth_v = 64;
  EXPECT_TRUE(cuda::flash_attention_fits(cuda::Storage::kFloat16, desc));
  EXPECT_FALSE(cuda::flash_attention_fits(cuda::Storage::kFloat32, desc));
  cuda::AttentionDesc other = desc;
  other.k_transposed = true;
  EXPECT_FALSE(cuda::flash_attention_fits(cuda::Storage::kFloat16, other));
  other = desc;
  other.depth_v = 32;
  EXPECT_FALSE(cuda::flash_attention_fits(cuda::Storage::kFloat16, other));
  other = desc;
  other.depth = other.depth_v = 96;
  EXPECT_FALSE(cuda::flash_attention_fits(cuda::Storage::kBFloat16, other));
  other = desc;
  other.scale = -0.5f;
  EXPECT_FALSE(cuda::flash_attention_fits(cuda::Storage::kFloat16, other));
  other = desc;
  other.sq = cuda::kAttentionSplitMaxRows;
  EXPECT_FALSE(cuda::flash_attention_fits(cuda::Storage::kFloat16, other));
  // A pointer off 16-byte alignment: nothing launched, so the caller's own kernel runs.
  Tensor buf = Tensor::empty(Shape{2 * 64 * 64 + 8}, DType::kFloat16, Device::cuda());
  auto* base = static_cast<uint16_t*>(buf.raw_data());
  EXPECT_FALSE(cuda::launch_flash_attention(cuda::Storage::kFloat16, desc, base + 1, base, base,
                                            nullptr, base, nullptr));
}

}  // namespace
}  // namespace lumen::test
