// Backend plugins: found next to liblumen, loaded with dlopen on first need, checked against
// this build's version before they register anything.
#include "core/plugins.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>

#include "lumen/error.h"
#include "lumen/plugin.h"

namespace lumen {
namespace {

struct PluginState {
  std::recursive_mutex mutex;  // recursive: a plugin's initialisers may ask for a backend
  bool defaults_loaded = false;
  std::set<std::string> loaded;  // canonical paths
  std::vector<std::string> report;
};

PluginState& state() {
  static auto* s = new PluginState();  // never destroyed: plugins stay loaded until exit
  return *s;
}

// The folder this library was loaded from ("" when the loader cannot say).
std::string library_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&load_default_plugins), &info) == 0 ||
      info.dli_fname == nullptr)
    return "";
  std::error_code ec;
  std::filesystem::path self = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? "" : self.parent_path().string();
}

// Plugin files in `folder`: liblumen_NAME.so.0, in name order.
std::vector<std::string> plugins_in(const std::string& folder) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(folder, ec)) {
    std::string name = entry.path().filename().string();
    const std::string prefix = "liblumen_", suffix = ".so.0";
    if (name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) &&
        name.ends_with(suffix))
      out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Loads one plugin; returns "" or why it failed. Caller holds the mutex.
std::string load_locked(PluginState& s, const std::string& path) {
  std::error_code ec;
  std::string key = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) key = path;
  if (s.loaded.count(key)) return "";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return why ? why : "dlopen failed";
  }
  auto entry = reinterpret_cast<PluginEntry>(dlsym(handle, kPluginEntryName));
  if (entry == nullptr) {
    dlclose(handle);
    return std::string("not a Lumen backend plugin (no ") + kPluginEntryName + ")";
  }
  if (const char* why = entry(LUMEN_VERSION)) {
    std::string reason = why;
    dlclose(handle);
    return reason;
  }
  s.loaded.insert(key);  // never unloaded: its backends and kernels live until exit
  return "";
}

}  // namespace

void load_default_plugins() {
  PluginState& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  if (s.defaults_loaded) return;
  s.defaults_loaded = true;
  std::string folder = library_folder();
  if (folder.empty()) {
    s.report.push_back("(plugins): the folder of liblumen is unknown; none loaded");
    return;
  }
  for (const std::string& path : plugins_in(folder)) {
    std::string why = load_locked(s, path);
    s.report.push_back(path + (why.empty() ? ": loaded" : ": failed: " + why));
  }
}

void load_backend_plugin(const std::string& path) {
  load_default_plugins();
  PluginState& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  std::string why = load_locked(s, path);
  if (!why.empty()) {
    s.report.push_back(path + ": failed: " + why);
    throw DeviceError("load_backend_plugin: " + path + ": " + why);
  }
  std::string line = path + ": loaded";
  if (std::find(s.report.begin(), s.report.end(), line) == s.report.end()) s.report.push_back(line);
}

std::vector<std::string> backend_plugins() {
  load_default_plugins();
  PluginState& s = state();
  std::lock_guard<std::recursive_mutex> lock(s.mutex);
  return s.report;
}

}  // namespace lumen
