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
// [--device cpu|cuda|auto] [--repeat N] [--no-optimize] [--profile] [--trace FILE.json]`: runs a
// model on given or random inputs, prints each output's name, dtype, shape and checksum, the median
// and p90 latency, and saves outputs as .npy; --profile times each step, --trace writes a trace.
int run_model(const std::vector<std::string>& args);

// `lumen inspect MODEL.onnx [--optimized] [--passes] [--dot FILE] [--svg FILE] [--memory]
// [--shape NAME=AxBxC]...`: inputs, outputs, opset, parameters, FLOPs, op histogram; --passes and
// --optimized optimize first; --memory adds the compiled arena plan; --svg renders with Graphviz.
int inspect_model(const std::vector<std::string>& args);

// "1x3x224x224" -> Shape; throws InvalidArgument naming the text.
Shape parse_shape(const std::string& text);
// "NAME=1x3x224x224" (a --shape argument) -> (NAME, Shape).
std::pair<std::string, Shape> parse_shape_arg(const std::string& kv);

}  // namespace lumen::cli
