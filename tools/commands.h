// The `lumen` command line's subcommands.
#pragma once

#include <string>
#include <vector>

namespace lumen::cli {

// `lumen bench matmul N [--runs R]`: an N x N float32 MatMul on every available backend; prints
// the median time and GFLOP/s per backend. Returns the process exit code.
int bench_matmul(const std::vector<std::string>& args);

// `lumen run MODEL.onnx [--input NAME=FILE.npy]... [--shape NAME=AxBxC]... [--output-dir DIR]
// [--device cpu|cuda|auto] [--repeat N]`: runs a model on given or random inputs, prints each
// output's name, dtype, shape and checksum and the median latency, and saves outputs as .npy.
int run_model(const std::vector<std::string>& args);

// `lumen inspect MODEL.onnx [--dot FILE]`: inputs, outputs, opset, parameters, op histogram.
int inspect_model(const std::vector<std::string>& args);

}  // namespace lumen::cli
