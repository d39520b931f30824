// The `lumen` command line's subcommands.
#pragma once

#include <string>
#include <vector>

namespace lumen::cli {

// `lumen bench matmul N [--runs R]`: an N x N float32 MatMul on every available backend; prints
// the median time and GFLOP/s per backend. Returns the process exit code.
int bench_matmul(const std::vector<std::string>& args);

}  // namespace lumen::cli
