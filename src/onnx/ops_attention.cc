// ONNX Attention: one lumen op for opsets 23, 24 and 25 (graph/schemas/attention.h), which differ
// only in what they may carry. This converter refuses what a node's opset does not define
// (nonpad_kv_seqlen before 24, the sliding window before 25) and passes the rest through.
#include <string>

#include "lumen/error.h"
#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

std::vector<Value*> convert_attention(ImportContext& ctx) {
  if (ctx.opset() < 23)
    throw InvalidModel(ctx.where() + ": Attention is an op of opset 23 and later");
  if (ctx.opset() < 24 && ctx.input(6) != nullptr)
    throw InvalidModel(ctx.where() + ": nonpad_kv_seqlen (input 6) came with opset 24");
  if (ctx.opset() < 25)
    for (const char* name : {"left_window_size", "right_window_size"})
      if (ctx.attrs().count(name))
        throw InvalidModel(ctx.where() + ": attribute " + name + " came with opset 25");
  return ctx.emit("Attention", ctx.inputs(), ctx.attrs(), ctx.num_outputs());
}

}  // namespace

LUMEN_ONNX_CONVERTER(Attention, "Attention", 1, 1000, &convert_attention);

}  // namespace lumen::onnx_import
