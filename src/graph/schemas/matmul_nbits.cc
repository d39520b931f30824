// Schema of MatMulNBits (com.microsoft; also made by the fuse-block-dequant pass): the weight
// layout is in graph/matmul_nbits.h. Lumen runs bits 4 and 8; A, scales, bias and Y float32,
// float16 or bfloat16 (one type); uint8 or float zero points. accuracy_level is accepted and
// ignored: A is never quantized, the product is computed in float32. Lumen's epilogue (a residual
// input and an activation, graph/matmul_nbits.h) is checked here too.
#include <string>

#include "graph/matmul_nbits.h"
#include "graph/schema.h"

namespace lumen {
namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

// The layout of the node's weight from its attributes; fails on values the op does not define
// or lumen does not run.
NBitsLayout read_layout(const InferContext& ctx) {
  NBitsLayout l;
  l.k = ctx.attr_int("K");
  l.n = ctx.attr_int("N");
  const int64_t bits = ctx.attr_int("bits", 4);
  l.block_size = ctx.attr_int("block_size");
  if (l.k < 1 || l.n < 1)
    ctx.fail_model("K and N must be positive, got K=" + str(l.k) + " N=" + str(l.n));
  if (bits < 2 || bits > 8) ctx.fail_model("bits must be 2 to 8, got " + str(bits));
  if (bits != 4 && bits != 8) ctx.fail_unsupported("lumen runs bits 4 and 8, not " + str(bits));
  l.bits = static_cast<int>(bits);
  if (l.block_size < 16 || (l.block_size & (l.block_size - 1)) != 0)
    ctx.fail_model("block_size must be a power of two of at least 16, got " + str(l.block_size));
  if (ctx.attr_int("weight_prepacked", 0) != 0)
    ctx.fail_unsupported("weight_prepacked B (a CUDA EP layout) is not supported");
  return l;
}

bool is_real(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

// Input i must have A's type (the op's T1).
void require_type_of_a(const InferContext& ctx, int i, const char* what) {
  if (ctx.input_dtype(i) != ctx.input_dtype(kNBitsA))
    ctx.fail_shape(std::string(what) + " is " + dtype_name(ctx.input_dtype(i)) + " but A is " +
                   dtype_name(ctx.input_dtype(kNBitsA)));
}

// Whether shape s holds n_rows x n_cols values as [n_rows * n_cols] or [n_rows, n_cols].
bool is_table(const Shape& s, int64_t n_rows, int64_t n_cols) {
  if (s.rank() == 1) return s[0] == n_rows * n_cols;
  return s.rank() == 2 && s[0] == n_rows && s[1] == n_cols;
}

void infer_matmul_nbits(InferContext& ctx) {
  const NBitsLayout l = read_layout(ctx);
  const int64_t blocks = l.n_blocks();
  const DType t = ctx.input_dtype(kNBitsA);
  if (!is_real(t))
    ctx.fail_shape(std::string("A must be float32, float16 or bfloat16, not ") + dtype_name(t));
  const Shape& a = ctx.input_shape(kNBitsA);
  if (a.rank() < 1 || a[-1] != l.k)
    ctx.fail_shape("A " + a.to_string() + " must end in K=" + str(l.k));
  if (ctx.input_dtype(kNBitsB) != DType::kUInt8)
    ctx.fail_shape(std::string("B must be uint8, not ") + dtype_name(ctx.input_dtype(kNBitsB)));
  const Shape& b = ctx.input_shape(kNBitsB);
  if (b != Shape{l.n, blocks, l.blob_bytes()})
    ctx.fail_shape("B " + b.to_string() +
                   " must be [N, ceil(K / block_size), block_size * bits / 8] = " +
                   Shape{l.n, blocks, l.blob_bytes()}.to_string());
  require_type_of_a(ctx, kNBitsScales, "scales");
  if (!is_table(ctx.input_shape(kNBitsScales), l.n, blocks))
    ctx.fail_shape("scales " + ctx.input_shape(kNBitsScales).to_string() + " must hold N x " +
                   str(blocks) + " blocks: [" + str(l.n * blocks) + "] or [" + str(l.n) + ", " +
                   str(blocks) + "]");
  if (ctx.has_input(kNBitsZeroPoints)) {
    const DType zt = ctx.input_dtype(kNBitsZeroPoints);
    const Shape& z = ctx.input_shape(kNBitsZeroPoints);
    if (zt == DType::kUInt8) {
      if (!is_table(z, l.n, l.zero_point_bytes()))
        ctx.fail_shape("packed zero_points " + z.to_string() + " must be [" + str(l.n) + ", " +
                       str(l.zero_point_bytes()) + "]");
    } else if (is_real(zt)) {
      if (!is_table(z, l.n, blocks))
        ctx.fail_shape("float zero_points " + z.to_string() + " must hold N x " + str(blocks) +
                       " blocks");
    } else {
      ctx.fail_shape(std::string("zero_points must be uint8 or a float type, not ") +
                     dtype_name(zt));
    }
  }
  if (ctx.has_input(kNBitsGroupIndex)) ctx.fail_unsupported("g_idx (deprecated) is not supported");
  if (ctx.has_input(kNBitsBias)) {
    require_type_of_a(ctx, kNBitsBias, "bias");
    if (ctx.input_shape(kNBitsBias) != Shape{l.n})
      ctx.fail_shape("bias " + ctx.input_shape(kNBitsBias).to_string() + " must be [" + str(l.n) +
                     "]");
  }
  std::vector<int64_t> out(a.dims().begin(), a.dims().end());
  out.back() = l.n;
  if (ctx.has_input(kNBitsResidual)) {
    require_type_of_a(ctx, kNBitsResidual, "residual");
    if (ctx.input_shape(kNBitsResidual) != Shape(out))
      ctx.fail_shape("residual " + ctx.input_shape(kNBitsResidual).to_string() + " must be Y's " +
                     Shape(out).to_string());
  }
  ctx.set_output(0, t, Shape(out));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(MatMulNBits, {.min_inputs = 3,
                                    .max_inputs = 7,
                                    .attrs = {{"K", AttrType::kInt, true},
                                              {"N", AttrType::kInt, true},
                                              {"bits", AttrType::kInt},
                                              {"block_size", AttrType::kInt, true},
                                              {"accuracy_level", AttrType::kInt},
                                              {"weight_prepacked", AttrType::kInt},
                                              {"activation", AttrType::kString},
                                              {"activation_alpha", AttrType::kFloat},
                                              {"activation_beta", AttrType::kFloat}},
                                    .infer = &infer_matmul_nbits,
                                    .foldable = false});

}  // namespace lumen
