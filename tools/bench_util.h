// What the `lumen bench` subcommands share: a timing loop, the process's resident memory, argument
// parsing for precision and backends.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lumen/runtime.h"

namespace lumen::cli {

// Robust statistics of repeated calls, in milliseconds.
struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  size_t runs = 0;
};

// Calls `one_run` once untimed (first touch of memory, thread and primitive start-up), then times
// it: `runs` calls when runs > 0, otherwise as many as fit in about two seconds (at least 5).
// `one_run` returns the milliseconds it measured itself (so a caller may time part of a call).
Timing time_runs(const std::function<double()>& one_run, int64_t runs);

// A float32 tensor of `shape`, uniform in [-bound, bound], the same for the same seed.
Tensor uniform_tensor(const Shape& shape, float bound, uint64_t seed);

// Milliseconds `fn` takes by the steady clock.
double wall_ms(const std::function<void()>& fn);

// The sum of every step's duration in a profiled run, in milliseconds: the work of the kernels
// with their operands where the plan keeps them, without the input checks and output copies.
double steps_ms(const RunProfile& profile);

// The process's resident set now and its high-water mark (Linux /proc/self/status), in bytes; 0
// where the system does not say.
size_t resident_bytes();
size_t peak_resident_bytes();

// "float32" | "float32-strict" | "tf32" | "float16" | "bfloat16" -> Precision; InvalidArgument
// naming the flag else.
Precision parse_precision(const std::string& text);
// Precision's command-line name.
const char* precision_name(Precision precision);

// "cpu,cuda" -> {"cpu", "cuda"}, each checked against the backends this machine has; "" -> all of
// them. Throws DeviceError naming an unknown or unavailable backend.
std::vector<std::string> parse_backends(const std::string& list, const Runtime& runtime);

// The device whose memory a backend's kernels read: the host for "cpu", the GPU for "cuda".
Device backend_device(const std::string& backend);

}  // namespace lumen::cli
