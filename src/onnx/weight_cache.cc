// WeightCache: a name-keyed table of the initializers read so far, under a mutex; a tensor is
// loaded outside the lock, and the first one stored wins.
#include "onnx/weight_cache.h"

namespace lumen::onnx_import {

Tensor WeightCache::get(const std::string& name, const std::function<Tensor()>& load) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = tensors_.find(name);
    if (it != tensors_.end()) return it->second;
  }
  Tensor t = load();
  std::lock_guard<std::mutex> lock(mutex_);
  return tensors_.emplace(name, std::move(t)).first->second;
}

}  // namespace lumen::onnx_import
