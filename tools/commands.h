// The `lumen` command line's subcommands.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lumen/shape.h"

namespace lumen::cli {

// `lumen bench matmul N [--runs R]`: an N x N float32 MatMul on every available backend; prints
// the median time and GFLOP/s per backend. Returns the process exit code.
int bench_matmul(const std::vector<std::string>& args);

// `lumen run MODEL.onnx [--input NAME=FILE.npy]... [--shape NAME=AxBxC]... [--output-dir DIR]
// [--device cpu|cuda|auto] [--repeat N]`: runs a model on given or random inputs, prints each
// output's name, dtype, shape and checksum and the median latency, and saves outputs as .npy.
int run_model(const std::vector<std::string>& args);

// `lumen inspect MODEL.onnx [--dot FILE] [--memory] [--shape NAME=AxBxC]...`: inputs, outputs,
// opset, parameters, op histogram; --memory adds the compiled arena plan.
int inspect_model(const std::vector<std::string>& args);

// "1x3x224x224" -> Shape; throws InvalidArgument naming the text.
Shape parse_shape(const std::string& text);
// "NAME=1x3x224x224" (a --shape argument) -> (NAME, Shape).
std::pair<std::string, Shape> parse_shape_arg(const std::string& kv);

}  // namespace lumen::cli
