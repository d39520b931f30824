#include "graph/schema.h"

#include <array>
#include <optional>

namespace lumen {
namespace {

std::array<std::optional<OpSchema>, kNumOpKinds>& schema_table() {
  static std::array<std::optional<OpSchema>, kNumOpKinds> table;
  return table;
}

NodeEvaluator& evaluator_slot() {
  static NodeEvaluator evaluator = nullptr;
  return evaluator;
}

}  // namespace

const OpSchema& op_schema(OpKind kind) {
  auto& entry = schema_table()[static_cast<size_t>(kind)];
  if (!entry) throw UnsupportedOp(std::string("op ") + op_name(kind) + " has no schema");
  return *entry;
}

bool has_schema(OpKind kind) {
  return schema_table()[static_cast<size_t>(kind)].has_value();
}

bool register_schema(OpKind kind, OpSchema schema) {
  schema_table()[static_cast<size_t>(kind)] = std::move(schema);
  return true;
}

void set_node_evaluator(NodeEvaluator evaluator) {
  evaluator_slot() = evaluator;
}
NodeEvaluator node_evaluator() {
  return evaluator_slot();
}

}  // namespace lumen
