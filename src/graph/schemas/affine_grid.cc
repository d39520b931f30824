// Schema of AffineGrid (ONNX opset 20): the sampling grid (N, H, W, 2) or (N, D, H, W, 3) that a
// batch of affine matrices theta (N, 2, 3) or (N, 3, 4) makes of an evenly spaced grid over
// [-1, 1]; `size` (N, C, H, W) or (N, C, D, H, W) is a build-time input.
#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_affine_grid(InferContext& ctx) {
  const Shape& theta = ctx.input_shape(0);
  const DType dt = ctx.input_dtype(0);
  if (!is_floating(dt))
    ctx.fail_shape(std::string("theta must be floating, got ") + dtype_name(dt));
  if (ctx.input_dtype(1) != DType::kInt64)
    ctx.fail_shape(std::string("size must be int64, got ") + dtype_name(ctx.input_dtype(1)));
  if (ctx.input_shape(1).rank() != 1)
    ctx.fail_shape("size must be a 1-D tensor, got " + ctx.input_shape(1).to_string());
  const int64_t align = ctx.attr_int("align_corners", 0);
  if (align != 0 && align != 1) ctx.fail_model("align_corners must be 0 or 1");
  const std::vector<int64_t> size = ctx.input_ints(1, "size");
  if (size.size() != 4 && size.size() != 5)
    ctx.fail_shape("size must hold 4 values (N, C, H, W) or 5 (N, C, D, H, W), got " +
                   std::to_string(size.size()));
  const int64_t dims = static_cast<int64_t>(size.size()) - 2;
  if (theta.rank() != 3 || theta[1] != dims || theta[2] != dims + 1)
    ctx.fail_shape("theta must be (N, " + std::to_string(dims) + ", " + std::to_string(dims + 1) +
                   ") for a size of " + std::to_string(size.size()) + " values, got " +
                   theta.to_string());
  if (size[0] != theta[0])
    ctx.fail_shape("size's batch " + std::to_string(size[0]) + " differs from theta's " +
                   theta.to_string());
  std::vector<int64_t> out = {size[0]};
  for (size_t i = 2; i < size.size(); ++i) {
    if (size[i] < 1)
      ctx.fail_shape("size's spatial dimensions must be positive, got " + std::to_string(size[i]));
    out.push_back(size[i]);
  }
  out.push_back(dims);
  ctx.set_output(0, dt, Shape(out));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(AffineGrid, {.min_inputs = 2,
                                   .max_inputs = 2,
                                   .attrs = {{"align_corners", AttrType::kInt}},
                                   .infer = &infer_affine_grid});

}  // namespace lumen
