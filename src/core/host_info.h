// Facts about the host a measurement holds for, and where measurements are kept between processes.
#pragma once

#include <string>

namespace lumen {

// The CPU's model name as /proc/cpuinfo gives it ("AMD EPYC 7B13"), or "unknown CPU".
std::string cpu_model_name();

// Which build of Lumen's library this is: its file's path, size and modification time, so that
// measurements of its kernels kept on disk are dropped when it is rebuilt; "" where unknown.
std::string library_build_identity();

// `name` in the user's cache folder for Lumen: $XDG_CACHE_HOME/lumen, else ~/.cache/lumen (the XDG
// base directory rule), else the temporary folder with a "lumen-" prefix. The folder may not exist.
std::string user_cache_file(const std::string& name);

}  // namespace lumen
