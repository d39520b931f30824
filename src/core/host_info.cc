// cpu_model_name and user_cache_file (host_info.h).
#include "core/host_info.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace lumen {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

std::string library_build_identity() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&library_build_identity), &info) == 0 ||
      info.dli_fname == nullptr)
    return "";
  struct stat st {};
  if (stat(info.dli_fname, &st) != 0) return "";
  return std::string(info.dli_fname) + " " + std::to_string(st.st_size) + " " +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

std::string user_cache_file(const std::string& name) {
  // XDG base directories: the user's cache folder, not a configuration switch.
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && xdg[0] == '/')
    return std::string(xdg) + "/lumen/" + name;
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0')
    return std::string(home) + "/.cache/lumen/" + name;
  return std::filesystem::temp_directory_path().string() + "/lumen-" + name;
}

}  // namespace lumen
