// CPU kernel of TfIdfVectorizer over int32 or int64 input. The pool's n-grams of the lengths in
// [min_gram_length, max_gram_length] go into a trie at compile time; each row then walks the trie
// from every start position for every skip distance d (1 to max_skip_count + 1), taking items at
// start, start + d, start + 2d, ... 1-grams are counted once (at d = 1), since skips do not
// change them. Counts land on the n-gram's output coordinate; IDF and TFIDF then weight them.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/kernel_registry.h"

namespace lumen::cpu {
namespace {

enum class Weighting { kTf, kIdf, kTfIdf };

// Builds the pool's trie from the node's attributes (checked by the schema); run() counts each row
// into its output row, rows in parallel.
class TfIdfKernel final : public Kernel {
 public:
  explicit TfIdfKernel(const NodeContext& ctx)
      : min_n_(ctx.attr_int("min_gram_length")),
        max_n_(ctx.attr_int("max_gram_length")),
        max_skip_(ctx.attr_int("max_skip_count")),
        weights_(ctx.attr_floats("weights", {})) {
    const std::string mode = ctx.attr_string("mode", "TF");
    weighting_ = mode == "IDF"     ? Weighting::kIdf
                 : mode == "TFIDF" ? Weighting::kTfIdf
                                   : Weighting::kTf;
    const std::vector<int64_t> pool = ctx.attr_ints("pool_int64s");
    const std::vector<int64_t> starts = ctx.attr_ints("ngram_counts");
    const std::vector<int64_t> indexes = ctx.attr_ints("ngram_indexes");
    width_ = *std::max_element(indexes.begin(), indexes.end()) + 1;
    nodes_.emplace_back();
    size_t id = 0;  // the n-gram's place in the pool, which picks its ngram_indexes entry
    for (size_t s = 0; s < starts.size(); ++s) {
      const int64_t n = static_cast<int64_t>(s) + 1;
      const int64_t end = s + 1 < starts.size() ? starts[s + 1] : static_cast<int64_t>(pool.size());
      for (int64_t at = starts[s]; at + n <= end; at += n, ++id)
        if (n >= min_n_ && n <= max_n_) insert(&pool[at], n, indexes[id]);
    }
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.inputs[0];
    const int64_t rows = x.rank() == 2 ? x.shape()[0] : 1;
    const int64_t cols = x.shape()[-1];
    float* y = ctx.outputs[0].data<float>();
    const bool wide = x.dtype() == DType::kInt64;
    const int64_t* x64 = wide ? x.data<int64_t>() : nullptr;
    const int32_t* x32 = wide ? nullptr : x.data<int32_t>();
#pragma omp parallel for schedule(dynamic) if (rows > 1 && rows * cols > 4096)
    for (int64_t r = 0; r < rows; ++r) {
      float* row = y + r * width_;
      std::fill(row, row + width_, 0.0f);
      if (wide)
        count_row(x64 + r * cols, cols, row);
      else
        count_row(x32 + r * cols, cols, row);
      weigh_row(row);
    }
  }

 private:
  struct TrieNode {
    std::unordered_map<int64_t, int32_t> next;  // item -> child node
    int64_t coord = -1;  // output coordinate of the n-gram ending here, or -1
  };

  // Adds n-gram items[0..n) with output coordinate `coord` (a repeated n-gram takes the last).
  void insert(const int64_t* items, int64_t n, int64_t coord) {
    int32_t at = 0;
    for (int64_t k = 0; k < n; ++k) {
      auto it = nodes_[at].next.find(items[k]);
      if (it == nodes_[at].next.end()) {
        const int32_t child = static_cast<int32_t>(nodes_.size());
        nodes_[at].next.emplace(items[k], child);
        nodes_.emplace_back();
        at = child;
      } else {
        at = it->second;
      }
    }
    nodes_[at].coord = coord;
  }

  template <typename T>
  void count_row(const T* x, int64_t cols, float* row) const {
    for (int64_t d = 1; d <= max_skip_ + 1; ++d) {
      const int64_t first = d == 1 ? min_n_ : std::max<int64_t>(min_n_, 2);
      if (first > max_n_) break;
      for (int64_t start = 0; start + (first - 1) * d < cols; ++start) {
        int32_t at = 0;
        for (int64_t n = 1, pos = start; n <= max_n_ && pos < cols; ++n, pos += d) {
          const auto& next = nodes_[at].next;
          auto it = next.find(static_cast<int64_t>(x[pos]));
          if (it == next.end()) break;
          at = it->second;
          if (n >= first && nodes_[at].coord >= 0) row[nodes_[at].coord] += 1.0f;
        }
      }
    }
  }

  void weigh_row(float* row) const {
    if (weighting_ == Weighting::kTf) return;
    const bool weighted = !weights_.empty();
    for (int64_t k = 0; k < width_; ++k) {
      if (weighting_ == Weighting::kIdf)
        row[k] = row[k] > 0.0f ? (weighted ? weights_[k] : 1.0f) : 0.0f;
      else if (weighted)
        row[k] *= weights_[k];
    }
  }

  int64_t min_n_;
  int64_t max_n_;
  int64_t max_skip_;
  std::vector<float> weights_;
  Weighting weighting_ = Weighting::kTf;
  int64_t width_ = 0;
  std::vector<TrieNode> nodes_;  // nodes_[0] is the root
};

std::unique_ptr<Kernel> make_tfidf(const NodeContext& ctx) {
  return std::make_unique<TfIdfKernel>(ctx);
}

}  // namespace

LUMEN_REGISTER_CPU_KERNEL(TfIdfVectorizer, &make_tfidf);

}  // namespace lumen::cpu
