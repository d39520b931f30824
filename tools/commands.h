// The `lumen` command line's subcommands.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lumen/runtime.h"
#include "lumen/shape.h"

namespace lumen::cli {

// `lumen bench matmul N [--runs R] [--precision P] [--device LIST]`: an N x N float32 MatMul on
// every available backend (or those listed); per backend the device-resident time (operands already
// on the backend's device: the kernels' time, GFLOP/s) and the host-to-host time (copies included,
// with the copies' own time and GB/s). Returns the process exit code.
int bench_matmul(const std::vector<std::string>& args);

// `lumen bench memory [MODEL.onnx] [--shape NAME=AxB]... [--device LIST] [--no-optimize]`: the
// planned arena against every intermediate in its own memory, and the process's peak resident
// memory after compiling and one run; without a model, the 20-layer MLP (width 1024, batch 64).
int bench_memory(const std::vector<std::string>& args);

// `lumen bench fusion [--device LIST] [--batch B] [--channels C] [--size S] [--runs R]`: Conv 3x3
// then Relu as two steps against one FusedConv, per backend: steps per run and time per run.
int bench_fusion(const std::vector<std::string>& args);

// `lumen bench lengths MODEL.onnx [--lengths A,B,...] [--count N] [--max-length M] [--repeat R]
// [--seed S] [--vocab V] [--device cpu|cuda] [--threads N]`: a model of one [1, seq] ids input run
// at many lengths (given, or N random in 1..M) by two sessions, the default one (shape families)
// and one with plan_per_shape; per length the first call and the median of R later calls of each,
// and the largest relative difference of their outputs; then each session's compile counts.
int bench_lengths(const std::vector<std::string>& args);

// `lumen generate MODEL.onnx --ids 464,3290,318 [--ids ...] [--batch B] [--max-new-tokens N]
// [--device cpu|cuda|cuda,cpu] [--precision P] [--sample] [--temperature T] [--top-k K]
// [--top-p P] [--seed S] [--eos ID] [--max-length N] [--threads N] [--warmup] [--memory-every N]`:
// generates from an ONNX decoder (lumen/generate.h); prints the new ids per sequence, the prefill and decode
// rates, with a progress line on a terminal; --warmup runs the prompt and 3 steps untimed first;
// --memory-every N prints resident and pool memory every N tokens (a soak).
int generate(const std::vector<std::string>& args);

// `lumen run MODEL.onnx [--input NAME=FILE.npy]... [--shape NAME=AxBxC]... [--output-dir DIR]
// [--device cpu|cuda|auto] [--repeat N] [--no-optimize] [--profile] [--trace FILE.json]`: runs a
// model on given or random inputs, prints each output's name, dtype, shape and checksum, the median
// and p90 latency, and saves outputs as .npy; --profile times each step, --trace writes a trace.
// With auto: which plan ran (the router's or a single device's, auto_plan.h), why, and its
// predicted against its measured time.
int run_model(const std::vector<std::string>& args);

// `lumen inspect MODEL.onnx [--optimized] [--passes] [--dot FILE] [--svg FILE] [--memory]
// [--shape NAME=AxBxC]...`: inputs, outputs, opset, parameters, FLOPs, op histogram; --passes and
// --optimized optimize first; --memory adds the compiled arena plan; --svg renders with Graphviz.
int inspect_model(const std::vector<std::string>& args);

// `lumen plan MODEL.onnx [--device auto|cuda,cpu] [--shape NAME=AxBxC]... [--measure] [--runs N]
// [--budget S] [--no-optimize]`: the router's placement: each node with its backend, its predicted
// time on every candidate, the copies it causes and the reason; totals; the single-device plans'
// predictions; with --measure, the plan `lumen run --device D` runs (for auto: the router's plan
// checked against the single-device plans by running them, the choice and its reason), timed as
// `lumen run` times it (auto_plan.h's timed_runs), predicted against measured. A device list
// without the host (--device cuda) prints the compiled steps instead: each node's backend, and
// why the nodes the host runs stayed there.
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
