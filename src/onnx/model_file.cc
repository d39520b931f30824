// ModelFile: map, strip the main graph's raw initializer bytes, parse the rest, pread the weights.
#include "onnx/model_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>

#include "lumen/error.h"

namespace lumen::onnx_import {
namespace {

// Field numbers in onnx.proto: ModelProto.graph, GraphProto.initializer, TensorProto.raw_data.
constexpr uint64_t kModelGraph = 7;
constexpr uint64_t kGraphInitializer = 5;
constexpr uint64_t kTensorRawData = 9;

enum class Level { kModel, kGraph, kTensor };

bool read_varint(const unsigned char* data, size_t end, size_t* pos, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= end) return false;
    unsigned char b = data[(*pos)++];
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

void write_varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Copies a message of the wire format, field by field, leaving out the raw_data of the main
// graph's initializers, whose place in the file it records instead. Enclosing messages are
// re-encoded with their new lengths.
class Stripper {
 public:
  struct Span {
    size_t offset = 0;
    size_t size = 0;
    bool present = false;
  };

  Stripper(const unsigned char* data, const std::string& path) : data_(data), path_(path) {}

  void strip(size_t begin, size_t end, Level level, std::string* out) {
    size_t pos = begin;
    while (pos < end) {
      const size_t field_start = pos;
      uint64_t tag = 0;
      if (!read_varint(data_, end, &pos, &tag) || (tag >> 3) == 0) fail("a field tag is broken");
      const uint64_t field = tag >> 3;
      switch (tag & 7) {
        case 0: {
          uint64_t ignored = 0;
          if (!read_varint(data_, end, &pos, &ignored)) fail("a varint runs past its message");
          break;
        }
        case 1:
          if (end - pos < 8) fail("a fixed64 runs past its message");
          pos += 8;
          break;
        case 5:
          if (end - pos < 4) fail("a fixed32 runs past its message");
          pos += 4;
          break;
        case 2: {
          uint64_t len = 0;
          if (!read_varint(data_, end, &pos, &len) || len > end - pos)
            fail("a length-delimited field runs past its message");
          const size_t body = pos;
          pos += len;
          if ((level == Level::kModel && field == kModelGraph) ||
              (level == Level::kGraph && field == kGraphInitializer)) {
            if (level == Level::kGraph) spans_.emplace_back();
            std::string sub;
            strip(body, pos, level == Level::kModel ? Level::kGraph : Level::kTensor, &sub);
            write_varint(out, tag);
            write_varint(out, sub.size());
            out->append(sub);
            continue;
          }
          if (level == Level::kTensor && field == kTensorRawData) {
            spans_.back() = {body, static_cast<size_t>(len), true};
            continue;
          }
          break;
        }
        default:
          fail("wire type " + std::to_string(tag & 7) + " is not used by ONNX");
      }
      out->append(reinterpret_cast<const char*>(data_ + field_start), pos - field_start);
    }
  }

  std::vector<Span>& spans() { return spans_; }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw InvalidModel(path_ + ": not a valid ONNX model (" + why + "; truncated or not ONNX?)");
  }

  const unsigned char* data_;
  const std::string& path_;
  std::vector<Span> spans_;
};

}  // namespace

ModelFile::ModelFile(const std::string& path, onnx::ModelProto* model) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw IoError("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw IoError("cannot read '" + path + "': not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > static_cast<size_t>(INT32_MAX)) {
    ::close(fd_);
    throw InvalidModel(path + ": the model is over 2 GB; keep large weights in external data");
  }
  if (size_ > 0) {
    void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (map == MAP_FAILED) {
      ::close(fd_);
      throw IoError("cannot map '" + path + "': " + std::strerror(errno));
    }
    map_ = static_cast<const unsigned char*>(map);
  }
  try {
    Stripper stripper(map_, path_);
    std::string stripped;
    stripper.strip(0, size_, Level::kModel, &stripped);
    if (!model->ParseFromString(stripped))
      throw InvalidModel(path + ": not a valid ONNX model (protobuf parsing failed)");
    for (const Stripper::Span& s : stripper.spans()) raw_.push_back({s.offset, s.size, s.present});
    if (model->has_graph() && model->graph().initializer_size() != static_cast<int>(raw_.size()))
      throw InvalidModel(path + ": the graph's initializers could not be matched to their data");
  } catch (...) {
    if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), size_);
    ::close(fd_);
    throw;
  }
  // The mapping served the scan; the weights are read with pread, so they never sit in this
  // process twice.
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), size_);
  map_ = nullptr;
}

ModelFile::~ModelFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool ModelFile::has_raw(int index) const {
  return index >= 0 && index < static_cast<int>(raw_.size()) && raw_[index].present;
}

size_t ModelFile::raw_size(int index) const {
  return has_raw(index) ? raw_[index].size : 0;
}

void ModelFile::read_raw(int index, void* dst) const {
  const Span& s = raw_.at(static_cast<size_t>(index));
  size_t done = 0;
  while (done < s.size) {
    ssize_t got = ::pread(fd_, static_cast<char*>(dst) + done, s.size - done,
                          static_cast<off_t>(s.offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      throw IoError("cannot read '" + path_ +
                    "': " + (got < 0 ? std::strerror(errno) : "the file shrank while loading"));
    done += static_cast<size_t>(got);
  }
}

}  // namespace lumen::onnx_import
