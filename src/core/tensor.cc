#include "lumen/tensor.h"

#include <cstdint>
#include <cstring>
#include <sstream>

#include "core/device_ops.h"
#include "core/half.h"
#include "core/narrow_types.h"

namespace lumen {

std::shared_ptr<Buffer> Buffer::allocate(size_t bytes, Allocator& allocator) {
  auto buffer = std::shared_ptr<Buffer>(new Buffer());
  buffer->data_ = allocator.allocate(bytes);
  buffer->size_ = bytes;
  buffer->device_ = allocator.device();
  buffer->allocator_ = &allocator;
  return buffer;
}

std::shared_ptr<Buffer> Buffer::wrap(void* data, size_t bytes, Device device,
                                     std::function<void()> release) {
  auto buffer = std::shared_ptr<Buffer>(new Buffer());
  buffer->data_ = data;
  buffer->size_ = bytes;
  buffer->device_ = device;
  buffer->release_ = std::move(release);
  return buffer;
}

Buffer::~Buffer() {
  if (allocator_ != nullptr) allocator_->deallocate(data_, size_);
  if (release_) release_();
}

Tensor::Tensor(std::shared_ptr<Buffer> buffer, size_t offset, Shape shape, DType dtype)
    : buffer_(std::move(buffer)), offset_(offset), shape_(std::move(shape)), dtype_(dtype) {
  if (buffer_ && offset_ + nbytes() > buffer_->size())
    throw InvalidArgument("Tensor: shape " + shape_.to_string() + " of " + dtype_name(dtype_) +
                          " at offset " + std::to_string(offset_) + " does not fit a buffer of " +
                          std::to_string(buffer_->size()) + " bytes");
}

static Allocator& allocator_for(Device device) {
  if (device.type != DeviceType::kCPU) return device_ops(device).allocator();
  return cpu_allocator();
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  auto numel = static_cast<size_t>(shape.numel());
  if (numel > SIZE_MAX / 2 / dtype_size(dtype))
    throw OutOfMemory(std::string("tensor ") + dtype_name(dtype) + shape.to_string() +
                      " needs more bytes than fit in 64 bits");
  size_t bytes = numel * dtype_size(dtype);
  return Tensor(Buffer::allocate(bytes, allocator_for(device)), 0, shape, dtype);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  if (t.nbytes() == 0) return t;
  if (device.type == DeviceType::kCPU)
    std::memset(t.raw_data(), 0, t.nbytes());
  else
    device_ops(device).zero(t.raw_data(), device, t.nbytes());
  return t;
}

Device Tensor::device() const {
  return buffer_ ? buffer_->device() : Device::cpu();
}

void* Tensor::raw_data() const {
  if (!buffer_) return nullptr;
  return static_cast<char*>(buffer_->data()) + offset_;
}

void Tensor::check_access(DType dtype) const {
  if (!buffer_) throw InvalidArgument("Tensor::data: the tensor is undefined");
  if (dtype != dtype_)
    throw InvalidArgument(std::string("Tensor::data: tensor holds ") + dtype_name(dtype_) +
                          ", asked for " + dtype_name(dtype));
  if (device().type != DeviceType::kCPU)
    throw InvalidArgument("Tensor::data: tensor is on " + device().to_string() + ", not the host");
}

Tensor Tensor::reshape(const Shape& shape) const {
  std::vector<int64_t> dims = shape.dims();
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < static_cast<int>(dims.size()); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) throw ShapeError("reshape: more than one -1 in " + shape.to_string());
      infer = i;
    } else if (dims[i] < 0) {
      throw ShapeError("reshape: negative dimension in " + shape.to_string());
    } else {
      known *= dims[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel() % known != 0)
      throw ShapeError("reshape: cannot reshape " + shape_.to_string() + " to " +
                       shape.to_string());
    dims[infer] = numel() / known;
  }
  Shape out(std::move(dims));
  if (out.numel() != numel())
    throw ShapeError("reshape: cannot reshape " + shape_.to_string() + " to " + out.to_string());
  return Tensor(buffer_, offset_, out, dtype_);
}

Tensor Tensor::narrow(int64_t start, int64_t length) const {
  if (rank() == 0) throw ShapeError("narrow: a scalar has no dimension 0");
  if (start < 0 || length < 0 || start + length > shape_[0])
    throw ShapeError("narrow: rows [" + std::to_string(start) + ", " +
                     std::to_string(start + length) + ") out of range for " + shape_.to_string());
  Shape out = shape_;
  out[0] = length;
  int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  return Tensor(buffer_, offset_ + static_cast<size_t>(start * row) * dtype_size(dtype_), out,
                dtype_);
}

// Copies between two tensors of the same size on any devices, through the device's ops.
static void copy_bytes(const Tensor& from, const Tensor& to) {
  if (to.nbytes() == 0) return;
  Device src = from.device(), dst = to.device();
  if (src.type == DeviceType::kCPU && dst.type == DeviceType::kCPU) {
    std::memcpy(to.raw_data(), from.raw_data(), to.nbytes());
    return;
  }
  const DeviceOps& ops = device_ops(src.type == DeviceType::kCPU ? dst : src);
  ops.copy(to.raw_data(), dst, from.raw_data(), src, to.nbytes());
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device());
  copy_bytes(*this, t);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  if (device.type != DeviceType::kCPU && this->device().type != DeviceType::kCPU)
    throw DeviceError("Tensor::to: no direct copy between " + this->device().to_string() + " and " +
                      device.to_string());
  Tensor t = empty(shape_, dtype_, device);
  copy_bytes(*this, t);
  return t;
}

double Tensor::item_as_double(int64_t i) const {
  if (i < 0 || i >= numel())
    throw InvalidArgument("item_as_double: index " + std::to_string(i) + " out of range");
  if (device().type != DeviceType::kCPU) throw InvalidArgument("item_as_double: not a host tensor");
  const char* p = static_cast<const char*>(raw_data()) + i * dtype_size(dtype_);
  switch (dtype_) {
    case DType::kFloat32:
      return *reinterpret_cast<const float*>(p);
    case DType::kFloat64:
      return *reinterpret_cast<const double*>(p);
    case DType::kFloat16:
      return half_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::kBFloat16:
      return bfloat16_to_float(*reinterpret_cast<const uint16_t*>(p));
    case DType::kInt8:
      return *reinterpret_cast<const int8_t*>(p);
    case DType::kUInt8:
      return *reinterpret_cast<const uint8_t*>(p);
    case DType::kInt32:
      return *reinterpret_cast<const int32_t*>(p);
    case DType::kInt64:
      return static_cast<double>(*reinterpret_cast<const int64_t*>(p));
    case DType::kBool:
      return *reinterpret_cast<const uint8_t*>(p) ? 1.0 : 0.0;
    case DType::kInt16:
      return *reinterpret_cast<const int16_t*>(p);
    case DType::kUInt16:
      return *reinterpret_cast<const uint16_t*>(p);
    case DType::kUInt32:
      return *reinterpret_cast<const uint32_t*>(p);
    case DType::kUInt64:
      return static_cast<double>(*reinterpret_cast<const uint64_t*>(p));
    case DType::kFloat8E4M3FN:
    case DType::kFloat8E4M3FNUZ:
    case DType::kFloat8E5M2:
    case DType::kFloat8E5M2FNUZ:
    case DType::kFloat8E8M0:
    case DType::kFloat4E2M1:
    case DType::kUInt4:
    case DType::kInt4:
    case DType::kUInt2:
    case DType::kInt2:
      return narrow_to_float(dtype_, *reinterpret_cast<const uint8_t*>(p));
  }
  return 0;
}

std::string Tensor::to_string(int max_values) const {
  std::ostringstream os;
  if (!defined()) return "Tensor(undefined)";
  os << "Tensor(" << dtype_name(dtype_) << ", " << shape_.to_string() << ", "
     << device().to_string() << ")";
  if (device().type == DeviceType::kCPU) {
    os << " [";
    int64_t n = std::min<int64_t>(numel(), max_values);
    for (int64_t i = 0; i < n; ++i) os << (i ? ", " : "") << item_as_double(i);
    if (numel() > n) os << ", ...";
    os << "]";
  }
  return os.str();
}

}  // namespace lumen
