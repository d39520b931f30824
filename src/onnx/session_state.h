// What an OnnxSession holds: its plans, the file's weights, and its shape families.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "lumen/onnx.h"
#include "onnx/shape_family.h"
#include "onnx/weight_cache.h"

namespace lumen {

// A plan keeps its Graph alive next to the Executable compiled from it, in a Runtime of its own
// so that evicting the plan frees the executable (memory pools are per device, not per Runtime).
struct OnnxSession::Plan {
  Runtime runtime;
  Graph graph;
  Executable* executable = nullptr;
  std::set<std::string> fixed;  // value inputs compiled in as constants
  uint64_t last_used = 0;
  std::vector<OnnxOutputForm> forms;  // how the graph's outputs make up the model's
};

struct OnnxSession::Weights {
  onnx_import::WeightCache cache;
  std::string model;     // the model without its weights' data (load_onnx_cached)
  std::string base_dir;  // where its external data lies
};

// The plans of one pattern of input shapes at every size of its symbolic dims: the fitted graph
// and the plan compiled first, whose kernels that run at any size the others share. `shape` is
// null where the family was refused (then `why` says why, and every size compiles on its own).
struct OnnxSession::Family {
  std::unique_ptr<ShapeFamily> shape;
  std::string why;
  std::shared_ptr<Plan> first;
  std::vector<OnnxOutputForm> forms;
};

}  // namespace lumen
