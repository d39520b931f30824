// OpKind's enumerators (from op_kinds.def) and name lookup.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "lumen/graph.h"

namespace lumen {

enum class OpKind : uint16_t {
#define LUMEN_OP(name) k##name,
#include "graph/op_kinds.def"
#undef LUMEN_OP
};

inline constexpr int kNumOpKinds = 0
#define LUMEN_OP(name) +1
#include "graph/op_kinds.def"
#undef LUMEN_OP
    ;

// The ONNX name of an op kind: "MatMul".
const char* op_name(OpKind kind);
// Finds an op by its ONNX name, matched without regard to case ("matmul" finds MatMul).
std::optional<OpKind> op_kind_from_name(std::string_view name);

}  // namespace lumen
