// Schema of TfIdfVectorizer (opset 9) over integer n-grams. X is int32 or int64, [C] or [N, C];
// Y is float32, [K] or [N, K] with K = max(ngram_indexes) + 1. The pool (pool_int64s) holds the
// 1-grams, 2-grams, ... one after another; ngram_counts[i] is where the (i+1)-grams start. String
// pools and string inputs are not supported (lumen has no string tensors). Weights, when given,
// scale output coordinate k by weights[k], as ONNX Runtime and ONNX's reference do.
#include <algorithm>
#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_tfidf(InferContext& ctx) {
  if (ctx.has_attr("pool_strings"))
    ctx.fail_unsupported(
        "string n-grams (pool_strings) are not supported: lumen has no string tensors");
  if (!ctx.has_attr("pool_int64s")) ctx.fail_model("pool_int64s (or pool_strings) is required");
  const DType t = ctx.input_dtype(0);
  if (t != DType::kInt32 && t != DType::kInt64)
    ctx.fail_unsupported(
        std::string("X must be int32 or int64 (lumen runs no string input), not ") + dtype_name(t));
  const Shape& x = ctx.input_shape(0);
  if (x.rank() != 1 && x.rank() != 2)
    ctx.fail_shape("X must be [C] or [N, C], got " + x.to_string());

  const std::string mode = ctx.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    ctx.fail_model("mode must be 'TF', 'IDF' or 'TFIDF', got '" + mode + "'");
  const int64_t min_n = ctx.attr_int("min_gram_length");
  const int64_t max_n = ctx.attr_int("max_gram_length");
  const int64_t skips = ctx.attr_int("max_skip_count");
  if (min_n < 1 || max_n < min_n)
    ctx.fail_model("n-gram lengths must satisfy 1 <= min_gram_length <= max_gram_length, got " +
                   std::to_string(min_n) + " and " + std::to_string(max_n));
  if (skips < 0) ctx.fail_model("max_skip_count must not be negative");

  const int64_t pool = static_cast<int64_t>(ctx.attr_ints("pool_int64s").size());
  const std::vector<int64_t> starts = ctx.attr_ints("ngram_counts");
  if (starts.empty()) ctx.fail_model("ngram_counts is empty");
  int64_t ngrams = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t begin = starts[i];
    const int64_t end = i + 1 < starts.size() ? starts[i + 1] : pool;
    const int64_t n = static_cast<int64_t>(i) + 1;
    if (begin < 0 || begin > end || end > pool)
      ctx.fail_model("ngram_counts must rise from 0 to at most the pool's " + std::to_string(pool) +
                     " items, got " + std::to_string(begin) + " for " + std::to_string(n) +
                     "-grams");
    if ((end - begin) % n != 0)
      ctx.fail_model("the " + std::to_string(end - begin) + " pool items of the " +
                     std::to_string(n) + "-grams are not a whole number of " + std::to_string(n) +
                     "-grams");
    ngrams += (end - begin) / n;
  }
  const std::vector<int64_t> indexes = ctx.attr_ints("ngram_indexes");
  if (static_cast<int64_t>(indexes.size()) < ngrams || indexes.empty())
    ctx.fail_model("ngram_indexes has " + std::to_string(indexes.size()) +
                   " entries, but the pool holds " + std::to_string(ngrams) + " n-grams");
  if (*std::min_element(indexes.begin(), indexes.end()) < 0)
    ctx.fail_model("ngram_indexes must not be negative");
  const int64_t width = *std::max_element(indexes.begin(), indexes.end()) + 1;
  const std::vector<float> weights = ctx.attr_floats("weights", {});
  if (!weights.empty() && weights.size() != indexes.size())
    ctx.fail_model("weights has " + std::to_string(weights.size()) + " entries, ngram_indexes " +
                   std::to_string(indexes.size()));
  if (!weights.empty() && mode != "TF" && static_cast<int64_t>(weights.size()) < width)
    ctx.fail_model("weights scale output coordinates 0 to " + std::to_string(width - 1) +
                   " but has " + std::to_string(weights.size()) + " entries");

  if (x.rank() == 1)
    ctx.set_output(0, DType::kFloat32, Shape({width}));
  else
    ctx.set_output(0, DType::kFloat32, Shape({x[0], width}));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(TfIdfVectorizer, {.attrs = {{"max_gram_length", AttrType::kInt, true},
                                                  {"max_skip_count", AttrType::kInt, true},
                                                  {"min_gram_length", AttrType::kInt, true},
                                                  {"mode", AttrType::kString, true},
                                                  {"ngram_counts", AttrType::kInts, true},
                                                  {"ngram_indexes", AttrType::kInts, true},
                                                  {"pool_int64s", AttrType::kInts},
                                                  {"pool_strings", AttrType::kStrings},
                                                  {"weights", AttrType::kFloats}},
                                        .infer = &infer_tfidf});

}  // namespace lumen
