// External tensor data: a file next to the model, mapped read-only into memory.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "onnx/tensor_proto.h"

namespace lumen::onnx_import {

namespace fs = std::filesystem;

std::shared_ptr<Buffer> map_external_data(const std::string& base_dir, const std::string& location,
                                          int64_t offset, int64_t length, const std::string& what) {
  auto fail = [&](const std::string& why) {
    throw IoError(what + ": external data '" + location + "': " + why);
  };
  if (location.empty()) fail("empty location");
  fs::path rel(location);
  if (rel.is_absolute() || location.find('\0') != std::string::npos)
    fail("absolute paths are refused");
  for (const auto& part : rel)
    if (part == "..") fail("the path leaves the model's folder");
  std::error_code ec;
  fs::path base = fs::canonical(base_dir.empty() ? "." : base_dir, ec);
  if (ec) fail("the model's folder cannot be resolved");
  fs::path full = fs::canonical(base / rel, ec);
  if (ec) fail("no such file");
  auto [b, f] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  if (b != base.end()) fail("the path resolves outside the model's folder (symbolic link)");
  if (offset < 0 || length < 0) fail("negative offset or length");

  int fd = ::open(full.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail("cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("not a regular file");
  }
  if (offset > st.st_size || length > st.st_size - offset) {
    ::close(fd);
    fail("offset " + std::to_string(offset) + " + length " + std::to_string(length) +
         " runs past the end of the file (" + std::to_string(st.st_size) + " bytes)");
  }
  if (length == 0) {
    ::close(fd);
    return Buffer::wrap(nullptr, 0, Device::cpu());
  }
  long page = ::sysconf(_SC_PAGESIZE);
  int64_t start = offset / page * page;
  size_t span = static_cast<size_t>(offset - start + length);
  void* map = ::mmap(nullptr, span, PROT_READ, MAP_PRIVATE, fd, start);
  ::close(fd);
  if (map == MAP_FAILED) fail("mmap failed");
  // The buffer starts at the page; callers view it at (offset - start).
  return Buffer::wrap(map, span, Device::cpu(), [map, span] { ::munmap(map, span); });
}

}  // namespace lumen::onnx_import
