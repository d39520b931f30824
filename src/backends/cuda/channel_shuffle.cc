// CUDA kernel of ChannelShuffle (schema in graph/schemas/channel_shuffle.cc): the concatenation of
// the inputs along `axis`, its channels shuffled over `groups`, split into equal outputs, as one
// launch of strided row copies (launch_copy_rows), where ShuffleNet's Concat, Transpose and two
// Slices were four launches and four copies of the tensor. Any element type moves by its size.
//
// The copies are planned at compile time. Output channel j of the whole shuffled tensor reads
// concatenated channel (j % groups) * (C / groups) + j / groups, so for each output and group the
// channels j = g, g + groups, ... of that output read consecutive channels of the concatenation:
// one row copy per (outer index, output, group, input crossed), each row one channel's `inner`
// elements, the destination's pitch `groups` channels. ShuffleNet at batch 1 is four copies.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/any_ops.h"
#include "backends/cuda/launch.h"

namespace lumen::cuda {
namespace {

// One planned copy, in bytes from the start of input `input` and of output `output`.
struct ShuffleCopy {
  int input = 0, output = 0;
  size_t src_offset = 0, dst_offset = 0, rows = 0;
};

std::string check_channel_shuffle(const NodeContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    std::string why = check_gpu_data(ctx, i);
    if (!why.empty()) return why;
  }
  return check_static_shapes(ctx);
}

std::unique_ptr<Kernel> make_channel_shuffle(const NodeContext& ctx) {
  const Shape& first = ctx.input_shape(0);
  const int rank = first.rank();
  const int64_t axis_attr = ctx.attr_int("axis");
  const int axis = static_cast<int>(axis_attr < 0 ? axis_attr + rank : axis_attr);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= first[d];
  for (int d = axis + 1; d < rank; ++d) inner *= first[d];
  const size_t block = static_cast<size_t>(inner) * dtype_size(ctx.input_dtype(0));
  std::vector<int64_t> in_channels, in_first;  // each input's channels and first concat channel
  int64_t channels = 0;
  for (int k = 0; k < ctx.num_inputs(); ++k) {
    in_first.push_back(channels);
    in_channels.push_back(ctx.input_shape(k)[axis]);
    channels += in_channels.back();
  }
  const int64_t groups = ctx.attr_int("groups");
  const int parts = ctx.num_outputs();
  const int64_t out_channels = channels / parts, per_group = channels / groups;
  std::vector<ShuffleCopy> plan;
  for (int64_t p = 0; p < outer && block > 0; ++p)
    for (int o = 0; o < parts; ++o)
      for (int64_t g = 0; g < groups; ++g) {
        // Output channels j in [o * out_channels, (o + 1) * out_channels) with j % groups == g.
        int64_t j = o * out_channels + ((g - o * out_channels) % groups + groups) % groups;
        const int64_t end = (o + 1) * out_channels;
        while (j < end) {
          const int64_t c = g * per_group + j / groups;  // its concatenated channel
          int k = 0;
          while (c >= in_first[k] + in_channels[k]) ++k;
          // Rows while the source stays in input k and the destination in output o.
          const int64_t rows =
              std::min(in_first[k] + in_channels[k] - c, (end - j + groups - 1) / groups);
          plan.push_back({k, o, static_cast<size_t>(p * in_channels[k] + c - in_first[k]) * block,
                          static_cast<size_t>(p * out_channels + j - o * out_channels) * block,
                          static_cast<size_t>(rows)});
          j += rows * groups;
        }
      }
  const size_t dst_pitch = static_cast<size_t>(groups) * block;
  return closure(ctx, [=](const KernelContext& k, cudaStream_t s) {
    std::vector<RowCopyDesc> copies;
    copies.reserve(plan.size());
    for (const ShuffleCopy& c : plan)
      copies.push_back({static_cast<char*>(out(k, c.output)) + c.dst_offset, dst_pitch,
                        static_cast<const char*>(in(k, c.input)) + c.src_offset, block, block,
                        c.rows});
    if (!copies.empty()) launch_copy_rows(copies.data(), copies.size(), s);
  });
}

}  // namespace

LUMEN_REGISTER_CUDA_KERNEL(ChannelShuffle, &make_channel_shuffle, &check_channel_shuffle);

}  // namespace lumen::cuda
