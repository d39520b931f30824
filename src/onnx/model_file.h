// An ONNX file read so that its weights are copied once: the file is mapped, the ModelProto is
// parsed from a copy that leaves out the main graph's initializers' raw bytes, and each of those
// is later read by the importer straight from the file into its tensor.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstddef>
#include <string>
#include <vector>

namespace lumen::onnx_import {

class ModelFile {
 public:
  // Opens and maps `path` and parses it into *model, without the raw_data of the main graph's
  // initializers (recorded instead). Throws IoError when the file cannot be read, InvalidModel
  // when it is not a well-formed protobuf (truncated fields, lengths past the end) or is over 2 GB.
  ModelFile(const std::string& path, onnx::ModelProto* model);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

  // Bytes of the raw_data that main-graph initializer `index` had in the file; 0 and false from
  // has_raw when it had none (its data is inline in typed fields, or external).
  bool has_raw(int index) const;
  size_t raw_size(int index) const;
  // Copies initializer `index`'s raw bytes into `dst` (raw_size bytes). Throws IoError.
  void read_raw(int index, void* dst) const;

 private:
  struct Span {
    size_t offset = 0;
    size_t size = 0;
    bool present = false;
  };
  std::string path_;
  int fd_ = -1;
  const unsigned char* map_ = nullptr;
  size_t size_ = 0;
  std::vector<Span> raw_;  // one per main-graph initializer, in file order
};

}  // namespace lumen::onnx_import
