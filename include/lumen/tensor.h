// Buffer (a block of device memory) and Tensor (a typed, shaped, contiguous view of a Buffer).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lumen/allocator.h"
#include "lumen/device.h"
#include "lumen/dtype.h"
#include "lumen/error.h"
#include "lumen/shape.h"

namespace lumen {

// A block of memory on one device. Either owned (returned to its allocator when the last
// reference goes) or borrowed (the release callback runs instead, e.g. to drop a NumPy array).
class Buffer {
 public:
  static std::shared_ptr<Buffer> allocate(size_t bytes, Allocator& allocator);
  static std::shared_ptr<Buffer> wrap(void* data, size_t bytes, Device device,
                                      std::function<void()> release = {});
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  Device device() const { return device_; }

 private:
  Buffer() = default;
  void* data_ = nullptr;
  size_t size_ = 0;
  Device device_;
  Allocator* allocator_ = nullptr;
  std::function<void()> release_;
};

// A dense, row-major tensor: a Buffer, a byte offset into it, a shape and a dtype. Copying a
// Tensor shares the memory (like torch.Tensor); clone() copies it. A default-constructed Tensor is
// undefined (defined() is false).
class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Buffer> buffer, size_t offset, Shape shape, DType dtype);

  // Uninitialised memory from the device's pool.
  static Tensor empty(const Shape& shape, DType dtype = DType::kFloat32,
                      Device device = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dtype = DType::kFloat32,
                      Device device = Device::cpu());
  // A CPU tensor holding a copy of `values`; throws ShapeError when the counts differ.
  template <typename T>
  static Tensor from_vector(const Shape& shape, const std::vector<T>& values) {
    Tensor t = empty(shape, DTypeOf<T>::value);
    if (static_cast<int64_t>(values.size()) != t.numel())
      throw ShapeError("Tensor::from_vector: " + std::to_string(values.size()) +
                       " values for shape " + shape.to_string());
    if constexpr (std::is_same_v<T, bool>) {
      for (size_t i = 0; i < values.size(); ++i) t.data<bool>()[i] = values[i];
    } else if (!values.empty()) {
      std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
    }
    return t;
  }
  template <typename T>
  static Tensor scalar(T value) {
    return from_vector<T>(Shape{}, std::vector<T>{value});
  }

  bool defined() const { return buffer_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const;
  int rank() const { return shape_.rank(); }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  size_t offset() const { return offset_; }

  void* raw_data() const;
  // Typed pointer to a host tensor; throws InvalidArgument on a dtype or device mismatch.
  template <typename T>
  T* data() const {
    check_access(DTypeOf<T>::value);
    return static_cast<T*>(raw_data());
  }

  // A view with another shape and the same number of elements; one dimension may be -1.
  Tensor reshape(const Shape& shape) const;
  // A view of rows [start, start + length) of dimension 0.
  Tensor narrow(int64_t start, int64_t length) const;
  // A deep copy on the same device.
  Tensor clone() const;
  // A copy on another device (the same tensor when it is already there).
  Tensor to(Device device) const;
  // Element i converted to double (host tensors; for tests and printing).
  double item_as_double(int64_t i = 0) const;
  // "Tensor(float32, [2, 3], cpu) [0.1, 0.2, ...]"
  std::string to_string(int max_values = 8) const;

 private:
  void check_access(DType dtype) const;
  std::shared_ptr<Buffer> buffer_;
  size_t offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
};

}  // namespace lumen
