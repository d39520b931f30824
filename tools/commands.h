// The `lumen` command line's subcommands.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lumen/runtime.h"
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

// `lumen plan MODEL.onnx [--device auto|cuda,cpu] [--shape NAME=AxBxC]... [--measure] [--runs N]
// [--budget S] [--no-optimize]`: the router's placement: each node with its backend, its predicted
// time on every candidate, the copies it causes and the reason; totals; with --measure, the
// predicted against the measured time of a run compiled with --device auto. A device list without
// the host (--device cuda) prints the compiled steps instead: each node's backend, and why the
// nodes the host runs stayed there.
int plan_model(const std::vector<std::string>& args);

// `lumen tune MODEL.onnx [--shape NAME=AxBxC]... [--budget S] [--no-optimize]`: measures every
// node signature of the model on every available backend into the tune cache, so a later compile
// with device auto measures nothing.
int tune_model(const std::vector<std::string>& args);

// Prints the nodes a device list without the host left there (Executable::summary's
// "(on the host: WHY)" steps), grouped by why with an example node each; nothing when none.
void print_host_fallbacks(const std::string& summary);

// Random data for an input of `info`'s type (floats in [-1, 1], integers in [0, 9]).
Tensor random_input(const TensorInfo& info, uint64_t seed);
// A positive integer argument; InvalidArgument naming `what` otherwise.
int64_t parse_count(const std::string& s, const char* what);

// "1x3x224x224" -> Shape; throws InvalidArgument naming the text.
Shape parse_shape(const std::string& text);
// "NAME=1x3x224x224" (a --shape argument) -> (NAME, Shape).
std::pair<std::string, Shape> parse_shape_arg(const std::string& kv);

}  // namespace lumen::cli
