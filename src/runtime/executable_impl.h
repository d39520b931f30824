// The inside of an Executable: steps over value slots. Built by compile.cc, run by executable.cc.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "lumen/runtime.h"

namespace lumen {

struct Step {
  std::unique_ptr<Kernel> kernel;
  Backend* backend = nullptr;
  std::vector<int> inputs;   // slot per input; -1 for an omitted optional input
  std::vector<int> outputs;  // slot per output
  std::vector<TensorType> output_types;
  std::vector<int> release;  // slots whose last reader is this step (freed after it)
  std::string label;         // "conv1 (Conv) @cpu"
};

struct Executable::Impl {
  std::vector<Step> steps;
  std::vector<Tensor> constants;  // one per slot: set for constant slots, undefined otherwise
  std::vector<int> input_slots;
  std::vector<int> output_slots;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
};

}  // namespace lumen
