// Schema of FusedMatMul, made by the optimizer (fuse-matmul and fold-transpose passes), never by
// importers: Y = activation(op(A) x op(B) + bias), numpy.matmul's batch broadcasting, where op()
// swaps the last two dimensions of an operand when its trans_a / trans_b attribute is 1 and bias
// is an optional 1-D [N] added to every row. An optional fourth input Z (the fuse-residual pass,
// where every backend of the graph adds it), shaped like Y, is added before the activation:
// Y = activation(op(A) x op(B) + bias + Z). Optional inputs 4 and 5 (the fuse-matmul-norm pass,
// where every backend of the graph has the norm epilogue), a scale and a bias [N], then normalize
// each row of Y as LayerNormalization over the last axis with epsilon `norm_epsilon` does:
// Y = LayerNorm(activation(op(A) x op(B) + bias + Z)) * scale + norm_bias.
#include <algorithm>
#include <string>
#include <vector>

#include "graph/schema.h"

namespace lumen {
namespace {

// The activations a FusedMatMul may apply (ONNX op names; "Swish" is SiLU, "" none).
constexpr const char* kActivations[] = {"",     "Relu",      "LeakyRelu", "Clip",    "Sigmoid",
                                        "Tanh", "HardSwish", "Swish",     "GeluErf", "GeluTanh"};

// Operand i with its last two dimensions swapped when `transposed`.
Shape operand_shape(const InferContext& ctx, int i, bool transposed) {
  const Shape& s = ctx.input_shape(i);
  if (s.rank() < 2)
    ctx.fail_shape("input " + std::to_string(i) + " must have rank 2 or more, got " +
                   s.to_string());
  std::vector<int64_t> dims = s.dims();
  if (transposed) std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
  return Shape(dims);
}

void infer_fused_matmul(InferContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (t != DType::kFloat32) ctx.fail_shape(std::string("takes float32, got ") + dtype_name(t));
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != t)
      ctx.fail_shape("input " + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
                     ", input 0 is float32");
  for (const char* flag : {"trans_a", "trans_b"}) {
    int64_t v = ctx.attr_int(flag, 0);
    if (v != 0 && v != 1) ctx.fail_model(std::string(flag) + " must be 0 or 1");
  }
  std::string act = ctx.attr_string("activation", "");
  if (std::find_if(std::begin(kActivations), std::end(kActivations),
                   [&](const char* a) { return act == a; }) == std::end(kActivations))
    ctx.fail_model("activation '" + act + "' cannot be fused into a MatMul");
  Shape a = operand_shape(ctx, 0, ctx.attr_int("trans_a", 0) == 1);
  Shape b = operand_shape(ctx, 1, ctx.attr_int("trans_b", 0) == 1);
  if (a[-1] != b[-2])
    ctx.fail_shape("inner dimensions differ: op(A) is " + a.to_string() + ", op(B) is " +
                   b.to_string());
  Shape batch;
  try {
    batch = broadcast_shapes(Shape(std::vector<int64_t>(a.dims().begin(), a.dims().end() - 2)),
                             Shape(std::vector<int64_t>(b.dims().begin(), b.dims().end() - 2)));
  } catch (const ShapeError&) {
    ctx.fail_shape("batch dimensions do not broadcast: " + a.to_string() + " x " + b.to_string());
  }
  if (ctx.has_input(2)) {
    const Shape& bias = ctx.input_shape(2);
    if (bias.rank() != 1 || bias[0] != b[-1])
      ctx.fail_shape("bias must be [" + std::to_string(b[-1]) + "], got " + bias.to_string());
  }
  std::vector<int64_t> out = batch.dims();
  out.push_back(a[-2]);
  out.push_back(b[-1]);
  if (ctx.num_inputs() > 3 && ctx.has_input(3) && ctx.input_shape(3) != Shape(out))
    ctx.fail_shape("the residual input Z must be " + Shape(out).to_string() + " like Y, got " +
                   ctx.input_shape(3).to_string());
  const bool norm = ctx.num_inputs() > 4 && ctx.has_input(4);
  if (ctx.num_inputs() > 5 && ctx.has_input(5) && !norm)
    ctx.fail_model("the norm bias (input 5) needs the norm scale (input 4)");
  for (int i = 4; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && (ctx.input_shape(i).rank() != 1 || ctx.input_shape(i)[0] != b[-1]))
      ctx.fail_shape("norm " + std::string(i == 4 ? "scale" : "bias") + " must be [" +
                     std::to_string(b[-1]) + "], got " + ctx.input_shape(i).to_string());
  if (norm && !(ctx.attr_float("norm_epsilon", 1e-5f) >= 0.f))
    ctx.fail_model("norm_epsilon must be 0 or more");
  ctx.set_output(0, t, Shape(out));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(FusedMatMul, {.min_inputs = 2,
                                    .max_inputs = 6,
                                    .attrs = {{"trans_a", AttrType::kInt},
                                              {"trans_b", AttrType::kInt},
                                              {"activation", AttrType::kString},
                                              {"activation_alpha", AttrType::kFloat},
                                              {"activation_beta", AttrType::kFloat},
                                              {"norm_epsilon", AttrType::kFloat}},
                                    .infer = &infer_fused_matmul});

}  // namespace lumen
