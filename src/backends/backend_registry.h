// Registration of backends other than the CPU (which registry.cc always lists first).
#pragma once

namespace lumen {

class Backend;

// Adds a backend (from a plugin's entry point, core/plugins.h). `probe` runs when the
// backends are listed and returns nullptr where the backend cannot run on this machine (no GPU,
// no driver).
bool register_backend(Backend* (*probe)());

}  // namespace lumen
