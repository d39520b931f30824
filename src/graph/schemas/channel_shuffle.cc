// Schema of ChannelShuffle, which the optimizer's fuse-channel-shuffle pass makes from
// ShuffleNet's Concat -> Reshape -> Transpose -> Reshape [-> Slices]:
//   X = Concat(inputs, axis)                       C channels along `axis`
//   S[..., i * groups + g, ...] = X[..., g * (C / groups) + i, ...]
//   outputs = S split along `axis` into equal parts, one per output
// Every input has the same dtype and rank and the same dims off `axis`.
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

void infer_channel_shuffle(InferContext& ctx) {
  const Shape& first = ctx.input_shape(0);
  const int rank = first.rank();
  const int64_t axis_attr = ctx.attr_int("axis");
  if (axis_attr < -rank || axis_attr >= rank)
    ctx.fail_model("axis " + std::to_string(axis_attr) + " is out of range for rank " +
                   std::to_string(rank));
  const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  const DType dtype = ctx.input_dtype(0);
  int64_t channels = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.input_shape(i);
    if (ctx.input_dtype(i) != dtype)
      ctx.fail_shape("input " + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
                     ", input 0 " + dtype_name(dtype));
    bool fits = s.rank() == rank;
    for (int d = 0; fits && d < rank; ++d) fits = d == axis || s.dims()[d] == first.dims()[d];
    if (!fits)
      ctx.fail_shape("input " + std::to_string(i) + " " + s.to_string() +
                     " does not match input 0 " + first.to_string() + " off axis " +
                     std::to_string(axis));
    channels += s.dims()[axis];
  }
  const int64_t groups = ctx.attr_int("groups");
  const int64_t parts = ctx.num_outputs();
  if (groups < 1 || channels % groups != 0)
    ctx.fail_shape("groups " + std::to_string(groups) + " does not divide the " +
                   std::to_string(channels) + " channels");
  if (channels % parts != 0)
    ctx.fail_shape("the " + std::to_string(channels) + " channels do not split into " +
                   std::to_string(parts) + " equal outputs");
  Shape y = first;
  y.dims()[axis] = channels / parts;
  for (int o = 0; o < parts; ++o) ctx.set_output(o, dtype, y);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(ChannelShuffle,
                      {.min_inputs = 1,
                       .max_inputs = kVariadic,
                       .min_outputs = 1,
                       .max_outputs = kVariadic,
                       .attrs = {{"axis", AttrType::kInt, true}, {"groups", AttrType::kInt, true}},
                       .infer = &infer_channel_shuffle});

}  // namespace lumen
