// stream_copy (backends/cuda/stream_copy.h), the cache-bypassing copy that stages host inputs for
// the CUDA copy engine: byte for byte memcpy's result at every alignment of source and
// destination, for sizes around its 16-byte head and 64-byte body, leaving the bytes around the
// destination untouched. Host code only: runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "backends/cuda/stream_copy.h"

namespace lumen {
namespace {

TEST(StreamCopy, MatchesMemcpyAtEveryAlignment) {
  std::mt19937 rng(7);
  std::vector<char> src(4096 + 64), dst(4096 + 128);
  for (char& c : src) c = static_cast<char>(rng());
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{63}, size_t{64},
                       size_t{65}, size_t{127}, size_t{200}, size_t{4096}})
    for (size_t to = 0; to < 32; to += 3)
      for (size_t from = 0; from < 32; from += 5) {
        SCOPED_TRACE(::testing::Message() << bytes << " bytes to +" << to << " from +" << from);
        std::fill(dst.begin(), dst.end(), '\x5a');
        cuda::stream_copy(dst.data() + 16 + to, src.data() + from, bytes);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= 16 + to && i < 16 + to + bytes;
          const char want = inside ? src[from + i - 16 - to] : '\x5a';
          ASSERT_EQ(dst[i], want) << "byte " << i;
        }
      }
}

}  // namespace
}  // namespace lumen
