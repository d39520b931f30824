// Schema of GroupedMatMul, made by the optimizer (group-matmuls pass), never by importers: the
// products of one A [..., M, K] (float32, rank 2 or more) by G >= 2 weights B_i [K, N_i] (float32,
// 2-D, inputs 1..G), Y_i = A x B_i [..., M, N_i] (output i - 1). What MatMul(A, B_i) gives for each
// i, computed together (one launch for a decoding step's query, key and value projections). With
// the attribute rms_norm_epsilon, A is first RMS-normalized over its last dim and scaled by gamma
// [K] (input G + 1): Y_i = RMSNormalization(A, gamma, epsilon) x B_i, the normalization a
// prologue of the products.
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_grouped_matmul(InferContext& ctx) {
  const int groups = ctx.num_outputs();
  const bool norm = ctx.has_attr("rms_norm_epsilon");
  if (ctx.num_inputs() != groups + (norm ? 2 : 1))
    ctx.fail_model("has " + std::to_string(groups) + " outputs and " +
                   std::to_string(ctx.num_inputs()) + " inputs; it takes A, a weight per output" +
                   (norm ? " and gamma" : ""));
  const Shape& a = ctx.input_shape(0);
  if (ctx.input_dtype(0) != DType::kFloat32 || a.rank() < 2)
    ctx.fail_shape("input 0 must be float32 of rank 2 or more, got " +
                   std::string(dtype_name(ctx.input_dtype(0))) + a.to_string());
  for (int i = 1; i <= groups; ++i) {
    const Shape& b = ctx.input_shape(i);
    if (ctx.input_dtype(i) != DType::kFloat32 || b.rank() != 2 || b[0] != a[-1])
      ctx.fail_shape("weight " + std::to_string(i) + " must be float32 [" + std::to_string(a[-1]) +
                     ", N], got " + std::string(dtype_name(ctx.input_dtype(i))) + b.to_string());
    std::vector<int64_t> out = a.dims();
    out.back() = b[1];
    ctx.set_output(i - 1, DType::kFloat32, Shape(out));
  }
  if (norm) {
    const Shape& gamma = ctx.input_shape(groups + 1);
    if (ctx.input_dtype(groups + 1) != DType::kFloat32 || gamma != Shape{a[-1]})
      ctx.fail_shape("gamma must be float32 [" + std::to_string(a[-1]) + "], got " +
                     gamma.to_string());
    if (!(ctx.attr_float("rms_norm_epsilon", 0.0f) >= 0.0f))
      ctx.fail_model("rms_norm_epsilon must not be negative");
  }
}

}  // namespace

LUMEN_REGISTER_SCHEMA(GroupedMatMul, {.min_inputs = 3,
                                      .max_inputs = kVariadic,
                                      .min_outputs = 2,
                                      .max_outputs = kVariadic,
                                      .attrs = {{"rms_norm_epsilon", AttrType::kFloat}},
                                      .infer = &infer_grouped_matmul});

}  // namespace lumen
