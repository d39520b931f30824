// Graph::optimize: the default optimizer pipeline.
#include "lumen/graph.h"
#include "passes/pass.h"

namespace lumen {

std::vector<PassStats> Graph::optimize() {
  PassManager manager;
  manager.add(make_constant_fold_pass());
  manager.add(make_identity_pass());
  manager.add(make_cse_pass());
  manager.add(make_fuse_layer_norm_pass());
  manager.add(make_fuse_gelu_pass());
  manager.add(make_fuse_attention_pass());
  manager.add(make_conv_bn_fold_pass());
  manager.add(make_fuse_activation_pass());
  manager.add(make_fold_transpose_pass());
  manager.add(make_fuse_matmul_pass());
  manager.add(make_channels_last_pass());
  manager.add(make_fuse_residual_pass());
  manager.add(make_dead_code_pass());
  std::vector<PassStats> stats = manager.run(*this);
  verify();
  return stats;
}

}  // namespace lumen
