#include "backends/cpu/cpu_backend.h"

#include <unistd.h>

#include <array>

#include "backends/cpu/dnnl_util.h"
#include "backends/cpu/kernel_registry.h"
#include "graph/schema.h"

namespace lumen::cpu {
namespace {

std::array<KernelEntry, kNumOpKinds>& kernel_table() {
  static std::array<KernelEntry, kNumOpKinds> table{};
  return table;
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  Device device() const override { return Device::cpu(); }

  bool supports(const Graph& graph, const Node& node, std::string* reason) const override {
    const KernelEntry* entry = find_kernel(node.op);
    std::string why;
    if (entry == nullptr) {
      why = std::string("no CPU kernel for ") + op_name(node.op);
    } else if (entry->check != nullptr) {
      why = entry->check(NodeContext(graph, node));
    }
    if (reason) *reason = why;
    return why.empty();
  }

  std::unique_ptr<Kernel> make_kernel(const Graph& graph, const Node& node,
                                      Precision precision) const override {
    NodeContext ctx(graph, node, precision);
    const KernelEntry* entry = find_kernel(node.op);
    if (entry == nullptr) ctx.fail_unsupported("no CPU kernel");
    if (entry->check != nullptr) {
      std::string why = entry->check(ctx);
      if (!why.empty()) ctx.fail_unsupported("CPU: " + why);
    }
    // A shape or attribute oneDNN refuses (the schema let through something its primitives
    // cannot describe) is this node's error, not a crash.
    try {
      return entry->make(ctx);
    } catch (const dnnl::error& e) {
      ctx.fail_unsupported(std::string("CPU: oneDNN cannot make this kernel: ") + e.what());
    }
  }

  Allocator& allocator() const override { return cpu_allocator(); }
  Stream& default_stream() override { return stream_; }
  // The last-level cache as the C library reports it (L3, else L2; 0 where it does not).
  size_t cache_bytes() const override {
    for (int level : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
      long bytes = sysconf(level);
      if (bytes > 0) return static_cast<size_t>(bytes);
    }
    return 0;
  }

 private:
  CpuStream stream_;
};

}  // namespace

bool register_kernel(OpKind op, KernelEntry entry) {
  kernel_table()[static_cast<size_t>(op)] = entry;
  return true;
}

const KernelEntry* find_kernel(OpKind op) {
  const KernelEntry& e = kernel_table()[static_cast<size_t>(op)];
  return e.make ? &e : nullptr;
}

std::string require_float32(const NodeContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.input_dtype(i) != DType::kFloat32)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(ctx.input_dtype(i)) +
             "; the CPU kernel takes float32";
  return "";
}

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace lumen::cpu
