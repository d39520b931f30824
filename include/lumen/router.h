// Options of the router: placement of every node by measured cost (CompileOptions with backends
// {"auto"}).
#pragma once

#include <string>

namespace lumen {

struct RouterOptions {
  // The file of measured costs; empty means tune.tsv in $XDG_CACHE_HOME/lumen, or in
  // ~/.cache/lumen. Its entries are kept per device name and Lumen version.
  std::string cache_file;
  // At most this long is spent measuring the costs the cache lacks; what is left unmeasured is
  // interpolated from what was.
  double budget_s = 30;
  // Measure what the cache lacks (false: predict from the cache and defaults only).
  bool measure = true;
  // A progress line on stderr while measuring, when stderr is a terminal.
  bool progress = true;
};

}  // namespace lumen
