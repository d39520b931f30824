// Schema of CenterCropPad (ONNX opset 18): each listed axis cropped or zero-padded to the size
// given by the build-time `shape` input, keeping the content centred.
#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_center_crop_pad(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const DType st = ctx.input_dtype(1);
  if (st != DType::kInt32 && st != DType::kInt64)
    ctx.fail_shape(std::string("shape must be int32 or int64, got ") + dtype_name(st));
  if (ctx.input_shape(1).rank() != 1)
    ctx.fail_shape("shape must be a 1-D tensor, got " + ctx.input_shape(1).to_string());
  std::vector<int64_t> axes;
  if (ctx.has_attr("axes")) {
    std::vector<bool> seen(static_cast<size_t>(x.rank()), false);
    for (int64_t a : ctx.attr_ints("axes")) {
      if (a < -x.rank() || a >= x.rank())
        ctx.fail_model("axis " + std::to_string(a) + " is out of range for input " + x.to_string());
      const int k = normalize_axis(a, x.rank());
      if (seen[k]) ctx.fail_model("axes name dimension " + std::to_string(k) + " twice");
      seen[k] = true;
      axes.push_back(k);
    }
  } else {
    for (int d = 0; d < x.rank(); ++d) axes.push_back(d);
  }
  const std::vector<int64_t> sizes = ctx.input_ints(1, "shape");
  if (sizes.size() != axes.size())
    ctx.fail_shape("shape has " + std::to_string(sizes.size()) + " values for " +
                   std::to_string(axes.size()) + " axes of input " + x.to_string());
  Shape out = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (sizes[i] < 0)
      ctx.fail_shape("shape[" + std::to_string(i) + "] = " + std::to_string(sizes[i]) +
                     " is negative");
    out[static_cast<int>(axes[i])] = sizes[i];
  }
  ctx.set_output(0, ctx.input_dtype(0), out);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(CenterCropPad, {.min_inputs = 2,
                                      .max_inputs = 2,
                                      .attrs = {{"axes", AttrType::kInts}},
                                      .infer = &infer_center_crop_pad});

}  // namespace lumen
