// TensorProto decoding (raw bytes, typed repeated fields, or external data) and encoding.
#include "onnx/tensor_proto.h"

#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/narrow_types.h"
#include "graph/onnx_dtype.h"
#include "onnx/model_file.h"

namespace lumen::onnx_import {
namespace {

// Smaller raw tensors are copied into the pool (64-byte aligned); larger ones keep the parsed
// bytes, so a model's weights are never held twice while it loads.
constexpr size_t kTakeAtLeast = 4096;

template <typename Dst, typename Field>
void copy_field(const Field& field, Tensor& t) {
  Dst* out = static_cast<Dst*>(t.raw_data());
  for (int i = 0; i < field.size(); ++i) out[i] = static_cast<Dst>(field.Get(i));
}

// A bool is one byte holding 0 or 1: any other byte in a file becomes 1.
void normalize_bools(Tensor& t) {
  if (t.dtype() != DType::kBool) return;
  auto* p = static_cast<uint8_t*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = p[i] != 0;
}

// A TensorProto's dtype, shape and byte sizes, each checked: `bytes` in lumen's memory, `stored`
// in the file (raw or external data), less where 4- and 2-bit values are packed.
struct ProtoType {
  DType dtype;
  Shape shape;
  int64_t numel;
  size_t bytes;
  size_t stored;
};

size_t packed_size(DType dtype, int64_t numel) {
  const int bits = packed_bits(dtype);
  if (bits == 0) return static_cast<size_t>(numel) * dtype_size(dtype);
  const int64_t per_byte = 8 / bits;
  return static_cast<size_t>((numel + per_byte - 1) / per_byte);
}

// A tensor of `type` from its file bytes (packed where 4- or 2-bit), which hold type.stored bytes.
Tensor tensor_from_stored(const ProtoType& type, const void* data) {
  Tensor t = Tensor::empty(type.shape, type.dtype);
  if (type.bytes == 0) return t;
  if (packed_bits(type.dtype) != 0)
    unpack_sub_byte(type.dtype, static_cast<const uint8_t*>(data), type.numel,
                    static_cast<uint8_t*>(t.raw_data()));
  else
    std::memcpy(t.raw_data(), data, type.bytes);
  normalize_bools(t);
  return t;
}

ProtoType proto_type(const onnx::TensorProto& proto, const std::string& what) {
  auto dtype = dtype_from_onnx(proto.data_type());
  if (!dtype)
    throw UnsupportedOp(what + ": tensor data type " + onnx_dtype_name(proto.data_type()) +
                        " is not supported");
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims)
    if (d < 0) throw InvalidModel(what + ": negative dimension " + std::to_string(d));
  Shape shape(dims);
  int64_t numel = 0;
  try {
    numel = shape.numel();
  } catch (const ShapeError& e) {
    throw InvalidModel(what + ": " + e.what());
  }
  size_t elem = dtype_size(*dtype);
  if (numel > static_cast<int64_t>((int64_t{1} << 62) / elem))
    throw InvalidModel(what + ": " + shape.to_string() + " is too large");
  return {*dtype, shape, numel, static_cast<size_t>(numel) * elem, packed_size(*dtype, numel)};
}

// A narrow dtype in int32_data: float8 as one bit pattern per entry, 4- and 2-bit types as one
// packed byte per entry (two or four elements). Each entry's low byte counts, as ONNX's readers
// take it.
Tensor narrow_from_int32_data(const onnx::TensorProto& proto, const ProtoType& type,
                              const std::string& what) {
  const int64_t have = proto.int32_data_size();
  const int64_t want = static_cast<int64_t>(type.stored);
  if (have != want) {
    const int bits = packed_bits(type.dtype);
    throw InvalidModel(what + ": holds " + std::to_string(have) + " int32_data entries, " +
                       dtype_name(type.dtype) + type.shape.to_string() + " needs " +
                       std::to_string(want) +
                       (bits ? " (" + std::to_string(8 / bits) + " values to an entry)" : ""));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(want));
  for (int64_t i = 0; i < want; ++i)
    bytes[i] = static_cast<uint8_t>(proto.int32_data(static_cast<int>(i)) & 0xFF);
  return tensor_from_stored(type, bytes.data());
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir,
                         const std::string& what) {
  const ProtoType type = proto_type(proto, what);
  const DType dtype = type.dtype;
  const Shape& shape = type.shape;
  const int64_t numel = type.numel;
  const size_t bytes = type.bytes;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : proto.external_data()) {
      try {
        if (kv.key() == "location") location = kv.value();
        if (kv.key() == "offset") offset = std::stoll(kv.value());
        if (kv.key() == "length") length = std::stoll(kv.value());
      } catch (const std::exception&) {
        throw InvalidModel(what + ": external data entry '" + kv.key() + "' is not a number");
      }
    }
    if (length < 0) length = static_cast<int64_t>(type.stored);
    if (static_cast<size_t>(length) != type.stored)
      throw InvalidModel(what + ": external data holds " + std::to_string(length) +
                         " bytes, the shape needs " + std::to_string(type.stored));
    auto buffer = map_external_data(base_dir, location, offset, length, what);
    size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    size_t view_offset = static_cast<size_t>(offset) % page;
    if (bytes == 0) return Tensor::empty(shape, dtype);
    if (packed_bits(dtype) != 0)
      return tensor_from_stored(type, static_cast<const char*>(buffer->data()) + view_offset);
    return Tensor(buffer, view_offset, shape, dtype);
  }

  // Every size is checked against the proto before the tensor is allocated, so a huge shape
  // with little data fails here without asking for its memory.
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != type.stored)
      throw InvalidModel(what + ": raw data holds " + std::to_string(proto.raw_data().size()) +
                         " bytes, " + dtype_name(dtype) + shape.to_string() + " needs " +
                         std::to_string(type.stored));
    return tensor_from_stored(type, proto.raw_data().data());
  }
  if (is_narrow(dtype)) return narrow_from_int32_data(proto, type, what);
  int64_t have = 0;
  switch (dtype) {
    case DType::kFloat32:
      have = proto.float_data_size();
      break;
    case DType::kFloat64:
      have = proto.double_data_size();
      break;
    case DType::kInt64:
      have = proto.int64_data_size();
      break;
    case DType::kUInt32:
    case DType::kUInt64:
      have = proto.uint64_data_size();
      break;
    default:  // int8/16/32, uint8/16, bool, float16 and bfloat16 travel in int32_data
      have = proto.int32_data_size();
      break;
  }
  if (have != numel)
    throw InvalidModel(what + ": holds " + std::to_string(have) + " values, shape " +
                       shape.to_string() + " needs " + std::to_string(numel));
  Tensor t = Tensor::empty(shape, dtype);
  switch (dtype) {
    case DType::kFloat32:
      copy_field<float>(proto.float_data(), t);
      break;
    case DType::kFloat64:
      copy_field<double>(proto.double_data(), t);
      break;
    case DType::kInt64:
      copy_field<int64_t>(proto.int64_data(), t);
      break;
    case DType::kInt32:
      copy_field<int32_t>(proto.int32_data(), t);
      break;
    case DType::kInt8:
      copy_field<int8_t>(proto.int32_data(), t);
      break;
    case DType::kUInt8:
      copy_field<uint8_t>(proto.int32_data(), t);
      break;
    case DType::kInt16:
      copy_field<int16_t>(proto.int32_data(), t);
      break;
    case DType::kUInt16:
      copy_field<uint16_t>(proto.int32_data(), t);
      break;
    case DType::kUInt32:
      copy_field<uint32_t>(proto.uint64_data(), t);
      break;
    case DType::kUInt64:
      copy_field<uint64_t>(proto.uint64_data(), t);
      break;
    case DType::kBool:
      for (int64_t i = 0; i < numel; ++i)
        static_cast<uint8_t*>(t.raw_data())[i] = proto.int32_data(static_cast<int>(i)) != 0;
      break;
    case DType::kFloat16:
    case DType::kBFloat16:  // stored as their 16-bit patterns in int32_data
      copy_field<uint16_t>(proto.int32_data(), t);
      break;
    default:  // the narrow types, read above
      break;
  }
  return t;
}

Tensor take_tensor_from_proto(onnx::TensorProto& proto, const std::string& base_dir,
                              const std::string& what) {
  if (proto.data_location() == onnx::TensorProto::EXTERNAL || !proto.has_raw_data())
    return tensor_from_proto(proto, base_dir, what);
  ProtoType type = proto_type(proto, what);
  if (proto.raw_data().size() != type.bytes || type.bytes < kTakeAtLeast)
    return tensor_from_proto(proto, base_dir, what);
  if (type.dtype == DType::kBool || packed_bits(type.dtype) != 0)
    return tensor_from_proto(proto, base_dir, what);
  auto owner = std::make_shared<std::string>(std::move(*proto.mutable_raw_data()));
  proto.clear_raw_data();
  auto buffer = Buffer::wrap(owner->data(), owner->size(), Device::cpu(), [owner] {});
  return Tensor(buffer, 0, type.shape, type.dtype);
}

Tensor tensor_from_file(const onnx::TensorProto& proto, const ModelFile& file, int index,
                        const std::string& what) {
  if (proto.data_location() == onnx::TensorProto::EXTERNAL)
    throw InvalidModel(what + ": has both raw data and external data");
  const ProtoType type = proto_type(proto, what);
  if (file.raw_size(index) != type.stored)
    throw InvalidModel(what + ": raw data holds " + std::to_string(file.raw_size(index)) +
                       " bytes, " + dtype_name(type.dtype) + type.shape.to_string() + " needs " +
                       std::to_string(type.stored));
  if (packed_bits(type.dtype) != 0) {
    std::vector<uint8_t> packed(type.stored);
    if (type.stored > 0) file.read_raw(index, packed.data());
    return tensor_from_stored(type, packed.data());
  }
  Tensor t = Tensor::empty(type.shape, type.dtype);
  if (type.bytes > 0) file.read_raw(index, t.raw_data());
  normalize_bools(t);
  return t;
}

void tensor_to_proto(const Tensor& tensor, onnx::TensorProto* proto) {
  if (tensor.device().type != DeviceType::kCPU)
    throw InvalidArgument("tensor_to_proto: not a host tensor");
  proto->Clear();
  for (int64_t d : tensor.shape().dims()) proto->add_dims(d);
  proto->set_data_type(onnx_from_dtype(tensor.dtype()));
  const auto* data = static_cast<const uint8_t*>(tensor.raw_data());
  std::string* raw = proto->mutable_raw_data();
  if (packed_bits(tensor.dtype()) != 0) {
    raw->resize(packed_size(tensor.dtype(), tensor.numel()));
    pack_sub_byte(tensor.dtype(), data, tensor.numel(), reinterpret_cast<uint8_t*>(raw->data()));
  } else {
    raw->assign(reinterpret_cast<const char*>(data), tensor.nbytes());
  }
}

}  // namespace lumen::onnx_import
