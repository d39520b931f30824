// Loading ONNX models into a lumen::Graph.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "lumen/graph.h"
#include "lumen/runtime.h"

namespace lumen {

struct OnnxLoadOptions {
  // Shapes of graph inputs by name. They fix symbolic or unknown dimensions (batch, sequence) and
  // must agree with every fixed dimension the model declares.
  std::map<std::string, Shape> input_shapes;
  // The size given to a symbolic or unknown dimension the caller did not fix.
  int64_t default_dim = 1;
  // Inputs whose values are fixed at load time: they become constants (and leave the graph's
  // inputs), so shape inputs fed by the caller (Reshape's shape, Slice's starts) are known when the
  // graph is built. Dtype and shape must fit the model's declaration.
  std::map<std::string, Tensor> input_values;
};

// An input as the model declares it: dims of -1 are symbolic (their name in `symbols`).
struct OnnxInputInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;  // one per dim; empty for fixed dims
};

// What a model says about itself, for tools (`lumen inspect`).
struct OnnxModelInfo {
  int64_t ir_version = 0;
  int64_t opset = 0;  // of the default (ai.onnx) domain
  std::string producer;
  std::vector<OnnxInputInfo> inputs;
  std::vector<std::string> outputs;
  // Inputs whose values decide shapes (Reshape's shape, Slice's starts, Reduce axes, TopK's K,
  // Range's bounds, ... fed by the input directly or computed from it), less those fixed by
  // OnnxLoadOptions::input_values. load_onnx needs them fixed; OnnxSession reads them at each run.
  // Filled as soon as the opset is read, so it holds even when loading fails later.
  std::vector<std::string> value_inputs;
};

// Loads an ONNX file. Throws IoError when the file cannot be read (or external data is outside the
// model's folder), InvalidModel when it is malformed, UnsupportedOp naming the node, its op and the
// opset when lumen cannot run a node, ShapeError when shapes do not fit. External data is read
// relative to the model's folder.
Graph load_onnx(const std::string& path, const OnnxLoadOptions& options = {},
                OnnxModelInfo* info = nullptr);
// The same from bytes in memory; external data, if any, is looked up under `base_dir`.
Graph load_onnx_bytes(std::string_view bytes, const OnnxLoadOptions& options = {},
                      const std::string& base_dir = "", OnnxModelInfo* info = nullptr);
// An ONNX model ready to run at any input shape. The file is read and checked once (at
// construction, so a bad model fails there); the first run at a new set of input shapes builds,
// optimizes and compiles a plan for those shapes, and later runs at the same shapes reuse it.
// Inputs whose values decide shapes (OnnxModelInfo::value_inputs: a Reshape's shape, a Reduce's
// axes, TopK's K given at run time) are read at each run, and their values join the plan's key:
// the same values reuse a plan, new ones compile one. At most max_plans() plans are kept (the
// least recently used goes first). run() may be called from several threads at once.
class OnnxSession {
 public:
  // Plans kept by default: enough for the shapes and values a served model sees in turn, few
  // enough that a stream of distinct values does not hold unbounded memory.
  static constexpr size_t kDefaultMaxPlans = 32;

  // Throws what load_onnx throws. `options.input_shapes` is ignored (shapes come from the
  // inputs at each run); input_values and default_dim apply to every plan. A model with value
  // inputs is built up to the first node that needs their values; the rest is checked at the
  // first run.
  explicit OnnxSession(const std::string& path, OnnxLoadOptions options = {},
                       CompileOptions compile = {});
  ~OnnxSession();
  OnnxSession(const OnnxSession&) = delete;
  OnnxSession& operator=(const OnnxSession&) = delete;

  // Runs with inputs by name (every input of the model must be given, and no other). A value
  // input whose value makes no valid shape throws ShapeError naming the node, the input and
  // the value.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs);
  // The compiled plan for these inputs (their shapes, and the values of the value inputs);
  // compiled now if it is new. Owned by the session, valid while it stays cached.
  Executable* plan_for(const std::map<std::string, Tensor>& inputs);
  // The same by input shapes alone, for a model without value inputs (InvalidArgument otherwise).
  Executable* plan_for(const std::map<std::string, Shape>& shapes);
  // How many plans are cached.
  size_t num_plans() const;
  // The most plans kept; at least 1. Lowering it evicts the least recently used at once.
  size_t max_plans() const;
  void set_max_plans(size_t n);
  // The inputs and outputs as the model declares them.
  const OnnxModelInfo& info() const { return info_; }

 private:
  struct Plan;
  std::shared_ptr<Plan> acquire(const std::map<std::string, Tensor>& inputs,
                                const std::map<std::string, Shape>& shapes);
  void evict_locked();
  std::string bytes_;
  std::string base_dir_;
  OnnxLoadOptions options_;
  CompileOptions compile_;
  OnnxModelInfo info_;
  mutable std::mutex mutex_;
  size_t max_plans_ = kDefaultMaxPlans;
  uint64_t clock_ = 0;                                  // advances on every use of a plan
  std::map<std::string, std::shared_ptr<Plan>> plans_;  // key: input shapes and values as text
};

// Reads a serialized onnx.TensorProto (the conformance suite's input_0.pb files).
Tensor load_onnx_tensor(const std::string& path);

}  // namespace lumen
