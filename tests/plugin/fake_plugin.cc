// A backend plugin for plugin_test: registers a backend named "plugin_test" that runs nothing,
// on the host. Built twice: for this Lumen, and (FAKE_PLUGIN_VERSION) for another version, which
// the loader must refuse before the plugin registers anything.
#include <string>

#include "backends/backend.h"
#include "backends/backend_registry.h"
#include "lumen/error.h"

namespace {

class FakeBackend final : public lumen::Backend {
 public:
  std::string name() const override { return "plugin_test"; }
  lumen::Device device() const override { return lumen::Device::cpu(); }
  bool supports(const lumen::Graph&, const lumen::Node&, std::string* reason) const override {
    *reason = "plugin_test runs no op";
    return false;
  }
  std::unique_ptr<lumen::Kernel> make_kernel(const lumen::Graph&, const lumen::Node& node,
                                             lumen::Precision) const override {
    throw lumen::UnsupportedOp("plugin_test: no kernel for " + node.name);
  }
  lumen::Allocator& allocator() const override { return host().allocator(); }
  lumen::Stream& default_stream() override { return host().default_stream(); }

 private:
  static lumen::Backend& host() { return *lumen::find_backend("cpu"); }
};

lumen::Backend* probe_fake() {
  static FakeBackend backend;
  return &backend;
}

int registrations = 0;

}  // namespace

// How many times the entry point registered the backend (the loader must call it once).
extern "C" __attribute__((visibility("default"))) int fake_plugin_registrations() {
  return registrations;
}

extern "C" __attribute__((visibility("default"))) const char* lumen_plugin_register(
    const char* core_version) {
  static const std::string mismatch = std::string("built for Lumen ") + FAKE_PLUGIN_VERSION;
  if (std::string(core_version) != FAKE_PLUGIN_VERSION) return mismatch.c_str();
  lumen::register_backend(&probe_fake);
  ++registrations;
  return nullptr;
}
