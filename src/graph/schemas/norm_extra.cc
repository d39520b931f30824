// Schemas of RMSNormalization (opset 23), GroupNormalization (opset 21's form: scale and bias per
// channel; the importer turns opset 18's per-group form into it) and LpNormalization.
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

void require_floating(const InferContext& ctx, int i, const char* what) {
  if (!is_floating(ctx.input_dtype(i)))
    ctx.fail_shape(std::string(what) + " must be a floating-point tensor, not " +
                   dtype_name(ctx.input_dtype(i)));
}

int read_axis(const InferContext& ctx, int64_t fallback, int rank) {
  try {
    return normalize_axis(ctx.attr_int("axis", fallback), rank);
  } catch (const ShapeError& e) {
    ctx.fail_shape(e.what());
  }
}

// stash_type names the precision of the statistics: the kernels accumulate them in float32 or
// wider (float64 sums), which serves float32 (1) and float64 (11).
void check_stash_type(const InferContext& ctx) {
  int64_t stash = ctx.attr_int("stash_type", 1);
  if (stash != 1 && stash != 11)
    ctx.fail_unsupported("stash_type " + std::to_string(stash) +
                         " is not supported (1: float32 or 11: float64 statistics)");
}

void check_epsilon(const InferContext& ctx) {
  if (!(ctx.attr_float("epsilon", 1e-5f) >= 0.0f)) ctx.fail_model("epsilon must not be negative");
}

void infer_rms_norm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const Shape& s = ctx.input_shape(1);
  require_floating(ctx, 0, "X");
  require_floating(ctx, 1, "scale");
  if (x.rank() < 1) ctx.fail_shape("X must have rank 1 or more, got a scalar");
  const int axis = read_axis(ctx, -1, x.rank());
  check_stash_type(ctx);
  check_epsilon(ctx);
  // scale broadcasts (NumPy rules, one way) onto the normalised dims [axis, rank) of X.
  bool ok = s.rank() <= x.rank();
  for (int k = 1; ok && k <= s.rank(); ++k) {
    const int xd = x.rank() - k;
    const int64_t sd = s[s.rank() - k];
    ok = xd >= axis ? (sd == x[xd] || sd == 1) : sd == 1;
  }
  if (!ok)
    ctx.fail_shape("scale shape " + s.to_string() +
                   " does not broadcast onto the normalised dims of X " + x.to_string() +
                   " from axis " + std::to_string(axis));
  // Y has scale's type (V), which may differ from X's (T).
  ctx.set_output(0, ctx.input_dtype(1), x);
}

void infer_group_norm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  require_floating(ctx, 0, "X");
  if (x.rank() < 2) ctx.fail_shape("X must be (N, C, ...) of rank 2 or more, got " + x.to_string());
  const int64_t groups = ctx.attr_int("num_groups");
  if (groups < 1) ctx.fail_model("num_groups must be positive, got " + std::to_string(groups));
  const int64_t channels = x[1];
  if (channels % groups != 0)
    ctx.fail_shape("num_groups " + std::to_string(groups) + " does not divide the " +
                   std::to_string(channels) + " channels of X " + x.to_string());
  check_stash_type(ctx);
  check_epsilon(ctx);
  static const char* const kNames[] = {"X", "scale", "bias"};
  for (int i = 1; i < 3; ++i) {
    if (ctx.input_dtype(i) != ctx.input_dtype(0))
      ctx.fail_shape(std::string(kNames[i]) + " is " + dtype_name(ctx.input_dtype(i)) + ", X is " +
                     dtype_name(ctx.input_dtype(0)));
    const Shape& p = ctx.input_shape(i);
    if (p.rank() != 1 || p[0] != channels)
      ctx.fail_shape(std::string(kNames[i]) + " must have shape [" + std::to_string(channels) +
                     "] (one value per channel of X " + x.to_string() + "), got " + p.to_string());
  }
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_lp_norm(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  require_floating(ctx, 0, "input");
  if (x.rank() < 1) ctx.fail_shape("the input must have rank 1 or more, got a scalar");
  read_axis(ctx, -1, x.rank());
  const int64_t p = ctx.attr_int("p", 2);
  if (p != 1 && p != 2) ctx.fail_model("p must be 1 or 2, got " + std::to_string(p));
  ctx.set_output(0, ctx.input_dtype(0), x);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(RMSNormalization, {.min_inputs = 2,
                                         .max_inputs = 2,
                                         .attrs = {{"axis", AttrType::kInt},
                                                   {"epsilon", AttrType::kFloat},
                                                   {"stash_type", AttrType::kInt}},
                                         .infer = &infer_rms_norm});
LUMEN_REGISTER_SCHEMA(GroupNormalization, {.min_inputs = 3,
                                           .max_inputs = 3,
                                           .attrs = {{"epsilon", AttrType::kFloat},
                                                     {"num_groups", AttrType::kInt, true},
                                                     {"stash_type", AttrType::kInt}},
                                           .infer = &infer_group_norm});
LUMEN_REGISTER_SCHEMA(LpNormalization, {.min_inputs = 1,
                                        .max_inputs = 1,
                                        .attrs = {{"axis", AttrType::kInt}, {"p", AttrType::kInt}},
                                        .infer = &infer_lp_norm});

}  // namespace lumen
