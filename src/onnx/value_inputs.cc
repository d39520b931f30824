#include "onnx/value_inputs.h"

#include <unordered_map>
#include <unordered_set>

namespace lumen::onnx_import {

std::vector<int> shape_deciding_slots(const std::string& op_type, int64_t opset) {
  // Since opset 18 every Reduce op takes its axes as input 1 (ReduceSum since 13).
  static const std::unordered_set<std::string> kReduce = {
      "ReduceMean", "ReduceMax",       "ReduceMin", "ReduceProd",  "ReduceSumSquare",
      "ReduceL1",   "ReduceLogSumExp", "ReduceL2",  "ReduceLogSum"};
  if (kReduce.count(op_type)) return opset >= 18 ? std::vector<int>{1} : std::vector<int>{};
  if (op_type == "ReduceSum") return opset >= 13 ? std::vector<int>{1} : std::vector<int>{};
  if (op_type == "Squeeze" || op_type == "Unsqueeze" || op_type == "Split")
    return opset >= 13 ? std::vector<int>{1} : std::vector<int>{};
  if (op_type == "Slice") return opset >= 10 ? std::vector<int>{1, 2, 3, 4} : std::vector<int>{};
  if (op_type == "Pad") return opset >= 11 ? std::vector<int>{1, 2, 3} : std::vector<int>{};
  if (op_type == "Resize") return opset >= 11 ? std::vector<int>{1, 2, 3} : std::vector<int>{1};
  if (op_type == "Upsample") return opset >= 9 ? std::vector<int>{1} : std::vector<int>{};
  if (op_type == "TopK") return opset >= 10 ? std::vector<int>{1} : std::vector<int>{};
  static const std::unordered_map<std::string, std::vector<int>> kSlots = {
      {"Reshape", {1}},
      {"Expand", {1}},
      {"Tile", {1}},
      {"ConstantOfShape", {0}},
      {"Range", {0, 1, 2}},
      {"OneHot", {1}},
      {"Trilu", {1}},
      {"CumSum", {1}},
      {"CumProd", {1}},
      {"HannWindow", {0}},
      {"HammingWindow", {0}},
      {"BlackmanWindow", {0}},
      {"DFT", {1, 2}},
      {"STFT", {1, 3}},
      {"MelWeightMatrix", {0, 1, 2, 3, 4}},
      {"Dropout", {1, 2}},
      {"MaxUnpool", {2}},
      {"CenterCropPad", {1}},
      {"Col2Im", {1, 2}},
      {"AffineGrid", {1}},
      // Sequences are resolved when the graph is built (ops_sequence.cc): positions and split
      // lengths decide which tensors they hold.
      {"SequenceAt", {1}},
      {"SequenceInsert", {2}},
      {"SequenceErase", {1}},
      {"SplitToSequence", {1}},
  };
  auto it = kSlots.find(op_type);
  return it == kSlots.end() ? std::vector<int>{} : it->second;
}

namespace {

// Names a graph and its nested subgraphs read and define, with each value's producer.
struct Flow {
  // value name -> the names it is computed from (the producing node's inputs, and for a node with
  // subgraphs every outer name they read).
  std::unordered_map<std::string, std::vector<std::string>> sources;
  std::vector<std::string> seeds;  // names that reach a shape-deciding slot directly
};

void collect_reads(const onnx::GraphProto& g, std::vector<std::string>& reads);

bool is_list_type(const onnx::TypeProto& t) {
  return t.has_sequence_type() || t.has_optional_type();
}

const onnx::GraphProto* graph_attr(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name && a.has_g()) return &a.g();
  return nullptr;
}

// Adds to `lists` the names in `g` (and its subgraphs) that hold sequences or optionals: declared
// so, or made by an op that makes them, or passed on by Identity, If and Loop.
void collect_lists(const onnx::GraphProto& g, std::unordered_set<std::string>& lists) {
  static const std::unordered_set<std::string> kMakers = {
      "SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase",
      "SplitToSequence",   "SequenceMap",   "Optional"};
  for (const auto* infos : {&g.input(), &g.output(), &g.value_info()})
    for (const auto& v : *infos)
      if (is_list_type(v.type())) lists.insert(v.name());
  for (const auto& node : g.node()) {
    for (const auto& a : node.attribute())
      if (a.has_g()) collect_lists(a.g(), lists);
    if (!node.domain().empty() && node.domain() != "ai.onnx") continue;
    const std::string& op = node.op_type();
    for (int k = 0; k < node.output_size(); ++k) {
      bool list = kMakers.count(op) > 0;
      if (op == "Identity") list = node.input_size() > 0 && lists.count(node.input(0));
      if (op == "If") {
        for (const char* branch : {"then_branch", "else_branch"}) {
          const onnx::GraphProto* b = graph_attr(node, branch);
          list = list || (b && k < b->output_size() && lists.count(b->output(k).name()));
        }
      }
      if (op == "Loop") {
        const onnx::GraphProto* body = graph_attr(node, "body");
        list = (k + 2 < node.input_size() && lists.count(node.input(k + 2))) ||
               (body && k + 1 < body->output_size() && lists.count(body->output(k + 1).name()));
      }
      if (list) lists.insert(node.output(k));
    }
  }
}

// An If that gives a sequence or optional is inlined, and a Loop that carries one unrolled, when
// the graph is built: their condition and trip count then decide what the graph holds.
std::vector<int> list_deciding_slots(const onnx::NodeProto& node,
                                     const std::unordered_set<std::string>& lists) {
  bool structural = false;
  if (node.op_type() == "If") {
    for (const auto& out : node.output()) structural = structural || lists.count(out);
    return structural ? std::vector<int>{0} : std::vector<int>{};
  }
  if (node.op_type() != "Loop") return {};
  for (int k = 2; k < node.input_size(); ++k) structural = structural || lists.count(node.input(k));
  if (const onnx::GraphProto* body = graph_attr(node, "body"))
    for (int k = 2; k < body->input_size(); ++k)
      structural = structural || is_list_type(body->input(k).type());
  return structural ? std::vector<int>{0, 1} : std::vector<int>{};
}

void node_reads(const onnx::NodeProto& node, std::vector<std::string>& reads) {
  for (const auto& in : node.input())
    if (!in.empty()) reads.push_back(in);
  for (const auto& a : node.attribute()) {
    if (a.has_g()) collect_reads(a.g(), reads);
    for (const auto& sub : a.graphs()) collect_reads(sub, reads);
  }
}

void collect_reads(const onnx::GraphProto& g, std::vector<std::string>& reads) {
  for (const auto& node : g.node()) node_reads(node, reads);
  for (const auto& out : g.output()) reads.push_back(out.name());
}

void walk(const onnx::GraphProto& g, int64_t opset, const std::unordered_set<std::string>& lists,
          Flow& flow) {
  for (const auto& node : g.node()) {
    const bool in_default_domain = node.domain().empty() || node.domain() == "ai.onnx";
    if (in_default_domain) {
      std::vector<int> slots = shape_deciding_slots(node.op_type(), opset);
      for (int slot : list_deciding_slots(node, lists)) slots.push_back(slot);
      for (int slot : slots)
        if (slot < node.input_size() && !node.input(slot).empty())
          flow.seeds.push_back(node.input(slot));
    }
    // Shape and Size read only their input's shape, SequenceLength and OptionalHasElement only
    // what a plan is keyed by already: a chain of values ends there.
    const bool reads_shape_only =
        in_default_domain &&
        (node.op_type() == "Shape" || node.op_type() == "Size" ||
         node.op_type() == "SequenceLength" || node.op_type() == "OptionalHasElement");
    std::vector<std::string> reads;
    if (!reads_shape_only) node_reads(node, reads);
    for (const auto& out : node.output())
      if (!out.empty()) flow.sources[out] = reads;
    for (const auto& a : node.attribute()) {
      if (a.has_g()) walk(a.g(), opset, lists, flow);
      for (const auto& sub : a.graphs()) walk(sub, opset, lists, flow);
    }
  }
  // A subgraph's outputs are read by its node (node_reads lists them), so the values they name
  // lead on to what computes them.
}

}  // namespace

std::vector<std::string> find_value_inputs(const onnx::ModelProto& model, int64_t opset) {
  const onnx::GraphProto& g = model.graph();
  std::unordered_set<std::string> lists;
  collect_lists(g, lists);
  Flow flow;
  walk(g, opset, lists, flow);
  std::unordered_set<std::string> reached;
  std::vector<std::string> stack = flow.seeds;
  while (!stack.empty()) {
    std::string name = std::move(stack.back());
    stack.pop_back();
    if (!reached.insert(name).second) continue;
    auto it = flow.sources.find(name);
    if (it == flow.sources.end()) continue;
    for (const auto& src : it->second)
      if (!reached.count(src)) stack.push_back(src);
  }
  std::unordered_set<std::string> initializers;
  for (const auto& init : g.initializer()) initializers.insert(init.name());
  std::vector<std::string> out;
  for (const auto& in : g.input())
    if (reached.count(in.name()) && !initializers.count(in.name()) && !lists.count(in.name()))
      out.push_back(in.name());
  return out;
}

}  // namespace lumen::onnx_import
