// Converters of Cast and CastLike at opsets 19-23, where infinity cast to float8e4m3fnuz or
// float8e5m2fnuz is NaN even when saturating (opset 24 changed it to the largest value): the
// node keeps its attributes and gains lumen's `fnuz_inf_to_nan`.
#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

std::vector<Value*> convert_cast_v19(ImportContext& ctx) {
  Attributes attrs = ctx.attrs();
  attrs["fnuz_inf_to_nan"] = int64_t{1};
  return ctx.emit(ctx.proto().op_type(), ctx.inputs(), attrs, ctx.num_outputs());
}

}  // namespace

LUMEN_ONNX_CONVERTER(CastV19, "Cast", 19, 23, &convert_cast_v19);
LUMEN_ONNX_CONVERTER(CastLikeV19, "CastLike", 19, 23, &convert_cast_v19);

}  // namespace lumen::onnx_import
