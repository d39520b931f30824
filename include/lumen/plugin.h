// Backend plugins: backends other than the CPU's live in shared libraries of their own
// (liblumen_cuda.so.0), so a process that runs on the CPU alone never loads a GPU library.
#pragma once

#include <string>
#include <vector>

namespace lumen {

// Loads the backend plugin at `path` (a shared library built with this version of Lumen) and
// registers its backends; loading the same file again does nothing. Throws DeviceError naming
// the file and why it could not be used (the loader's reason, such as a library it needs that
// is missing, or a plugin built for another version of Lumen).
//
// Plugins need not be loaded by hand: every `liblumen_NAME.so.0` in the folder liblumen was
// loaded from is loaded the first time a backend other than the CPU is asked for (a compile for
// "cuda" or "auto", Runtime::backends, a tensor moved to a GPU). This call is for a plugin kept
// elsewhere.
void load_backend_plugin(const std::string& path);

// What became of each plugin looked for so far, one line each: "PATH: loaded", or
// "PATH: failed: REASON". Looks for the plugins next to liblumen first.
std::vector<std::string> backend_plugins();

}  // namespace lumen
