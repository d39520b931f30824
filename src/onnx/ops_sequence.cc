// Converters for ONNX's sequences and optionals. Lumen graphs carry tensors only, so these values
// are resolved when the graph is built (ListValue: the tensor values a sequence or optional
// holds): sequence ops become list manipulation on known positions, SplitToSequence a Split,
// ConcatFromSequence a Concat, SequenceMap its body imported once per element, and a Loop that
// carries a sequence or optional is unrolled. Positions, trip counts and conditions must be known
// by then; OnnxSession reads them at run time and keys its plans by them (value_inputs.cc).
#include <string>
#include <unordered_set>
#include <vector>

#include "graph/onnx_dtype.h"
#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

// Sequences built when the graph is built become that many values: bounded like Scan-8's batch.
constexpr int64_t kMaxElements = 1 << 14;
// Iterations of an unrolled Loop.
constexpr int64_t kMaxUnrolled = 4096;
// What the importer's callers look for when a value is needed to build the graph.
constexpr const char* kNeedsValue = "must be known when the graph is built";

bool known(const Value* v) {
  return v != nullptr && v->data && !v->user_weight && !v->is_input;
}

// Input `i` as a scalar integer known when the graph is built.
int64_t known_int(ImportContext& ctx, size_t i, const std::string& what) {
  Value* v = ctx.input(i);
  if (ctx.list_input(i) != nullptr)
    throw InvalidModel(ctx.where() + ": " + what + " must be a tensor");
  if (!known(v)) throw ShapeError(ctx.where() + ": the " + what + " " + kNeedsValue);
  if (v->data->numel() != 1)
    throw InvalidModel(ctx.where() + ": the " + what + " must hold one value, not " +
                       v->type.to_string());
  return static_cast<int64_t>(v->data->item_as_double());
}

const ListValue& sequence_input(ImportContext& ctx, size_t i) {
  const ListValue* l = ctx.list_input(i);
  if (l == nullptr || l->kind != OnnxValueKind::kSequence)
    throw InvalidModel(ctx.where() + ": input " + std::to_string(i) + " must be a sequence, not " +
                       (l              ? onnx_value_kind_name(l->kind)
                        : ctx.input(i) ? "a tensor"
                                       : "omitted"));
  return *l;
}

Value* tensor_input(ImportContext& ctx, size_t i) {
  if (ctx.input(i) == nullptr)
    throw InvalidModel(
        ctx.where() + ": input " + std::to_string(i) + " must be a tensor, not " +
        (ctx.list_input(i) ? onnx_value_kind_name(ctx.list_input(i)->kind) : "omitted"));
  return ctx.input(i);
}

// A position in [-n, n - 1] (or [-n, n] where `end_ok`), as an index from the front.
size_t position(ImportContext& ctx, int64_t pos, size_t n, bool end_ok) {
  const int64_t size = static_cast<int64_t>(n);
  const int64_t hi = end_ok ? size : size - 1;
  if (pos < -size || pos > hi)
    throw ShapeError(ctx.where() + ": position " + std::to_string(pos) +
                     " is out of range for a sequence of " + std::to_string(n) + " tensors");
  return static_cast<size_t>(pos < 0 ? pos + size : pos);
}

void check_length(ImportContext& ctx, size_t n) {
  if (static_cast<int64_t>(n) > kMaxElements)
    ctx.unsupported("a sequence of " + std::to_string(n) + " tensors is over lumen's " +
                    std::to_string(kMaxElements) + " (each is a value of the built graph)");
}

std::vector<Value*> list_output(ImportContext& ctx, ListValue list) {
  check_length(ctx, list.elements.size());
  ctx.set_list_output(0, std::move(list));
  return {nullptr};
}

// A copy of `v` under this node's name, so that the node's output is a value of its own.
Value* copy_of(ImportContext& ctx, Value* v) {
  return ctx.emit1("Identity", {v});
}

std::vector<Value*> convert_sequence_construct(ImportContext& ctx) {
  ListValue seq;
  for (size_t i = 0; i < ctx.inputs().size(); ++i) {
    Value* v = tensor_input(ctx, i);
    if (i > 0 && v->type.dtype != seq.dtype)
      throw InvalidModel(ctx.where() + ": input " + std::to_string(i) + " is " +
                         dtype_name(v->type.dtype) + ", the others " + dtype_name(seq.dtype));
    seq.dtype = v->type.dtype;
    seq.elements.push_back(v);
  }
  if (seq.elements.empty()) throw InvalidModel(ctx.where() + ": no tensors to make a sequence of");
  return list_output(ctx, std::move(seq));
}

std::vector<Value*> convert_sequence_empty(ImportContext& ctx) {
  ListValue seq;
  if (auto dtype = ctx.take("dtype")) {
    auto d = dtype_from_onnx(dtype->as_int());
    if (!d) ctx.unsupported("data type " + onnx_dtype_name(dtype->as_int()) + " is not supported");
    seq.dtype = *d;
  }
  return list_output(ctx, std::move(seq));
}

std::vector<Value*> convert_sequence_insert(ImportContext& ctx) {
  ListValue seq = sequence_input(ctx, 0);
  Value* t = tensor_input(ctx, 1);
  if (t->type.dtype != seq.dtype)
    throw InvalidModel(ctx.where() + ": cannot insert a " + dtype_name(t->type.dtype) +
                       " tensor into a sequence of " + dtype_name(seq.dtype));
  size_t at = seq.elements.size();
  if (ctx.input(2) != nullptr || ctx.list_input(2) != nullptr)
    at = position(ctx, known_int(ctx, 2, "position"), seq.elements.size(), true);
  seq.elements.insert(seq.elements.begin() + static_cast<std::ptrdiff_t>(at), t);
  return list_output(ctx, std::move(seq));
}

std::vector<Value*> convert_sequence_erase(ImportContext& ctx) {
  ListValue seq = sequence_input(ctx, 0);
  int64_t pos = -1;
  if (ctx.input(1) != nullptr || ctx.list_input(1) != nullptr) pos = known_int(ctx, 1, "position");
  size_t at = position(ctx, pos, seq.elements.size(), false);
  seq.elements.erase(seq.elements.begin() + static_cast<std::ptrdiff_t>(at));
  return list_output(ctx, std::move(seq));
}

std::vector<Value*> convert_sequence_at(ImportContext& ctx) {
  const ListValue& seq = sequence_input(ctx, 0);
  size_t at = position(ctx, known_int(ctx, 1, "position"), seq.elements.size(), false);
  return {copy_of(ctx, seq.elements[at])};
}

std::vector<Value*> convert_sequence_length(ImportContext& ctx) {
  const ListValue& seq = sequence_input(ctx, 0);
  return {
      ctx.graph().add_constant(ctx.graph().unique_name(ctx.name() + "/length"),
                               Tensor::scalar<int64_t>(static_cast<int64_t>(seq.elements.size())))};
}

// The part lengths along the split axis of length `dim`: `split` as ONNX defines it (a scalar:
// chunks of that size, the last one shorter; a 1-D tensor: the lengths themselves).
std::vector<int64_t> split_lengths(ImportContext& ctx, int64_t dim) {
  std::vector<int64_t> lengths;
  Value* split = ctx.input(1);
  if (split == nullptr) return std::vector<int64_t>(static_cast<size_t>(dim), 1);
  if (!known(split)) throw ShapeError(ctx.where() + ": the split input " + kNeedsValue);
  const Tensor& t = *split->data;
  if (t.shape().rank() == 0) {
    const int64_t chunk = static_cast<int64_t>(t.item_as_double());
    if (chunk <= 0)
      throw ShapeError(ctx.where() + ": split " + std::to_string(chunk) + " is not positive");
    for (int64_t at = 0; at < dim; at += chunk) lengths.push_back(std::min(chunk, dim - at));
    return lengths;
  }
  if (t.shape().rank() != 1)
    throw InvalidModel(ctx.where() + ": split must be a scalar or 1-D, not " +
                       t.shape().to_string());
  int64_t sum = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    lengths.push_back(static_cast<int64_t>(t.item_as_double(i)));
    if (lengths.back() < 0) throw ShapeError(ctx.where() + ": split has a negative length");
    sum += lengths.back();
  }
  if (sum != dim)
    throw ShapeError(ctx.where() + ": split lengths add up to " + std::to_string(sum) +
                     ", the axis has " + std::to_string(dim));
  return lengths;
}

std::vector<Value*> convert_split_to_sequence(ImportContext& ctx) {
  Value* x = tensor_input(ctx, 0);
  const int rank = x->type.shape.rank();
  auto axis_attr = ctx.take("axis");
  auto keep_attr = ctx.take("keepdims");
  int64_t axis = axis_attr ? axis_attr->as_int() : 0;
  if (axis < -rank || axis >= rank)
    throw InvalidModel(ctx.where() + ": axis " + std::to_string(axis) + " is out of range for " +
                       x->type.to_string());
  if (axis < 0) axis += rank;
  // keepdims applies only without a split input: parts of length 1 then lose the axis.
  const bool squeeze = ctx.input(1) == nullptr && keep_attr && keep_attr->as_int() == 0;
  std::vector<int64_t> lengths = split_lengths(ctx, x->type.shape[static_cast<int>(axis)]);
  check_length(ctx, lengths.size());
  ListValue seq;
  seq.dtype = x->type.dtype;
  if (!lengths.empty()) {
    seq.elements = ctx.emit("Split", {x}, {{"axis", axis}, {"split", lengths}},
                            static_cast<int>(lengths.size()));
  }
  if (squeeze)
    for (Value*& part : seq.elements)
      part = ctx.emit1("Squeeze", {part}, {{"axes", std::vector<int64_t>{axis}}});
  return list_output(ctx, std::move(seq));
}

std::vector<Value*> convert_concat_from_sequence(ImportContext& ctx) {
  const ListValue& seq = sequence_input(ctx, 0);
  auto axis_attr = ctx.take("axis");
  auto new_axis_attr = ctx.take("new_axis");
  if (!axis_attr) throw InvalidModel(ctx.where() + ": attribute 'axis' is missing");
  const bool new_axis = new_axis_attr && new_axis_attr->as_int() != 0;
  if (seq.elements.empty())
    throw ShapeError(ctx.where() + ": the sequence is empty, so there is nothing to concatenate");
  int64_t axis = axis_attr->as_int();
  const int rank = seq.elements[0]->type.shape.rank() + (new_axis ? 1 : 0);
  if (axis < -rank || axis >= rank)
    throw InvalidModel(ctx.where() + ": axis " + std::to_string(axis) + " is out of range for " +
                       (new_axis ? "stacking " : "") + seq.elements[0]->type.to_string());
  if (axis < 0) axis += rank;
  std::vector<Value*> parts = seq.elements;
  if (new_axis)
    for (Value*& part : parts)
      part = ctx.emit1("Unsqueeze", {part}, {{"axes", std::vector<int64_t>{axis}}});
  if (parts.size() == 1) return {new_axis ? parts[0] : copy_of(ctx, parts[0])};
  return {ctx.emit1("Concat", parts, {{"axis", axis}})};
}

// SequenceMap: the body imported once per element of the first input; other sequence inputs
// give their element at the same position, tensors are passed whole.
std::vector<Value*> convert_sequence_map(ImportContext& ctx) {
  const size_t n = sequence_input(ctx, 0).elements.size();
  for (size_t i = 1; i < ctx.inputs().size(); ++i) {
    const ListValue* l = ctx.list_input(i);
    if (l == nullptr) {
      tensor_input(ctx, i);
    } else if (l->kind != OnnxValueKind::kSequence || l->elements.size() != n) {
      throw ShapeError(ctx.where() + ": input " + std::to_string(i) + " is a " +
                       onnx_value_kind_name(l->kind) +
                       (l->kind == OnnxValueKind::kSequence
                            ? " of " + std::to_string(l->elements.size()) + " tensors"
                            : "") +
                       ", the first input a sequence of " + std::to_string(n));
    }
  }
  std::vector<ListValue> outs(static_cast<size_t>(ctx.num_outputs()));
  // The element types of the body's outputs, for empty results.
  for (const auto& a : ctx.proto().attribute()) {
    if (a.name() != "body") continue;
    for (int k = 0; k < a.g().output_size() && k < ctx.num_outputs(); ++k) {
      const auto& type = a.g().output(k).type();
      auto d =
          type.has_tensor_type() ? dtype_from_onnx(type.tensor_type().elem_type()) : std::nullopt;
      if (d) outs[k].dtype = *d;
    }
  }
  for (size_t e = 0; e < n; ++e) {
    std::vector<ImportedValue> ins;
    for (size_t i = 0; i < ctx.inputs().size(); ++i) {
      const ListValue* l = ctx.list_input(i);
      ins.push_back({l ? l->elements[e] : ctx.input(i), {}});
    }
    std::vector<ImportedValue> got =
        ctx.inline_subgraph("body", ins, "element_" + std::to_string(e));
    if (got.size() < outs.size())
      throw InvalidModel(ctx.where() + ": the body gives fewer outputs than the node has");
    for (size_t k = 0; k < outs.size(); ++k) {
      if (got[k].tensor == nullptr)
        throw InvalidModel(ctx.where() + ": body output " + std::to_string(k) + " is a " +
                           onnx_value_kind_name(got[k].list.kind) + ", not a tensor");
      outs[k].dtype = got[k].tensor->type.dtype;
      outs[k].elements.push_back(got[k].tensor);
    }
  }
  for (size_t k = 0; k < outs.size(); ++k) ctx.set_list_output(static_cast<int>(k), outs[k]);
  return std::vector<Value*>(outs.size(), nullptr);
}

std::vector<Value*> convert_optional(ImportContext& ctx) {
  ListValue opt;
  if (const ListValue* l = ctx.list_input(0)) {
    if (l->kind != OnnxValueKind::kSequence)
      throw InvalidModel(ctx.where() + ": an optional cannot hold a " +
                         onnx_value_kind_name(l->kind));
    opt = *l;
    opt.kind = OnnxValueKind::kOptionalSequence;
  } else if (Value* v = ctx.input(0)) {
    opt = ListValue{OnnxValueKind::kOptionalTensor, true, {v}, v->type.dtype};
  } else {
    // Empty: its type attribute says what it would hold.
    const onnx::TypeProto* type = nullptr;
    for (const auto& a : ctx.proto().attribute())
      if (a.name() == "type" && a.has_tp()) type = &a.tp();
    if (type == nullptr)
      throw InvalidModel(ctx.where() + ": an Optional without input needs its 'type' attribute");
    const onnx::TypeProto* tensor = type;
    opt.kind = OnnxValueKind::kOptionalTensor;
    if (type->has_sequence_type()) {
      tensor = &type->sequence_type().elem_type();
      opt.kind = OnnxValueKind::kOptionalSequence;
    }
    if (!tensor->has_tensor_type())
      ctx.unsupported("lumen's optionals hold tensors or sequences of tensors");
    auto d = dtype_from_onnx(tensor->tensor_type().elem_type());
    if (!d)
      ctx.unsupported("data type " + onnx_dtype_name(tensor->tensor_type().elem_type()) +
                      " is not supported");
    opt.dtype = *d;
    opt.present = false;
  }
  return list_output(ctx, std::move(opt));
}

// Lenient on every opset, as opset 18 is: a tensor or a sequence counts as a present optional.
std::vector<Value*> convert_optional_has_element(ImportContext& ctx) {
  const ListValue* l = ctx.list_input(0);
  const bool has = l != nullptr ? l->present : ctx.input(0) != nullptr;
  return {ctx.graph().add_constant(ctx.graph().unique_name(ctx.name() + "/has"),
                                   Tensor::scalar<bool>(has))};
}

std::vector<Value*> convert_optional_get_element(ImportContext& ctx) {
  const ListValue* l = ctx.list_input(0);
  if (l == nullptr) return {copy_of(ctx, tensor_input(ctx, 0))};
  if (!l->present)
    throw InvalidArgument(ctx.where() + ": the optional is empty, so it has no element to get");
  if (l->kind == OnnxValueKind::kOptionalTensor) return {copy_of(ctx, l->elements.at(0))};
  ListValue seq = *l;
  seq.kind = OnnxValueKind::kSequence;
  return list_output(ctx, std::move(seq));
}

std::vector<Value*> convert_identity(ImportContext& ctx) {
  if (const ListValue* l = ctx.list_input(0)) return list_output(ctx, *l);
  return ctx.emit("Identity", ctx.inputs(), ctx.attrs(), ctx.num_outputs());
}

Value* scalar_constant(ImportContext& ctx, const std::string& what, Tensor t) {
  return ctx.graph().add_constant(ctx.graph().unique_name(ctx.name() + "/" + what), std::move(t));
}

}  // namespace

bool takes_lists(const std::string& op_type) {
  static const std::unordered_set<std::string> kOps = {"Identity",           "Loop",
                                                       "SequenceConstruct",  "SequenceEmpty",
                                                       "SequenceInsert",     "SequenceErase",
                                                       "SequenceAt",         "SequenceLength",
                                                       "SplitToSequence",    "SequenceMap",
                                                       "ConcatFromSequence", "Optional",
                                                       "OptionalHasElement", "OptionalGetElement"};
  return kOps.count(op_type) > 0;
}

std::vector<Value*> forward_outputs(ImportContext& ctx, const std::vector<ImportedValue>& outs) {
  if (static_cast<int>(outs.size()) < ctx.num_outputs())
    throw InvalidModel(ctx.where() + ": the subgraph gives fewer outputs than the node has");
  std::vector<Value*> result;
  for (int k = 0; k < ctx.num_outputs(); ++k) {
    result.push_back(outs[k].tensor);
    if (outs[k].tensor == nullptr) ctx.set_list_output(k, outs[k].list);
  }
  return result;
}

// Loop, unrolled: the body is imported once per iteration with the iteration number and the
// condition as constants and the carried values as they stand, until the trip count is reached
// or the body's condition (which must fold to a constant) turns false. Scan outputs are stacked.
std::vector<Value*> unroll_loop(ImportContext& ctx) {
  const bool has_trips = ctx.input(0) != nullptr;
  const int64_t trips = has_trips ? known_int(ctx, 0, "trip count") : -1;
  bool go = ctx.input(1) == nullptr || known_int(ctx, 1, "condition") != 0;
  std::vector<ImportedValue> carried;
  for (size_t k = 2; k < ctx.inputs().size(); ++k) {
    if (ctx.input(k) == nullptr && ctx.list_input(k) == nullptr)
      ctx.unsupported("loop-carried value " + std::to_string(k - 2) + " is omitted");
    carried.push_back({ctx.input(k), ctx.list_input(k) ? *ctx.list_input(k) : ListValue{}});
  }
  std::vector<std::vector<Value*>> scans;
  int64_t i = 0;
  for (; go && (!has_trips || i < trips); ++i) {
    if (i >= kMaxUnrolled)
      ctx.unsupported("the Loop carries a sequence or optional, so lumen unrolls it when the " +
                      std::string("graph is built, and it runs over ") +
                      std::to_string(kMaxUnrolled) + " iterations");
    std::vector<ImportedValue> ins{
        {scalar_constant(ctx, "iteration", Tensor::scalar<int64_t>(i)), {}},
        {scalar_constant(ctx, "condition", Tensor::scalar<bool>(true)), {}}};
    ins.insert(ins.end(), carried.begin(), carried.end());
    std::vector<ImportedValue> outs = ctx.inline_subgraph("body", ins, "iter_" + std::to_string(i));
    if (outs.size() < 1 + carried.size())
      throw InvalidModel(ctx.where() + ": the body gives fewer outputs than it carries values");
    if (!known(outs[0].tensor))
      ctx.unsupported(
          "the Loop carries a sequence or optional, so lumen unrolls it when the "
          "graph is built, and its condition after iteration " +
          std::to_string(i) + " is known only at run time");
    go = outs[0].tensor->data->item_as_double() != 0.0;
    for (size_t k = 0; k < carried.size(); ++k) carried[k] = outs[1 + k];
    scans.resize(outs.size() - 1 - carried.size());
    for (size_t k = 0; k < scans.size(); ++k) {
      Value* v = outs[1 + carried.size() + k].tensor;
      if (v == nullptr) throw InvalidModel(ctx.where() + ": a scan output must be a tensor");
      scans[k].push_back(v);
    }
  }
  std::vector<ImportedValue> results = carried;
  if (static_cast<int>(carried.size()) < ctx.num_outputs()) {
    if (i == 0)
      ctx.unsupported("the unrolled Loop runs no iteration, so its scan outputs have no shape");
    for (const std::vector<Value*>& parts : scans) {
      std::vector<Value*> stacked;
      for (Value* v : parts)
        stacked.push_back(ctx.emit1("Unsqueeze", {v}, {{"axes", std::vector<int64_t>{0}}}));
      Value* all =
          stacked.size() == 1 ? stacked[0] : ctx.emit1("Concat", stacked, {{"axis", int64_t{0}}});
      results.push_back({all, {}});
    }
  }
  return forward_outputs(ctx, results);
}

std::vector<ImportedValue> ImportContext::inline_subgraph(const std::string& attr,
                                                          const std::vector<ImportedValue>& inputs,
                                                          const std::string& tag) {
  const onnx::GraphProto* proto = nullptr;
  for (const auto& a : node_.attribute())
    if (a.name() == attr && (a.type() == onnx::AttributeProto::GRAPH || a.has_g())) proto = &a.g();
  if (proto == nullptr) throw InvalidModel(where() + ": subgraph '" + attr + "' is missing");
  try {
    return scope_->inline_graph(*proto, inputs, name_ + "/" + tag + "/");
  } catch (const Error& e) {
    // Prefix the error with this node, so a nested failure reads from the outside in.
    rethrow_as(e, where() + ": subgraph '" + attr + "' (" + tag + "): " + error_detail(e));
  }
}

LUMEN_ONNX_CONVERTER(SequenceConstruct, "SequenceConstruct", 11, 1000, &convert_sequence_construct);
LUMEN_ONNX_CONVERTER(SequenceEmpty, "SequenceEmpty", 11, 1000, &convert_sequence_empty);
LUMEN_ONNX_CONVERTER(SequenceInsert, "SequenceInsert", 11, 1000, &convert_sequence_insert);
LUMEN_ONNX_CONVERTER(SequenceErase, "SequenceErase", 11, 1000, &convert_sequence_erase);
LUMEN_ONNX_CONVERTER(SequenceAt, "SequenceAt", 11, 1000, &convert_sequence_at);
LUMEN_ONNX_CONVERTER(SequenceLength, "SequenceLength", 11, 1000, &convert_sequence_length);
LUMEN_ONNX_CONVERTER(SplitToSequence, "SplitToSequence", 11, 1000, &convert_split_to_sequence);
LUMEN_ONNX_CONVERTER(ConcatFromSequence, "ConcatFromSequence", 11, 1000,
                     &convert_concat_from_sequence);
LUMEN_ONNX_CONVERTER(SequenceMap, "SequenceMap", 17, 1000, &convert_sequence_map);
LUMEN_ONNX_CONVERTER(Optional, "Optional", 15, 1000, &convert_optional);
LUMEN_ONNX_CONVERTER(OptionalHasElement, "OptionalHasElement", 15, 1000,
                     &convert_optional_has_element);
LUMEN_ONNX_CONVERTER(OptionalGetElement, "OptionalGetElement", 15, 1000,
                     &convert_optional_get_element);
LUMEN_ONNX_CONVERTER(Identity, "Identity", 1, 1000, &convert_identity);

}  // namespace lumen::onnx_import
