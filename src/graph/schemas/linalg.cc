// Schemas of the dense linear-algebra ops: MatMul (numpy.matmul) and Gemm.
#include <algorithm>
#include <string>
#include <vector>

#include "graph/schema.h"
#include "graph/schemas/linalg.h"

namespace lumen {

Shape matmul_shape(const InferContext& ctx, int a_index, int b_index) {
  const Shape& a = ctx.input_shape(a_index);
  const Shape& b = ctx.input_shape(b_index);
  if (a.rank() == 0 || b.rank() == 0)
    ctx.fail_shape("operands must have rank 1 or more, got " + a.to_string() + " and " +
                   b.to_string());
  int64_t ka = a[-1];
  int64_t kb = b.rank() == 1 ? b[0] : b[-2];
  if (ka != kb) ctx.fail_shape("inner dimensions differ: " + a.to_string() + " x " + b.to_string());
  std::vector<int64_t> a_batch(a.dims().begin(), a.dims().end() - std::min(a.rank(), 2));
  std::vector<int64_t> b_batch(b.dims().begin(), b.dims().end() - std::min(b.rank(), 2));
  Shape batch;
  try {
    batch = broadcast_shapes(Shape(a_batch), Shape(b_batch));
  } catch (const ShapeError&) {
    ctx.fail_shape("batch dimensions do not broadcast: " + a.to_string() + " x " + b.to_string());
  }
  std::vector<int64_t> out = batch.dims();
  if (a.rank() >= 2) out.push_back(a[-2]);
  if (b.rank() >= 2) out.push_back(b[-1]);
  return Shape(out);
}

namespace {

// The element types ONNX defines MatMul and Gemm for (that lumen has). The schema accepts all of
// them; a backend that cannot run one says so at compile time (UnsupportedOp).
bool is_matmul_dtype(DType t) {
  switch (t) {
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kFloat64:
    case DType::kInt32:
    case DType::kInt64:
      return true;
    default:
      return false;
  }
}

// All present inputs share input 0's dtype, and it is one MatMul/Gemm takes.
DType check_dtypes(const InferContext& ctx) {
  DType t = ctx.input_dtype(0);
  if (!is_matmul_dtype(t))
    ctx.fail_shape(std::string("does not take ") + dtype_name(t) + " inputs");
  for (int i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != t)
      ctx.fail_shape("input " + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
                     ", input 0 is " + dtype_name(t));
  return t;
}

// numpy.matmul: see linalg.h.
void infer_matmul(InferContext& ctx) {
  DType t = check_dtypes(ctx);
  ctx.set_output(0, t, matmul_shape(ctx, 0, 1));
}

// Y = alpha * op(A) * op(B) + beta * C with A, B 2-D and C unidirectionally broadcastable to
// [M, N]. transA/transB follow ONNX Runtime: any non-zero value transposes.
void infer_gemm(InferContext& ctx) {
  DType t = check_dtypes(ctx);
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (a.rank() != 2 || b.rank() != 2)
    ctx.fail_shape("A and B must be 2-D, got " + a.to_string() + " and " + b.to_string());
  bool trans_a = ctx.attr_int("transA", 0) != 0;
  bool trans_b = ctx.attr_int("transB", 0) != 0;
  int64_t m = trans_a ? a[1] : a[0];
  int64_t k = trans_a ? a[0] : a[1];
  int64_t kb = trans_b ? b[1] : b[0];
  int64_t n = trans_b ? b[0] : b[1];
  if (k != kb)
    ctx.fail_shape("inner dimensions differ: op(A) is [" + std::to_string(m) + ", " +
                   std::to_string(k) + "], op(B) is [" + std::to_string(kb) + ", " +
                   std::to_string(n) + "]");
  if (ctx.has_input(2)) {
    const Shape& c = ctx.input_shape(2);
    bool ok = c.rank() <= 2;
    const int64_t target[2] = {m, n};
    for (int i = 0; ok && i < c.rank(); ++i) {
      int64_t d = c.dims()[i];
      int64_t want = target[2 - c.rank() + i];
      ok = d == want || d == 1;
    }
    if (!ok)
      ctx.fail_shape("C " + c.to_string() + " does not broadcast to [" + std::to_string(m) + ", " +
                     std::to_string(n) + "]");
  }
  ctx.set_output(0, t, Shape{m, n});
}

}  // namespace

LUMEN_REGISTER_SCHEMA(MatMul,
                      {.min_inputs = 2, .max_inputs = 2, .attrs = {}, .infer = &infer_matmul});
LUMEN_REGISTER_SCHEMA(Gemm, {.min_inputs = 2,
                             .max_inputs = 3,
                             .attrs = {{"alpha", AttrType::kFloat},
                                       {"beta", AttrType::kFloat},
                                       {"transA", AttrType::kInt},
                                       {"transB", AttrType::kInt}},
                             .infer = &infer_gemm});

}  // namespace lumen
