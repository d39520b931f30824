// Graph::optimize: the default optimizer pipeline.
#include "backends/backend.h"
#include "lumen/graph.h"
#include "passes/pass.h"

namespace lumen {

std::vector<PassStats> Graph::optimize() {
  return optimize(std::vector<std::string>{"cpu"});
}

std::vector<PassStats> Graph::optimize(const std::vector<std::string>& backends) {
  std::vector<std::string> names = backends;
  if (names.empty())
    for (Backend* b : auto_backends()) names.push_back(b->name());
  bool cpu_only = true;
  // Every backend has a StridedAttention kernel (the CPU, Vulkan and CUDA); CUDA's is a pair of
  // products per batch index, so with CUDA only one-sequence, non-decoding attention takes it.
  bool strided_attention = true;
  bool with_cuda = false;
  // Every backend's FusedMatMul adds a residual input (the CPU, Vulkan and CUDA).
  bool matmul_residual = true;
  // Every backend has a RotaryEmbedding kernel (the CPU and CUDA; Vulkan runs the decomposed ops).
  bool rotary = true;
  // Every backend has a GroupedMatMul kernel (the CPU and CUDA); only CUDA gains from it (one
  // launch), so it groups where CUDA is among the backends.
  bool grouped_matmul = true;
  // Every backend's FusedConv has Swish and HardSwish epilogues (the CPU and CUDA; Vulkan runs the
  // gated forms as they are).
  bool gated_activations = true;
  // The CPU's and CUDA's FusedMatMul normalize rows (Vulkan's does not). Only CUDA gains (a launch
  // per norm), so the norm fuses where CUDA is among the backends.
  bool matmul_norm = true;
  // The CPU and CUDA have a ChannelShuffle kernel (one copy where the chain made four or five).
  bool channel_shuffle = true;
  // The CPU and CUDA read transposed inputs in place (AxisLayerNorm, FusedElementwise `perms`);
  // only CUDA gains (a launch and a copy per Transpose; the CPU keeps its channels-last regions).
  // The same holds for sibling convolutions merged into one (fewer launches, more multiply-adds).
  bool layout_transposes = true;
  for (const std::string& b : names) {
    cpu_only = cpu_only && b == "cpu";
    strided_attention = strided_attention && (b == "cpu" || b == "vulkan" || b == "cuda");
    with_cuda = with_cuda || b == "cuda";
    matmul_residual = matmul_residual && (b == "cpu" || b == "vulkan" || b == "cuda");
    rotary = rotary && (b == "cpu" || b == "cuda");
    grouped_matmul = grouped_matmul && (b == "cpu" || b == "cuda");
    gated_activations = gated_activations && (b == "cpu" || b == "cuda");
    matmul_norm = matmul_norm && (b == "cpu" || b == "cuda");
    channel_shuffle = channel_shuffle && (b == "cpu" || b == "cuda");
    layout_transposes = layout_transposes && (b == "cpu" || b == "cuda");
  }
  layout_transposes = layout_transposes && with_cuda;
  matmul_norm = matmul_norm && with_cuda;
  PassManager manager;
  manager.add(make_fuse_block_dequant_pass());
  if (cpu_only) manager.add(make_fuse_qdq_pass());
  manager.add(make_constant_fold_pass());
  manager.add(make_identity_pass());
  manager.add(make_cse_pass());
  manager.add(make_fuse_roll_pass());
  manager.add(make_fold_reshaped_add_pass());
  manager.add(make_fuse_layer_norm_pass());
  manager.add(make_fuse_gelu_pass());
  if (rotary) manager.add(make_fuse_rotary_pass());
  manager.add(make_fuse_attention_pass());
  manager.add(make_conv_bn_fold_pass());
  manager.add(make_fuse_activation_pass(cpu_only, gated_activations));
  if (layout_transposes) manager.add(make_fuse_sibling_convs_pass());
  if (cpu_only) manager.add(make_bn_to_affine_pass());
  manager.add(make_fold_transpose_pass());
  manager.add(make_fuse_matmul_pass());
  if (layout_transposes) manager.add(make_fold_channels_last_mlp_pass());
  if (strided_attention) manager.add(make_attention_views_pass(with_cuda));
  manager.add(make_fold_kv_group_pass());
  if (channel_shuffle) manager.add(make_fuse_channel_shuffle_pass());
  if (cpu_only) manager.add(make_channels_last_pass());
  if (cpu_only) manager.add(make_fuse_channel_scale_pass());
  if (cpu_only) manager.add(make_fuse_concat_pass());
  manager.add(make_fuse_residual_pass(cpu_only, matmul_residual));
  if (matmul_norm) manager.add(make_fuse_matmul_norm_pass());
  manager.add(make_dead_code_pass());
  std::vector<PassStats> stats = manager.run(*this);
  // Element-wise trees fuse once the passes above have reached their fixed point: inside their
  // rounds this fusion would take the activations and Adds that fuse-activation, fuse-matmul and
  // fuse-residual claim only in a later round (after channels-last or a bias fusion).
  // Sibling products group once no other fusion can claim one of them.
  PassManager last;
  if (grouped_matmul && with_cuda) last.add(make_group_matmuls_pass());
  last.add(make_fuse_elementwise_pass());
  if (layout_transposes) last.add(make_fold_layout_transposes_pass());
  const int rounds = stats.empty() ? 0 : stats.back().round;
  for (PassStats& s : last.run(*this)) {
    s.round += rounds;
    stats.push_back(std::move(s));
  }
  verify();
  return stats;
}

}  // namespace lumen
