// The loader of backend plugins (lumen/plugin.h) and the entry point a plugin exports.
#pragma once

namespace lumen {

// The function every backend plugin exports (extern "C"), called once after the library is
// loaded with the loading core's version: it registers the plugin's backends and device ops
// (register_backend, register_device_ops) and returns nullptr, or returns why it cannot (built
// for another version) without registering anything.
using PluginEntry = const char* (*)(const char* core_version);
inline constexpr const char* kPluginEntryName = "lumen_plugin_register";

// Loads every plugin next to liblumen, once per process; later calls return at once. Never
// throws: a plugin that fails is recorded (backend_plugins) and its backends stay absent.
void load_default_plugins();

}  // namespace lumen
