// Schema of TensorScatter (ONNX opset 24): a KV-cache update. `update` is written into a copy of
// `past_cache` along the sequence axis, at each batch row's write index (linear, or wrapping
// around the cache in circular mode).
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_tensor_scatter(InferContext& ctx) {
  const Shape& cache = ctx.input_shape(0);
  const Shape& update = ctx.input_shape(1);
  const DType dt = ctx.input_dtype(0);
  if (ctx.input_dtype(1) != dt)
    ctx.fail_shape(std::string("update is ") + dtype_name(ctx.input_dtype(1)) +
                   " but past_cache is " + dtype_name(dt));
  const std::string mode = ctx.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular")
    ctx.fail_model("mode must be \"linear\" or \"circular\", got \"" + mode + "\"");
  if (cache.rank() < 2)
    ctx.fail_shape("past_cache must have rank 2 or more, got " + cache.to_string());
  const int64_t axis_attr = ctx.attr_int("axis", -2);
  if (axis_attr < -cache.rank() || axis_attr >= cache.rank())
    ctx.fail_model("axis " + std::to_string(axis_attr) + " is out of range for past_cache " +
                   cache.to_string());
  const int axis = normalize_axis(axis_attr, cache.rank());
  if (axis == 0) ctx.fail_model("axis must not be 0 (the batch dimension)");
  bool fits = update.rank() == cache.rank();
  for (int d = 0; fits && d < cache.rank(); ++d)
    fits = d == axis ? update[d] <= cache[d] : update[d] == cache[d];
  if (!fits)
    ctx.fail_shape("update " + update.to_string() + " must match past_cache " + cache.to_string() +
                   " except along axis " + std::to_string(axis) + ", where it may be shorter");
  if (ctx.has_input(2)) {
    if (ctx.input_dtype(2) != DType::kInt64)
      ctx.fail_shape(std::string("write_indices must be int64, got ") +
                     dtype_name(ctx.input_dtype(2)));
    const Shape& idx = ctx.input_shape(2);
    if (idx.rank() != 1 || idx[0] != cache[0])
      ctx.fail_shape("write_indices must have shape [" + std::to_string(cache[0]) +
                     "] (the batch), got " + idx.to_string());
  }
  ctx.set_output(0, dt, cache);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(TensorScatter,
                      {.min_inputs = 2,
                       .max_inputs = 3,
                       .attrs = {{"axis", AttrType::kInt}, {"mode", AttrType::kString}},
                       .infer = &infer_tensor_scatter});

}  // namespace lumen
