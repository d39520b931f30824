// Converter of GroupNormalization before opset 21: there scale and bias hold one value per group
// ([num_groups]); lumen's op follows opset 21 (one per channel), so each group's value is repeated
// over its C / num_groups channels (Reshape, Expand, Reshape: folded away when the parameters are
// constants, as exported models have them).
#include <string>
#include <vector>

#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

std::vector<Value*> convert_group_norm_v18(ImportContext& ctx) {
  for (int i = 0; i < 3; ++i)
    if (ctx.input(i) == nullptr)
      throw InvalidModel(ctx.where() + ": input " + std::to_string(i) + " is missing");
  const auto groups_attr = ctx.attrs().find("num_groups");
  if (groups_attr == ctx.attrs().end())
    throw InvalidModel(ctx.where() + ": required attribute 'num_groups' is missing");
  if (groups_attr->second.type() != AttrType::kInt)
    throw InvalidModel(ctx.where() + ": attribute 'num_groups' must be an int");
  const int64_t groups = groups_attr->second.as_int();
  const Shape& x = ctx.input(0)->type.shape;
  // The op's schema reports a bad X or num_groups with the opset 21 wording; only the parameter
  // shapes differ here.
  if (x.rank() < 2 || groups < 1 || x[1] % groups != 0)
    return ctx.emit("GroupNormalization", ctx.inputs(), ctx.attrs());
  const int64_t channels = x[1];
  Graph& g = ctx.graph();
  std::vector<Value*> inputs = {ctx.input(0)};
  static const char* const kNames[] = {"", "scale", "bias"};
  for (int i = 1; i < 3; ++i) {
    Value* p = ctx.input(i);
    const Shape& s = p->type.shape;
    if (s.rank() != 1 || s[0] != groups)
      throw ShapeError(ctx.where() + ": " + kNames[i] + " must have shape [" +
                       std::to_string(groups) + "] (one value per group before opset 21), got " +
                       s.to_string());
    if (groups != channels) {
      const std::string base = ctx.name() + "/" + kNames[i];
      Value* column = g.add_op("Reshape", {p, ctx.constant_ints({groups, 1})}, Attributes{},
                               g.unique_name(base + "_column"));
      Value* spread = g.add_op("Expand", {column, ctx.constant_ints({groups, channels / groups})},
                               Attributes{}, g.unique_name(base + "_spread"));
      p = g.add_op("Reshape", {spread, ctx.constant_ints({channels})}, Attributes{},
                   g.unique_name(base + "_per_channel"));
    }
    inputs.push_back(p);
  }
  return ctx.emit("GroupNormalization", inputs, ctx.attrs());
}

}  // namespace

LUMEN_ONNX_CONVERTER(GroupNormalizationV18, "GroupNormalization", 18, 20, &convert_group_norm_v18);

}  // namespace lumen::onnx_import
