#include "lumen/attribute.h"

#include <sstream>

namespace lumen {

const char* attr_type_name(AttrType type) {
  switch (type) {
    case AttrType::kInt:
      return "int";
    case AttrType::kFloat:
      return "float";
    case AttrType::kString:
      return "string";
    case AttrType::kInts:
      return "ints";
    case AttrType::kFloats:
      return "floats";
    case AttrType::kStrings:
      return "strings";
    case AttrType::kTensor:
      return "tensor";
    case AttrType::kGraph:
      return "graph";
  }
  return "unknown";
}

namespace {
[[noreturn]] void wrong_type(AttrType want, AttrType have) {
  throw InvalidModel(std::string("attribute is ") + attr_type_name(have) + ", expected " +
                     attr_type_name(want));
}
}  // namespace

int64_t Attribute::as_int() const {
  if (auto* v = std::get_if<int64_t>(&value_)) return *v;
  wrong_type(AttrType::kInt, type());
}
float Attribute::as_float() const {
  if (auto* v = std::get_if<float>(&value_)) return *v;
  if (auto* v = std::get_if<int64_t>(&value_)) return static_cast<float>(*v);
  wrong_type(AttrType::kFloat, type());
}
const std::string& Attribute::as_string() const {
  if (auto* v = std::get_if<std::string>(&value_)) return *v;
  wrong_type(AttrType::kString, type());
}
const std::vector<int64_t>& Attribute::as_ints() const {
  if (auto* v = std::get_if<std::vector<int64_t>>(&value_)) return *v;
  wrong_type(AttrType::kInts, type());
}
const std::vector<float>& Attribute::as_floats() const {
  if (auto* v = std::get_if<std::vector<float>>(&value_)) return *v;
  wrong_type(AttrType::kFloats, type());
}
const std::vector<std::string>& Attribute::as_strings() const {
  if (auto* v = std::get_if<std::vector<std::string>>(&value_)) return *v;
  wrong_type(AttrType::kStrings, type());
}
const Tensor& Attribute::as_tensor() const {
  if (auto* v = std::get_if<Tensor>(&value_)) return *v;
  wrong_type(AttrType::kTensor, type());
}
const std::shared_ptr<Graph>& Attribute::as_graph() const {
  if (auto* v = std::get_if<std::shared_ptr<Graph>>(&value_)) return *v;
  wrong_type(AttrType::kGraph, type());
}

std::string Attribute::to_string() const {
  std::ostringstream os;
  auto list = [&os](const auto& items) {
    os << "[";
    for (size_t i = 0; i < items.size(); ++i) os << (i ? ", " : "") << items[i];
    os << "]";
  };
  switch (type()) {
    case AttrType::kInt:
      os << as_int();
      break;
    case AttrType::kFloat:
      os << as_float();
      break;
    case AttrType::kString:
      os << '"' << as_string() << '"';
      break;
    case AttrType::kInts:
      list(as_ints());
      break;
    case AttrType::kFloats:
      list(as_floats());
      break;
    case AttrType::kStrings:
      list(as_strings());
      break;
    case AttrType::kTensor:
      os << "tensor(" << dtype_name(as_tensor().dtype()) << ", " << as_tensor().shape().to_string()
         << ")";
      break;
    case AttrType::kGraph:
      os << "graph";
      break;
  }
  return os.str();
}

}  // namespace lumen
