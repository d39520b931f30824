#include "lumen/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <span>
#include <vector>

namespace lumen {
namespace {

struct NpyType {
  const char* descr;
  DType dtype;
};
constexpr NpyType kTypes[] = {
    {"<f4", DType::kFloat32}, {"<f2", DType::kFloat16}, {"<f8", DType::kFloat64},
    {"|i1", DType::kInt8},    {"|u1", DType::kUInt8},   {"<i4", DType::kInt32},
    {"<i8", DType::kInt64},   {"|b1", DType::kBool},    {"<i2", DType::kInt16},
    {"<u2", DType::kUInt16},  {"<u4", DType::kUInt32},  {"<u8", DType::kUInt64},
};

}  // namespace

Tensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open '" + path + "'");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw InvalidArgument(path + ": not a .npy file");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint8_t b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (b[1] << 8);
  } else {
    uint8_t b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  }
  if (!in || header_len > (1u << 20)) throw InvalidArgument(path + ": malformed .npy header");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) throw InvalidArgument(path + ": truncated .npy header");
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([^']+)'")))
    throw InvalidArgument(path + ": .npy header has no descr");
  std::string descr = m[1];
  if (descr == "=f4" || descr == "f4") descr = "<f4";
  const NpyType* type = nullptr;
  for (const NpyType& t : kTypes)
    if (descr == t.descr) type = &t;
  if (type == nullptr)
    throw InvalidArgument(path + ": .npy dtype '" + descr + "' is not supported");
  if (std::regex_search(header, std::regex("'fortran_order':\\s*True")))
    throw InvalidArgument(path + ": Fortran-ordered arrays are not supported");
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)")))
    throw InvalidArgument(path + ": .npy header has no shape");
  std::vector<int64_t> dims;
  std::string dims_text = m[1];
  std::regex number("\\d+");
  for (auto it = std::sregex_iterator(dims_text.begin(), dims_text.end(), number);
       it != std::sregex_iterator(); ++it)
    dims.push_back(std::stoll(it->str()));
  // The file must hold the data before the tensor is allocated (a header may claim any shape).
  Shape shape(dims);
  const std::streamoff at = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff left = in.tellg() - at;
  in.seekg(at);
  if (left < 0 ||
      static_cast<uint64_t>(left) / dtype_size(type->dtype) < static_cast<uint64_t>(shape.numel()))
    throw InvalidArgument(path + ": the data is shorter than shape " + shape.to_string());
  Tensor t = Tensor::empty(shape, type->dtype);
  if (t.nbytes() &&
      !in.read(static_cast<char*>(t.raw_data()), static_cast<std::streamsize>(t.nbytes())))
    throw InvalidArgument(path + ": the data is shorter than shape " + t.shape().to_string());
  // A bool is one byte holding 0 or 1; any other byte becomes 1.
  if (type->dtype == DType::kBool)
    for (auto& b : std::span(static_cast<uint8_t*>(t.raw_data()), t.nbytes())) b = b != 0;
  return t;
}

void write_npy(const std::string& path, const Tensor& tensor) {
  const char* descr = nullptr;
  for (const NpyType& t : kTypes)
    if (t.dtype == tensor.dtype()) descr = t.descr;
  if (descr == nullptr)
    throw InvalidArgument(std::string("write_npy: no .npy dtype for ") +
                          dtype_name(tensor.dtype()));
  std::string shape = "(";
  for (int i = 0; i < tensor.rank(); ++i)
    shape += (i ? ", " : "") + std::to_string(tensor.shape().dims()[i]);
  shape += tensor.rank() == 1 ? ",)" : ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) throw IoError("cannot write '" + path + "'");
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(static_cast<const char*>(tensor.raw_data()),
            static_cast<std::streamsize>(tensor.nbytes()));
  if (!out) throw IoError("cannot write '" + path + "'");
}

}  // namespace lumen
