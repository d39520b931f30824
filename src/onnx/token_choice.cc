// check_options and choose_token (token_choice.h).
#include "onnx/token_choice.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "lumen/error.h"

namespace lumen {
namespace {

// A uniform double in [0, 1) from 53 random bits: the same on every platform for a seed.
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

}  // namespace

void check_options(const GenerateOptions& o) {
  if (o.max_new_tokens < 1)
    throw InvalidArgument("generate: max_new_tokens must be at least 1, got " +
                          std::to_string(o.max_new_tokens));
  if (o.do_sample && !(o.temperature > 0.0f && std::isfinite(o.temperature)))
    throw InvalidArgument("generate: temperature must be a positive number, got " +
                          std::to_string(o.temperature));
  if (o.top_k < 0)
    throw InvalidArgument("generate: top_k must be 0 (no limit) or positive, got " +
                          std::to_string(o.top_k));
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f))
    throw InvalidArgument("generate: top_p must be in (0, 1], got " + std::to_string(o.top_p));
  if (o.pad_token_id < 0)
    throw InvalidArgument("generate: pad_token_id must not be negative, got " +
                          std::to_string(o.pad_token_id));
}

int64_t choose_token(const float* logits, int64_t vocab, const GenerateOptions& o,
                     std::mt19937_64& rng, std::vector<std::pair<float, int64_t>>& scratch) {
  if (!o.do_sample || o.top_k == 1) return std::max_element(logits, logits + vocab) - logits;
  const float inv_t = 1.0f / o.temperature;
  scratch.resize(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) scratch[i] = {logits[i] * inv_t, i};
  auto larger = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  int64_t keep = o.top_k > 0 ? std::min(o.top_k, vocab) : vocab;
  const bool sorted = keep < vocab || o.top_p < 1.0f;
  if (keep < vocab) {
    std::nth_element(scratch.begin(), scratch.begin() + keep, scratch.end(), larger);
    scratch.resize(static_cast<size_t>(keep));
  }
  if (sorted) std::sort(scratch.begin(), scratch.end(), larger);
  float top = -INFINITY;
  for (const auto& s : scratch) top = std::max(top, s.first);
  double total = 0;
  for (auto& s : scratch) {
    s.first = std::exp(s.first - top);
    total += s.first;
  }
  if (o.top_p < 1.0f) {
    // The smallest most-likely prefix whose probability reaches top_p.
    double cum = 0;
    size_t n = 0;
    while (n < scratch.size() && cum < o.top_p * total) cum += scratch[n++].first;
    scratch.resize(std::max<size_t>(n, 1));
    total = cum > 0 ? cum : scratch[0].first;
  }
  double u = uniform01(rng) * total;
  for (const auto& s : scratch) {
    u -= s.first;
    if (u < 0) return s.second;
  }
  return scratch.back().second;
}

}  // namespace lumen
