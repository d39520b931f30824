// Loading ONNX models into a lumen::Graph.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lumen/graph.h"
#include "lumen/runtime.h"

namespace lumen {

// What an ONNX graph input or output holds: a tensor, a sequence of tensors, or an optional (of a
// tensor or of a sequence of tensors) that may be empty. Lumen graphs carry tensors only, so a
// sequence's length and an optional's presence are fixed when a graph is built, like shapes.
enum class OnnxValueKind { kTensor, kSequence, kOptionalTensor, kOptionalSequence };

// "tensor", "sequence", "optional tensor", "optional sequence"
const char* onnx_value_kind_name(OnnxValueKind kind);

// One input or output value of OnnxSession::run_values.
struct OnnxValue {
  OnnxValueKind kind = OnnxValueKind::kTensor;
  // False only for an empty optional.
  bool present = true;
  // A tensor: exactly one. A sequence (optional or not): its elements, in order (possibly none).
  // An optional tensor: one when present, none when empty.
  std::vector<Tensor> tensors;

  static OnnxValue tensor(Tensor t);
  static OnnxValue sequence(std::vector<Tensor> elements);
  static OnnxValue optional_tensor(Tensor t);
  static OnnxValue optional_sequence(std::vector<Tensor> elements);
  // An empty optional of `kind` (kOptionalTensor or kOptionalSequence; InvalidArgument otherwise).
  static OnnxValue empty_optional(OnnxValueKind kind);
};

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
  // Sequence inputs (and optional-sequence inputs that are present) by name: the shape of each
  // element, so the list's length. An unnamed sequence input holds one element of its declared
  // element shape (symbolic dims at default_dim).
  std::map<std::string, std::vector<Shape>> sequence_shapes;
  // Optional inputs that are empty; every other optional input holds a value (an optional tensor's
  // shape comes from input_shapes, an optional sequence's from sequence_shapes).
  std::set<std::string> empty_optionals;
  // Nodes (by name) that run even where folding could compute their outputs when the graph is
  // built (Graph::keep_unfolded).
  std::set<std::string> unfolded;
  // OnnxSession only: compile a plan for every new set of input shapes, instead of one plan for
  // every size of the model's symbolic dims (for comparisons; see OnnxSession).
  bool plan_per_shape = false;
};

// An input as the model declares it: dims of -1 are symbolic (their name in `symbols`). For a
// sequence or an optional, dtype, dims and symbols describe its tensors.
struct OnnxInputInfo {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;  // one per dim; empty for fixed dims
  OnnxValueKind kind = OnnxValueKind::kTensor;
};

// How one model output came out of a load: what it holds, and which of the built graph's outputs
// are its tensors (outputs first .. first + count - 1, in order).
struct OnnxOutputForm {
  OnnxValueKind kind = OnnxValueKind::kTensor;
  bool present = true;  // false only for an empty optional
  int first = 0;
  int count = 1;  // 1 for a tensor; a sequence's length; 0 for an empty optional
};

// What a model says about itself, for tools (`lumen inspect`).
struct OnnxModelInfo {
  int64_t ir_version = 0;
  int64_t opset = 0;  // of the default (ai.onnx) domain
  std::string producer;
  std::vector<OnnxInputInfo> inputs;
  std::vector<std::string> outputs;
  // One per output, in `outputs` order: its declared tensor type (dims of -1 symbolic); dims
  // empty and dtype float32 where the model declares no tensor type.
  std::vector<OnnxInputInfo> output_types;
  // Inputs whose values decide shapes (Reshape's shape, Slice's starts, Reduce axes, TopK's K,
  // Range's bounds, ... fed by the input directly or computed from it), less those fixed by
  // OnnxLoadOptions::input_values. load_onnx needs them fixed; OnnxSession reads them at each run.
  // Filled as soon as the opset is read, so it holds even when loading fails later.
  std::vector<std::string> value_inputs;
  // One per output, in `outputs` order: how the built graph holds it. A sequence input of length
  // n is n graph inputs named by onnx_element_name(); an optional tensor that is present is one
  // graph input under its own name.
  std::vector<OnnxOutputForm> output_forms;
};

// The name of the graph input holding element `index` of sequence input `name`: "name[index]".
std::string onnx_element_name(const std::string& name, size_t index);

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
//
// Symbolic dims (batch, sequence) do not cost a compile per size: the first run at sizes of 2 or
// more builds the graph at a few sizes around them and, where those are one graph up to the
// numbers the sizes decide (shape_family.h), compiles it once with kernels that run at any size
// (Kernel::runs_any_shape). A run at other sizes then evaluates those numbers, re-plans memory and
// builds only the kernels that are not shared (cheap ones: views, element-wise, attention);
// nothing is imported, optimized, packed or timed again. A symbolic dim of size 1 keeps its own
// family (broadcasting differs), and a model whose graph is not one across sizes (shape
// arithmetic that is not multilinear, size-dependent large constants, control flow) compiles per
// shape as before; stats() tells which happened.
class OnnxSession {
 public:
  // What the session did for the shapes it was given (counts since construction).
  struct Stats {
    size_t compiles = 0;  // plans imported, optimized and compiled (families' first plans too)
    size_t sized = 0;     // plans made from a family at new sizes, without a compile
    size_t families = 0;  // families fitted
    size_t kernels_shared = 0;  // kernels sized plans took from their family's first plan
    size_t kernels_built = 0;   // kernels sized plans built for themselves
    std::string refused;        // why the last family that could not be fitted was not, or ""
  };
  // Plans kept by default: enough for the shapes and values a served model sees in turn, few
  // enough that a stream of distinct values does not hold unbounded memory.
  static constexpr size_t kDefaultMaxPlans = 32;

  // Throws what load_onnx throws. `options.input_shapes` is ignored (shapes come from the
  // inputs at each run); input_values and default_dim apply to every plan. A model with value
  // inputs is built up to the first node that needs their values; the rest is checked at the
  // first run. A model with sequence or optional inputs is checked at one element per sequence
  // and every optional present, and a ShapeError there waits for the first run too.
  // sequence_shapes and empty_optionals are ignored (they come from the inputs at each run).
  explicit OnnxSession(const std::string& path, OnnxLoadOptions options = {},
                       CompileOptions compile = {});
  ~OnnxSession();
  OnnxSession(const OnnxSession&) = delete;
  OnnxSession& operator=(const OnnxSession&) = delete;

  // Runs with inputs by name (every input of the model must be given, and no other). A value
  // input whose value makes no valid shape throws ShapeError naming the node, the input and
  // the value.
  // Throws InvalidArgument for a model whose inputs or outputs are sequences or optionals (use
  // run_values).
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs);
  // The same with the outputs where `place` says (OutputPlace::kDevice: device outputs stay on
  // the device, for a caller that feeds them back, such as a decoder's key/value cache).
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs, OutputPlace place);
  // Runs a model whose inputs or outputs may be sequences or optionals (any model: tensors are
  // OnnxValue::tensor). Each value must be of the kind its input declares (a tensor or sequence
  // may be given for an optional one); sequence lengths and optional presence join the plan's
  // key, like shapes. Returns one value per model output, of the kind the model built. Throws
  // InvalidArgument for a missing, unknown or wrongly kinded input, and what run() throws.
  std::vector<OnnxValue> run_values(const std::map<std::string, OnnxValue>& inputs);
  // The compiled plan for these inputs (their shapes, and the values of the value inputs);
  // compiled now if it is new. Owned by the session, valid while it stays cached; nullptr when
  // the plan computes nothing (every output an empty sequence or optional). Both forms throw
  // InvalidArgument for a model with sequence or optional inputs.
  Executable* plan_for(const std::map<std::string, Tensor>& inputs);
  // The same by input shapes alone, for a model without value inputs (InvalidArgument otherwise).
  Executable* plan_for(const std::map<std::string, Shape>& shapes);
  // A plan for these input shapes (a model without value inputs) whose optimized graph `edit`
  // rewrites before it compiles: a caller's own form of the model, such as a decoding step that
  // writes its key/value cache in place (Generator). Cached apart from plan_for's plans under
  // `edit_key`, never made from a shape family. Null where `edit` returns false (it does not
  // apply to this model; the refusal is cached too).
  Executable* plan_edited(const std::map<std::string, Shape>& shapes, const std::string& edit_key,
                          const std::function<bool(Graph&)>& edit);
  // How many plans are cached.
  size_t num_plans() const;
  // The most plans kept; at least 1. Lowering it evicts the least recently used at once.
  size_t max_plans() const;
  void set_max_plans(size_t n);
  Stats stats() const;
  // The inputs and outputs as the model declares them.
  const OnnxModelInfo& info() const { return info_; }

 private:
  struct Plan;
  struct Lists;
  struct Weights;
  struct Family;
  // Fills `plan` from the family of `shapes` (fitting it first if new); false where the shapes
  // have no family or it was refused, and the plan is compiled for the shapes alone.
  bool plan_from_family_locked(const std::map<std::string, Shape>& shapes,
                               const OnnxLoadOptions& options, const std::shared_ptr<Plan>& plan);
  // A plan edited before it compiles (plan_edited).
  struct Edit {
    std::string key;
    const std::function<bool(Graph&)>* apply = nullptr;
  };
  std::shared_ptr<Plan> acquire(const std::map<std::string, Tensor>& inputs,
                                const std::map<std::string, Shape>& shapes,
                                const Lists* lists = nullptr, const Edit* edit = nullptr);
  void evict_locked();
  std::string path_;
  std::unique_ptr<Weights> weights_;  // the file's weights, read once and shared by every plan
  OnnxLoadOptions options_;
  CompileOptions compile_;
  OnnxModelInfo info_;
  mutable std::mutex mutex_;
  size_t max_plans_ = kDefaultMaxPlans;
  uint64_t clock_ = 0;                                  // advances on every use of a plan
  std::map<std::string, std::shared_ptr<Plan>> plans_;  // key: input shapes and values as text
  std::set<std::string> refused_edits_;                 // plan_edited keys whose edit refused
  // key: input shapes with each symbolic dim of size 2 or more as "*"
  std::map<std::string, std::shared_ptr<Family>> families_;
  Stats stats_;
};

// Reads a serialized onnx.TensorProto (the conformance suite's input_0.pb files).
Tensor load_onnx_tensor(const std::string& path);
// Reads a serialized onnx.TensorProto, SequenceProto or OptionalProto, as `kind` says (the
// conformance suite's files for sequence and optional inputs and outputs). Throws InvalidModel
// when the file does not hold that kind, UnsupportedOp for sequences of maps or sequences.
OnnxValue load_onnx_value(const std::string& path, OnnxValueKind kind);

}  // namespace lumen
