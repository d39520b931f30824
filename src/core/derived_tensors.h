// Tensors derived once from constant tensors (packed weight layouts, device copies of weights),
// shared by every kernel and plan of the process that derives the same thing from the same
// tensor: the plans an OnnxSession compiles for other shapes of one model (a decoder's prefill
// and decode steps) then hold one packed or device copy of each weight, not one each.
#pragma once

#include <functional>
#include <string>

#include "lumen/tensor.h"

namespace lumen {

// The tensor `make()` derives from `source` in the way `how` names (the derivation and every
// parameter that changes its result, e.g. "packed_gemm 768x3072 rows 3072"): a derivation made
// earlier from the same source tensor (the same live buffer, offset, dtype and shape) is returned
// instead of calling make() again. Weights are never written after they are built, so a live
// source buffer holds the same values it held when the derivation was made. An entry lives while
// both the source's buffer and some holder of the derived tensor do. Thread-safe; make() runs
// unlocked.
Tensor derived_tensor(const Tensor& source, const std::string& how,
                      const std::function<Tensor()>& make);

// How many derivations are alive (for tests).
size_t num_derived_tensors();

}  // namespace lumen
