// `lumen run --profile / --trace`: where the time of a run goes, as tables and as a Chrome trace.
#pragma once

#include <string>
#include <vector>

#include "lumen/runtime.h"

namespace lumen::cli {

// Prints, over several profiled runs of one executable, the time per op kind (median over runs of
// each kind's total, with its share of the run) and the `top` slowest nodes.
void print_profile(const std::vector<RunProfile>& runs, int top = 15);

// Writes the last of `runs` as Chrome trace-event JSON (one complete event per step), which
// chrome://tracing and Perfetto open; each step's args also hold its median duration over all the
// runs ("median_us", "runs"), steadier than one run's. Throws IoError when the file cannot be
// written.
void write_chrome_trace(const std::vector<RunProfile>& runs, const std::string& path);

}  // namespace lumen::cli
