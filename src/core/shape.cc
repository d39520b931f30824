#include "lumen/shape.h"

#include <algorithm>

#include "lumen/device.h"
#include "lumen/error.h"

namespace lumen {

int64_t Shape::operator[](int i) const {
  int r = rank();
  if (i < -r || i >= r)
    throw InvalidArgument("Shape" + to_string() + ": index " + std::to_string(i) + " out of range");
  return dims_[i < 0 ? i + r : i];
}

int64_t& Shape::operator[](int i) {
  int r = rank();
  if (i < -r || i >= r)
    throw InvalidArgument("Shape" + to_string() + ": index " + std::to_string(i) + " out of range");
  return dims_[i < 0 ? i + r : i];
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) throw ShapeError("shape " + to_string() + " has a negative dimension");
    if (d != 0 && n > INT64_MAX / d)
      throw ShapeError("shape " + to_string() + " has more elements than fit in 64 bits");
    n *= d;
  }
  return n;
}

bool Shape::is_static() const {
  return std::none_of(dims_.begin(), dims_.end(), [](int64_t d) { return d == kDynamicDim; });
}

bool Shape::admits(const Shape& concrete) const {
  if (concrete.rank() != rank()) return false;
  for (int i = 0; i < rank(); ++i)
    if (dims_[i] != kDynamicDim && dims_[i] != concrete.dims_[i]) return false;
  return true;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size());
  int64_t acc = 1;
  for (int i = rank() - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= std::max<int64_t>(dims_[i], 1);
  }
  return s;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += dims_[i] == kDynamicDim ? "?" : std::to_string(dims_[i]);
  }
  return s + "]";
}

int normalize_axis(int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= std::max(rank, 1))
    throw ShapeError(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
                     std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  int r = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(r);
  for (int i = 0; i < r; ++i) {
    int ia = a.rank() - r + i, ib = b.rank() - r + i;
    int64_t da = ia >= 0 ? a.dims()[ia] : 1;
    int64_t db = ib >= 0 ? b.dims()[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw ShapeError("shapes " + a.to_string() + " and " + b.to_string() +
                       " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return Shape(std::move(out));
}

std::string Device::to_string() const {
  switch (type) {
    case DeviceType::kCPU:
      return "cpu";
    case DeviceType::kCUDA:
      return "cuda:" + std::to_string(index);
    case DeviceType::kVulkan:
      return "vulkan:" + std::to_string(index);
  }
  return "unknown";
}

}  // namespace lumen
