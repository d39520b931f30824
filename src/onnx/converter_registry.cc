// The converter registry (ops registered by LUMEN_ONNX_CONVERTER for an opset range) and the
// importer's error re-wording (converter.h).
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "onnx/converter.h"

namespace lumen::onnx_import {
namespace {

struct ConverterEntry {
  std::string op_type;
  int64_t min_opset;
  int64_t max_opset;
  Converter fn;
};

std::vector<ConverterEntry>& converters() {
  static std::vector<ConverterEntry> list;
  return list;
}

}  // namespace

namespace {

// ShapeError and InvalidModel with the NodeBuildFailure mark.
class MarkedShapeError final : public ShapeError, public NodeBuildFailure {
 public:
  using ShapeError::ShapeError;
};
class MarkedInvalidModel final : public InvalidModel, public NodeBuildFailure {
 public:
  using InvalidModel::InvalidModel;
};

}  // namespace

bool is_microsoft_op(const std::string& op_type) {
  return op_type == "MatMulNBits" || op_type == "QLinearAdd";
}

bool is_training_op(const std::string& op_type) {
  return op_type == "Adagrad" || op_type == "Adam" || op_type == "Momentum";
}

// Opset 7 changed broadcasting and dropped consumed_inputs; these ops were untouched by it.
int64_t stable_since(const std::string& op_type) {
  static const std::unordered_map<std::string, int64_t> kSince = {
      {"Abs", 6},           {"Ceil", 6},        {"Constant", 1}, {"Elu", 6},
      {"Exp", 6},           {"Flatten", 1},     {"Floor", 6},    {"GlobalAveragePool", 1},
      {"GlobalMaxPool", 1}, {"HardSigmoid", 6}, {"Identity", 1}, {"InstanceNormalization", 6},
      {"LeakyRelu", 6},     {"Log", 6},         {"Neg", 6},      {"Not", 1},
      {"Reciprocal", 6},    {"Relu", 6},        {"Selu", 6},     {"Sigmoid", 6},
      {"Softplus", 1},      {"Softsign", 1},    {"Sqrt", 6},     {"Tanh", 6},
      {"Transpose", 1},
  };
  auto it = kSince.find(op_type);
  return it == kSince.end() ? 7 : it->second;
}

const std::unordered_set<std::string>& subgraph_ops() {
  static const std::unordered_set<std::string> kOps = {"If", "Loop", "Scan", "SequenceMap"};
  return kOps;
}

bool is_node_build_failure(const Error& e) {
  return dynamic_cast<const NodeBuildFailure*>(&e) != nullptr;
}

void rethrow_as(const Error& e, const std::string& message, bool mark) {
  mark = mark || is_node_build_failure(e);
  switch (e.kind()) {
    case ErrorKind::kShapeError:
      if (mark) throw MarkedShapeError(message);
      throw ShapeError(message);
    case ErrorKind::kInvalidModel:
      if (mark) throw MarkedInvalidModel(message);
      throw InvalidModel(message);
    case ErrorKind::kUnsupportedOp:
      throw UnsupportedOp(message);
    default:
      throw;
  }
}

std::string error_detail(const Error& e) {
  std::string msg = e.what();
  auto colon = msg.find(": ");
  return colon == std::string::npos ? msg : msg.substr(colon + 2);
}

bool register_converter(const char* op_type, int64_t min_opset, int64_t max_opset, Converter fn) {
  converters().push_back({op_type, min_opset, max_opset, fn});
  return true;
}

Converter find_converter(const std::string& op_type, int64_t opset) {
  for (const ConverterEntry& e : converters())
    if (e.op_type == op_type && opset >= e.min_opset && opset <= e.max_opset) return e.fn;
  return nullptr;
}

}  // namespace lumen::onnx_import
