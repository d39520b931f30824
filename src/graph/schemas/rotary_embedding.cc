// Schema of RotaryEmbedding (opset 23): X is (B, num_heads, S, head_size) or (B, S, hidden) with
// the num_heads attribute; cos_cache and sin_cache are (max_position, rotary_dim / 2) read at
// position_ids (B, S), or (B, S, rotary_dim / 2) when position_ids is absent.
#include <string>

#include "graph/schema.h"
#include "graph/schemas/rotary_geometry.h"

namespace lumen {

RotaryGeometry rotary_geometry(const NodeContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  RotaryGeometry g;
  const int64_t interleaved = ctx.attr_int("interleaved", 0);
  if (interleaved != 0 && interleaved != 1)
    ctx.fail_model("interleaved must be 0 or 1, got " + std::to_string(interleaved));
  g.interleaved = interleaved == 1;
  const int64_t num_heads = ctx.attr_int("num_heads", 0);
  if (num_heads < 0) ctx.fail_model("num_heads must not be negative");
  if (x.rank() == 4) {
    g.batch = x[0];
    g.heads = x[1];
    g.seq = x[2];
    g.head_size = x[3];
    if (num_heads != 0 && num_heads != g.heads)
      ctx.fail_shape("num_heads " + std::to_string(num_heads) + " disagrees with X " +
                     x.to_string() + " (batch, num_heads, sequence, head_size)");
  } else if (x.rank() == 3) {
    if (num_heads == 0)
      ctx.fail_model("a 3-D X (batch, sequence, hidden) needs the num_heads attribute");
    if (x[2] % num_heads != 0)
      ctx.fail_shape("num_heads " + std::to_string(num_heads) +
                     " does not divide the hidden size " + std::to_string(x[2]) + " of X " +
                     x.to_string());
    g.batch = x[0];
    g.seq = x[1];
    g.heads = num_heads;
    g.head_size = x[2] / num_heads;
    g.three_d = true;
  } else {
    ctx.fail_shape(
        "X must be 3-D (batch, sequence, hidden) or 4-D (batch, num_heads, sequence, "
        "head_size), got " +
        x.to_string());
  }
  const int64_t dim = ctx.attr_int("rotary_embedding_dim", 0);
  if (dim < 0) ctx.fail_model("rotary_embedding_dim must not be negative");
  g.rotary_dim = dim == 0 ? g.head_size : dim;
  if (g.rotary_dim > g.head_size)
    ctx.fail_shape("rotary_embedding_dim " + std::to_string(g.rotary_dim) +
                   " exceeds the head size " + std::to_string(g.head_size));
  if (g.rotary_dim % 2 != 0)
    ctx.fail_shape("the rotated size " + std::to_string(g.rotary_dim) +
                   (dim == 0 ? " (the head size)" : " (rotary_embedding_dim)") + " must be even");
  const int64_t half = g.rotary_dim / 2;
  g.with_positions = ctx.has_input(3);
  const Shape& cos = ctx.input_shape(1);
  const Shape& sin = ctx.input_shape(2);
  if (cos != sin)
    ctx.fail_shape("cos_cache " + cos.to_string() + " and sin_cache " + sin.to_string() +
                   " differ in shape");
  if (g.with_positions) {
    const Shape& pos = ctx.input_shape(3);
    if (pos.rank() != 2 || pos[0] != g.batch || pos[1] != g.seq)
      ctx.fail_shape("position_ids must be (batch, sequence) = [" + std::to_string(g.batch) + ", " +
                     std::to_string(g.seq) + "], got " + pos.to_string());
    if (cos.rank() != 2 || cos[1] != half)
      ctx.fail_shape("with position_ids, cos_cache and sin_cache must be (max_position, " +
                     std::to_string(half) + "), got " + cos.to_string());
    g.max_position = cos[0];
  } else if (cos.rank() != 3 || cos[0] != g.batch || cos[1] != g.seq || cos[2] != half) {
    ctx.fail_shape(
        "without position_ids, cos_cache and sin_cache must be (batch, sequence, "
        "rotary_dim / 2) = [" +
        std::to_string(g.batch) + ", " + std::to_string(g.seq) + ", " + std::to_string(half) +
        "], got " + cos.to_string());
  }
  return g;
}

namespace {

void infer_rotary_embedding(InferContext& ctx) {
  const DType t = ctx.input_dtype(0);
  if (!is_floating(t))
    ctx.fail_shape(std::string("X must be a floating-point tensor, not ") + dtype_name(t));
  for (int i = 1; i < 3; ++i)
    if (ctx.input_dtype(i) != t)
      ctx.fail_shape(std::string(i == 1 ? "cos_cache" : "sin_cache") + " is " +
                     dtype_name(ctx.input_dtype(i)) + ", X is " + dtype_name(t));
  if (ctx.has_input(3) && ctx.input_dtype(3) != DType::kInt64)
    ctx.fail_shape(std::string("position_ids must be int64, not ") +
                   dtype_name(ctx.input_dtype(3)));
  rotary_geometry(ctx);
  ctx.set_output(0, t, ctx.input_shape(0));
}

}  // namespace

LUMEN_REGISTER_SCHEMA(RotaryEmbedding, {.min_inputs = 3,
                                        .max_inputs = 4,
                                        .attrs = {{"interleaved", AttrType::kInt},
                                                  {"num_heads", AttrType::kInt},
                                                  {"rotary_embedding_dim", AttrType::kInt}},
                                        .infer = &infer_rotary_embedding});

}  // namespace lumen
