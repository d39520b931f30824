// Node attributes: typed values such as ints, floats, lists, tensors and subgraphs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "lumen/tensor.h"

namespace lumen {

class Graph;

enum class AttrType { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph };
const char* attr_type_name(AttrType type);

// One attribute value. Implicit constructors make `{{"axis", 1}, {"perm", {0, 2, 1}}}` work.
class Attribute {
 public:
  Attribute() : value_(int64_t{0}) {}
  Attribute(int v) : value_(int64_t{v}) {}
  Attribute(int64_t v) : value_(v) {}
  Attribute(float v) : value_(v) {}
  Attribute(double v) : value_(static_cast<float>(v)) {}
  Attribute(const char* v) : value_(std::string(v)) {}
  Attribute(std::string v) : value_(std::move(v)) {}
  Attribute(std::initializer_list<int64_t> v) : value_(std::vector<int64_t>(v)) {}
  Attribute(std::vector<int64_t> v) : value_(std::move(v)) {}
  Attribute(std::vector<float> v) : value_(std::move(v)) {}
  Attribute(std::vector<std::string> v) : value_(std::move(v)) {}
  Attribute(Tensor v) : value_(std::move(v)) {}
  Attribute(std::shared_ptr<Graph> v) : value_(std::move(v)) {}

  AttrType type() const { return static_cast<AttrType>(value_.index()); }
  // Typed access; each throws InvalidModel naming the expected and actual type on a mismatch.
  int64_t as_int() const;
  float as_float() const;  // an int attribute reads as float too
  const std::string& as_string() const;
  const std::vector<int64_t>& as_ints() const;
  const std::vector<float>& as_floats() const;
  const std::vector<std::string>& as_strings() const;
  const Tensor& as_tensor() const;
  const std::shared_ptr<Graph>& as_graph() const;
  // Short text form for printers: "3", "[1, 2]", "tensor(float32, [4])".
  std::string to_string() const;

 private:
  std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
               std::vector<std::string>, Tensor, std::shared_ptr<Graph>>
      value_;
};

using Attributes = std::map<std::string, Attribute>;

}  // namespace lumen
