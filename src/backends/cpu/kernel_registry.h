// The CPU backend's kernels, registered from the bottom of each kernel family's file.
#pragma once

#include <memory>
#include <string>

#include "backends/kernel.h"
#include "graph/node_context.h"

namespace lumen::cpu {

// Builds a node's kernel; throws UnsupportedOp (ctx.fail_unsupported) for variants it cannot run.
using KernelFactory = std::unique_ptr<Kernel> (*)(const NodeContext& ctx);
// Returns "" when the kernel can run the node, else the reason it cannot.
using KernelCheck = std::string (*)(const NodeContext& ctx);

struct KernelEntry {
  KernelFactory make = nullptr;
  KernelCheck check = nullptr;  // optional; make() is the final word
};

bool register_kernel(OpKind op, KernelEntry entry);
// nullptr when no CPU kernel is registered for op.
const KernelEntry* find_kernel(OpKind op);

// Registers the CPU kernel of op `Name`:
//   LUMEN_REGISTER_CPU_KERNEL(Relu, make_unary_kernel, check_float);
#define LUMEN_REGISTER_CPU_KERNEL(Name, ...)                                            \
  static const bool lumen_cpu_kernel_registered_##Name = ::lumen::cpu::register_kernel( \
      ::lumen::OpKind::k##Name, ::lumen::cpu::KernelEntry{__VA_ARGS__})

// A check for kernels that run only on float32 inputs (the inputs listed; all when empty).
std::string require_float32(const NodeContext& ctx);

}  // namespace lumen::cpu
