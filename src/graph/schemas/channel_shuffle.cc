// Schema of ChannelShuffle, which the optimizer's fuse-channel-shuffle pass makes from
// ShuffleNet's Concat -> Reshape -> Transpose -> Reshape [-> Slices]:
//   X = Concat(inputs, axis)                       C channels along `axis`
//   S[..., i * groups + g, ...] = X[..., g * (C / groups) + i, ...]
//   outputs = S split along `axis` into equal parts, one per output
// Every input has the same dtype and rank and the same dims off `axis`.
#include <string>

#include "graph/schema.h"
#include "graph/schemas/concat.h"

namespace lumen {
namespace {

void infer_channel_shuffle(InferContext& ctx) {
  int axis = 0;
  Shape y = concat_shape(ctx, 0, &axis);
  const int64_t channels = y.dims()[axis];
  const int64_t groups = ctx.attr_int("groups");
  const int64_t parts = ctx.num_outputs();
  if (groups < 1 || channels % groups != 0)
    ctx.fail_shape("groups " + std::to_string(groups) + " does not divide the " +
                   std::to_string(channels) + " channels");
  if (channels % parts != 0)
    ctx.fail_shape("the " + std::to_string(channels) + " channels do not split into " +
                   std::to_string(parts) + " equal outputs");
  y.dims()[axis] = channels / parts;
  for (int o = 0; o < parts; ++o) ctx.set_output(o, ctx.input_dtype(0), y);
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
