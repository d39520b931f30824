// Converters for ops whose newer versions (opsets 19-28) changed form while their meaning maps onto
// the lumen op of the older version: DFT's axis became an input (20), Range gained stash_type (27).
#include <string>

#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

// DFT from opset 20: the axis is an optional input (default -2, the last signal axis) instead of
// an attribute (default 1). Lumen's DFT keeps it as an attribute, so the input must be a constant
// (an input value that OnnxSession fixes per run counts).
std::vector<Value*> convert_dft_v20(ImportContext& ctx) {
  Value* x = ctx.input(0);
  if (x == nullptr) ctx.unsupported("input 0 is missing");
  int64_t axis = -2;
  if (Value* a = ctx.input(2)) {
    if (!a->data || a->user_weight)
      throw ShapeError(ctx.where() + ": the axis input must be known when the graph is built");
    if (a->data->numel() != 1) throw InvalidModel(ctx.where() + ": axis must be a scalar");
    axis = static_cast<int64_t>(a->data->item_as_double());
  }
  const int64_t rank = x->type.shape.rank();
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1)
    throw InvalidModel(ctx.where() + ": axis " + std::to_string(axis) +
                       " is out of range for an input of rank " + std::to_string(rank) +
                       " (the last dimension holds the real and imaginary parts)");
  Attributes attrs = ctx.attrs();
  attrs["axis"] = axis;
  std::vector<Value*> inputs = {x};
  if (Value* length = ctx.input(1)) inputs.push_back(length);
  return {ctx.emit1("DFT", inputs, attrs)};
}

// Range from opset 27: stash_type picks the intermediate type for float16/bfloat16 bounds; lumen's
// Range computes every float type's elements as start + i * delta in float32 or wider, which is
// what stash_type's default (float32) asks for.
std::vector<Value*> convert_range_v27(ImportContext& ctx) {
  if (auto stash = ctx.take("stash_type"); stash && stash->as_int() != 1)
    ctx.unsupported("stash_type " + std::to_string(stash->as_int()) +
                    " (only 1, float32, is supported)");
  return {ctx.emit1("Range", ctx.inputs(), ctx.attrs())};
}

}  // namespace

LUMEN_ONNX_CONVERTER(DftV20, "DFT", 20, 1000, &convert_dft_v20);
LUMEN_ONNX_CONVERTER(RangeV27, "Range", 27, 1000, &convert_range_v27);

}  // namespace lumen::onnx_import
