// Convolutions through cuDNN's N-d descriptors (conv_nd.cc): ConvTranspose (1-D to 3-D), and the
// Conv and FusedConv nodes that conv.cc's 2-D kernel does not take (1-D, 3-D, and asymmetric
// padding at any rank).
#pragma once

#include <memory>
#include <string>

#include "backends/cuda/cuda_backend.h"

namespace lumen::cuda {

// Whether a Conv or FusedConv node belongs to the N-d kernel: channels-first, and 1-D or 3-D, or
// 2-D with asymmetric padding.
bool conv_takes_nd(const NodeContext& ctx);
// "" when the N-d kernel can run the Conv or FusedConv node, else why not.
std::string check_conv_nd(const NodeContext& ctx);
// The N-d kernel of a Conv or FusedConv node that check_conv_nd accepts.
std::unique_ptr<Kernel> make_conv_nd(const NodeContext& ctx);

}  // namespace lumen::cuda
