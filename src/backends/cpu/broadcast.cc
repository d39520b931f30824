// BroadcastPlan construction: align the input shapes to the output, drop size-1 dimensions and
// merge neighbours that broadcast alike for every input.
#include "backends/cpu/broadcast.h"

#include <string>

#include "lumen/error.h"

namespace lumen::cpu {

BroadcastPlan::BroadcastPlan(const Shape& out, const std::vector<Shape>& inputs) {
  const int n = static_cast<int>(inputs.size());
  if (n > kMaxInputs)
    throw InvalidArgument("BroadcastPlan: " + std::to_string(n) + " inputs, at most " +
                          std::to_string(kMaxInputs));
  const int rank = out.rank();
  for (const Shape& in : inputs) {
    bool ok = in.rank() <= rank;
    for (int i = 0; ok && i < in.rank(); ++i) {
      int64_t d = in.dims()[i];
      ok = d == 1 || d == out.dims()[rank - in.rank() + i];
    }
    if (!ok)
      throw ShapeError("shape " + in.to_string() + " does not broadcast to " + out.to_string());
  }
  numel_ = out.numel();
  strides_.assign(n, {});
  identity_.assign(n, false);
  for (int k = 0; k < n; ++k) identity_[k] = inputs[k].numel() == numel_;
  if (numel_ == 0) {
    dims_ = {0};
    for (auto& s : strides_) s = {0};
    return;
  }

  // Per kept output dimension: its size and, per input, whether the input repeats along it.
  std::vector<int64_t> dims;
  std::vector<std::vector<bool>> repeats(n);
  for (int i = 0; i < rank; ++i) {
    const int64_t d = out.dims()[i];
    if (d == 1) continue;  // every input has 1 here too: nothing to iterate
    bool merge = !dims.empty();
    std::vector<bool> rep(n);
    for (int k = 0; k < n; ++k) {
      const int j = inputs[k].rank() - rank + i;
      rep[k] = j < 0 || inputs[k].dims()[j] == 1;
      merge = merge && rep[k] == repeats[k].back();
    }
    if (merge) {
      dims.back() *= d;
    } else {
      dims.push_back(d);
      for (int k = 0; k < n; ++k) repeats[k].push_back(rep[k]);
    }
  }
  if (dims.empty()) {  // a single element
    dims_ = {1};
    for (auto& s : strides_) s = {1};
    return;
  }
  dims_ = dims;
  for (int k = 0; k < n; ++k) {
    std::vector<int64_t>& s = strides_[k];
    s.assign(dims.size(), 0);
    int64_t step = 1;
    for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
      if (repeats[k][i]) continue;
      s[i] = step;
      step *= dims[i];
    }
  }
}

}  // namespace lumen::cpu
