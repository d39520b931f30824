// Shape: the dimensions of a tensor, outermost first.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace lumen {

// A dimension known only when the graph runs: the outputs of ops whose shape depends on their
// data (NonZero, Unique, Compress, NonMaxSuppression, a Loop's scan outputs). Such a value may be
// a graph output or feed an op that accepts it; every other consumer is refused when it is added.
inline constexpr int64_t kDynamicDim = -1;

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  // Dimension i; negative i counts from the end. Throws InvalidArgument when out of range.
  int64_t operator[](int i) const;
  int64_t& operator[](int i);
  // Product of all dimensions (1 for a scalar). Throws ShapeError on a negative dimension or
  // when the product overflows int64.
  int64_t numel() const;
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& dims() { return dims_; }
  // True when no dimension is kDynamicDim.
  bool is_static() const;
  // True when `concrete` (a tensor's actual shape) fits this shape: the same rank and every
  // dimension equal, or kDynamicDim here.
  bool admits(const Shape& concrete) const;
  // Row-major element strides.
  std::vector<int64_t> strides() const;
  // "[2, 3, 4]"; a dynamic dimension prints as "?"
  std::string to_string() const;
  bool operator==(const Shape& other) const = default;

 private:
  std::vector<int64_t> dims_;
};

// Wraps a possibly negative axis into [0, rank); throws ShapeError naming `what` otherwise.
int normalize_axis(int64_t axis, int rank, const char* what = "axis");

// NumPy broadcast of two shapes; throws ShapeError when a dimension pair is neither equal nor 1.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace lumen
