// If, Loop and Scan kernels: each owns compiled Executables of its subgraphs (owned by the
// Runtime) and runs them with static shapes per call or iteration. Outputs are made by the kernel
// (a branch's results, the final loop-carried values, scan outputs stacked).
#include "runtime/control_flow.h"

#include <cstring>
#include <string>
#include <vector>

#include "graph/node_context.h"
#include "graph/op_kind.h"

namespace lumen {
namespace {

Executable* compile_subgraph(Runtime* runtime, const CompileOptions& options, const Node& node,
                             const char* attr) {
  const std::shared_ptr<Graph>& g = node.attrs.at(attr).as_graph();
  try {
    return g->compile(runtime, options);
  } catch (const UnsupportedOp& e) {
    throw UnsupportedOp("node '" + node.name + "' (" + op_name(node.op) + "): subgraph '" + attr +
                        "': " + e.what());
  }
}

bool is_true(const Tensor& t) {
  return *static_cast<const bool*>(t.raw_data());
}

// Copies a tensor viewed as [outer, n, inner] at index `i` of the middle axis out of (slice) or
// into (place) a tensor without that axis, of [outer, inner] elements.
void copy_slice(const Tensor& whole, int axis, int64_t i, const Tensor& part, bool into_whole) {
  const Shape& s = whole.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  const size_t row = static_cast<size_t>(inner) * dtype_size(whole.dtype());
  char* w = static_cast<char*>(whole.raw_data());
  char* p = static_cast<char*>(part.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    char* at_whole = w + (o * s[axis] + i) * row;
    char* at_part = p + o * row;
    if (into_whole) {
      std::memcpy(at_whole, at_part, row);
    } else {
      std::memcpy(at_part, at_whole, row);
    }
  }
}

// A branch the importer could not build for these input types has no graph but a reason
// (then_branch_error / else_branch_error); a run whose cond picks it fails with that reason.
class IfKernel final : public Kernel {
 public:
  IfKernel(Runtime* runtime, const CompileOptions& options, const Node& node)
      : name_(node.name), then_inputs_(static_cast<int>(node.attrs.at("then_inputs").as_int())) {
    const char* names[2] = {"then_branch", "else_branch"};
    for (int b = 0; b < 2; ++b) {
      if (node.attrs.count(names[b])) {
        branch_[b] = compile_subgraph(runtime, options, node, names[b]);
      } else {
        error_[b] = node.attrs.at(std::string(names[b]) + "_error").as_string();
      }
    }
  }
  bool makes_outputs() const override { return true; }
  void run(KernelContext& ctx) const override {
    const bool take_then = is_true(ctx.inputs[0]);
    Executable* branch = branch_[take_then ? 0 : 1];
    if (branch == nullptr)
      throw ShapeError("node '" + name_ + "' (If): cond is " + (take_then ? "true" : "false") +
                       ", and that branch could not be built for the input shapes given: " +
                       error_[take_then ? 0 : 1]);
    auto first = ctx.inputs.begin() + 1 + (take_then ? 0 : then_inputs_);
    auto last = take_then ? ctx.inputs.begin() + 1 + then_inputs_ : ctx.inputs.end();
    std::vector<Tensor> outs = branch->execute(std::vector<Tensor>(first, last));
    for (size_t k = 0; k < ctx.outputs.size(); ++k) ctx.outputs[k] = std::move(outs[k]);
  }

 private:
  std::string name_;
  Executable* branch_[2] = {nullptr, nullptr};  // then, else
  std::string error_[2];                        // why a branch is missing
  int then_inputs_;
};

class LoopKernel final : public Kernel {
 public:
  LoopKernel(Runtime* runtime, const CompileOptions& options, const Graph& graph, const Node& node)
      : body_(compile_subgraph(runtime, options, node, "body")) {
    int captured =
        static_cast<int>(node.attrs.count("captured") ? node.attrs.at("captured").as_int() : 0);
    carried_ = static_cast<int>(node.inputs.size()) - 2 - captured;
    for (size_t k = carried_; k < node.outputs.size(); ++k) {
      const TensorType& t = graph.value(node.outputs[k]).type;
      scan_types_.push_back(
          {t.dtype, Shape(std::vector<int64_t>(t.shape.dims().begin() + 1, t.shape.dims().end()))});
    }
  }
  bool makes_outputs() const override { return true; }
  void run(KernelContext& ctx) const override {
    const int64_t trips =
        ctx.inputs[0].defined() ? static_cast<int64_t>(ctx.inputs[0].item_as_double()) : INT64_MAX;
    bool go = !ctx.inputs[1].defined() || is_true(ctx.inputs[1]);
    std::vector<Tensor> args(ctx.inputs.begin(), ctx.inputs.end());
    const int scans = static_cast<int>(scan_types_.size());
    std::vector<std::vector<Tensor>> parts(scans);
    int64_t i = 0;
    for (; i < trips && go; ++i) {
      args[0] = Tensor::scalar<int64_t>(i);
      args[1] = Tensor::scalar<bool>(true);
      std::vector<Tensor> outs = body_->execute(args);
      go = is_true(outs[0]);
      for (int k = 0; k < carried_; ++k) args[2 + k] = std::move(outs[1 + k]);
      for (int k = 0; k < scans; ++k) parts[k].push_back(std::move(outs[1 + carried_ + k]));
    }
    for (int k = 0; k < carried_ && k < static_cast<int>(ctx.outputs.size()); ++k)
      ctx.outputs[k] = args[2 + k];
    for (int k = 0; k < scans && carried_ + k < static_cast<int>(ctx.outputs.size()); ++k) {
      std::vector<int64_t> dims{i};
      const auto& part = scan_types_[k].shape.dims();
      dims.insert(dims.end(), part.begin(), part.end());
      Tensor out = Tensor::empty(Shape(dims), scan_types_[k].dtype);
      for (int64_t t = 0; t < i; ++t) copy_slice(out, 0, t, parts[k][t], true);
      ctx.outputs[carried_ + k] = std::move(out);
    }
  }

 private:
  Executable* body_;
  int carried_ = 0;
  std::vector<TensorType> scan_types_;  // one iteration's part of each scan output
};

class ScanKernel final : public Kernel {
 public:
  ScanKernel(Runtime* runtime, const CompileOptions& options, const Graph& graph, const Node& node)
      : body_(compile_subgraph(runtime, options, node, "body")) {
    NodeContext ctx(graph, node);
    int captured = static_cast<int>(ctx.attr_int("captured", 0));
    scan_inputs_ = static_cast<int>(ctx.attr_int("num_scan_inputs"));
    states_ = ctx.num_inputs() - captured - scan_inputs_;
    in_axes_ = ctx.attr_ints("scan_input_axes", std::vector<int64_t>(scan_inputs_, 0));
    in_dirs_ = ctx.attr_ints("scan_input_directions", std::vector<int64_t>(scan_inputs_, 0));
    const int scan_outputs = ctx.num_outputs() - states_;
    const int body_scans =
        static_cast<int>(node.attrs.at("body").as_graph()->outputs().size()) - states_;
    out_axes_ = ctx.attr_ints("scan_output_axes", std::vector<int64_t>(body_scans, 0));
    out_dirs_ = ctx.attr_ints("scan_output_directions", std::vector<int64_t>(body_scans, 0));
    for (int j = 0; j < scan_inputs_; ++j) {
      const TensorType& in = ctx.input(states_ + j);
      in_axes_[j] = normalize_axis(in_axes_[j], in.shape.rank());
      length_ = in.shape[static_cast<int>(in_axes_[j])];
      Shape slice = in.shape;
      slice.dims().erase(slice.dims().begin() + in_axes_[j]);
      slice_types_.push_back({in.dtype, slice});
    }
    for (int k = 0; k < scan_outputs; ++k) {
      const TensorType& out = ctx.output(states_ + k);
      out_axes_[k] = normalize_axis(out_axes_[k], out.shape.rank());
      output_types_.push_back(out);
    }
  }
  bool makes_outputs() const override { return true; }
  void run(KernelContext& ctx) const override {
    std::vector<Tensor> args(ctx.inputs.begin(), ctx.inputs.end());
    std::vector<Tensor> outputs;
    for (const TensorType& t : output_types_) outputs.push_back(Tensor::empty(t.shape, t.dtype));
    for (int64_t t = 0; t < length_; ++t) {
      for (int j = 0; j < scan_inputs_; ++j) {
        Tensor slice = Tensor::empty(slice_types_[j].shape, slice_types_[j].dtype);
        int64_t at = in_dirs_[j] == 1 ? length_ - 1 - t : t;
        copy_slice(ctx.inputs[states_ + j], static_cast<int>(in_axes_[j]), at, slice, false);
        args[states_ + j] = std::move(slice);
      }
      std::vector<Tensor> outs = body_->execute(args);
      for (int k = 0; k < states_; ++k) args[k] = std::move(outs[k]);
      for (size_t k = 0; k < outputs.size(); ++k) {
        int64_t at = out_dirs_[k] == 1 ? length_ - 1 - t : t;
        copy_slice(outputs[k], static_cast<int>(out_axes_[k]), at, outs[states_ + k], true);
      }
    }
    for (int k = 0; k < states_ && k < static_cast<int>(ctx.outputs.size()); ++k)
      ctx.outputs[k] = args[k];
    for (size_t k = 0; k < outputs.size(); ++k) ctx.outputs[states_ + k] = std::move(outputs[k]);
  }

 private:
  Executable* body_;
  int scan_inputs_ = 0;
  int states_ = 0;
  int64_t length_ = 0;
  std::vector<int64_t> in_axes_, in_dirs_, out_axes_, out_dirs_;
  std::vector<TensorType> slice_types_;   // one slice of each scan input
  std::vector<TensorType> output_types_;  // each scan output, stacked
};

}  // namespace

bool is_control_flow(OpKind op) {
  return op == OpKind::kIf || op == OpKind::kLoop || op == OpKind::kScan;
}

std::unique_ptr<Kernel> make_control_flow_kernel(Runtime* runtime, const CompileOptions& options,
                                                 const Graph& graph, const Node& node) {
  switch (node.op) {
    case OpKind::kIf:
      return std::make_unique<IfKernel>(runtime, options, node);
    case OpKind::kLoop:
      return std::make_unique<LoopKernel>(runtime, options, graph, node);
    case OpKind::kScan:
      return std::make_unique<ScanKernel>(runtime, options, graph, node);
    default:
      throw UnsupportedOp("node '" + node.name + "' (" + op_name(node.op) +
                          "): not a control-flow op");
  }
}

}  // namespace lumen
