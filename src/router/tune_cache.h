// The tune cache: measured kernel times, links and launch costs in a text file under the user's
// cache folder, valid for one set of devices and one Lumen version.
#pragma once

#include <string>

#include "router/cost_model.h"

namespace lumen::router {

// What the measurements in a cache file hold for: a change of either invalidates the file.
struct CacheIdentity {
  std::string version;  // lumen::version()
  std::string devices;  // "cpu=AMD EPYC 7B13 x2; cuda=NVIDIA H100 80GB HBM3"
};

// tune.tsv in $XDG_CACHE_HOME/lumen, else in $HOME/.cache/lumen (the XDG base directory rule).
std::string default_cache_file();

// Reads `file` into *model. Returns false, leaving *model as it was, when the file is missing or
// was written for another identity (so its measurements are stale); throws IoError naming the file
// and line when it is malformed.
bool load_cache(const std::string& file, const CacheIdentity& identity, CostModel* model);

// Writes every measurement of `model` to `file` (creating its folder), through a temporary file
// renamed into place so a reader never sees half a file. Throws IoError naming the file.
void save_cache(const std::string& file, const CacheIdentity& identity, const CostModel& model);

}  // namespace lumen::router
