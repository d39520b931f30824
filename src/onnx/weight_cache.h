// WeightCache: the main graph's initializers of one model file, read once and shared by every
// graph built from that file (the plans an OnnxSession compiles for other shapes), so that each
// weight is held once however many plans there are.
#pragma once

#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>

#include "lumen/onnx.h"

namespace lumen::onnx_import {

class WeightCache {
 public:
  // The initializer `name`: the tensor read earlier, or load() (kept for the next graph).
  Tensor get(const std::string& name, const std::function<Tensor()>& load);

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Tensor> tensors_;
};

// load_onnx(path, options, info) whose main-graph initializers come from (and go to) `cache`.
// With `model`, the model is also kept there as bytes without its main-graph initializers' data
// (what load_onnx_model needs, once `cache` holds them: the file may go after). Errors are not
// prefixed with the path.
Graph load_onnx_cached(const std::string& path, const OnnxLoadOptions& options, WeightCache& cache,
                       OnnxModelInfo* info = nullptr, std::string* model = nullptr);
// The graph of `model` (kept by load_onnx_cached), its main-graph initializers from `cache`;
// external data and subgraphs' initializers are read relative to `base_dir`.
Graph load_onnx_model(const std::string& model, const std::string& base_dir,
                      const OnnxLoadOptions& options, WeightCache& cache,
                      OnnxModelInfo* info = nullptr);

}  // namespace lumen::onnx_import
