// lumen::Error and its kinds: the only exceptions the public API throws.
#pragma once

#include <stdexcept>
#include <string>

namespace lumen {

// What went wrong, coarsely; Python maps each kind to its own exception class.
enum class ErrorKind {
  kInvalidModel,     // the model or graph is malformed (bad attribute, dangling input, cycle)
  kUnsupportedOp,    // a valid op, or op variant, that no backend can run
  kShapeError,       // shapes or dtypes that do not fit together
  kInvalidArgument,  // a bad argument to an API call (wrong input count, unknown name)
  kOutOfMemory,      // an allocation failed or would exceed a limit
  kDeviceError,      // a device or library call failed
  kIoError,          // a file could not be read or is not allowed
};

// Name of an error kind, e.g. "ShapeError".
const char* error_kind_name(ErrorKind kind);

// Base class of every error lumen throws; what() starts with the kind and names the node, op or
// file it is about.
class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message);
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

#define LUMEN_DEFINE_ERROR(Name)                                                      \
  class Name : public Error {                                                         \
   public:                                                                            \
    explicit Name(const std::string& message) : Error(ErrorKind::k##Name, message) {} \
  };
LUMEN_DEFINE_ERROR(InvalidModel)
LUMEN_DEFINE_ERROR(UnsupportedOp)
LUMEN_DEFINE_ERROR(ShapeError)
LUMEN_DEFINE_ERROR(InvalidArgument)
LUMEN_DEFINE_ERROR(OutOfMemory)
LUMEN_DEFINE_ERROR(DeviceError)
LUMEN_DEFINE_ERROR(IoError)
#undef LUMEN_DEFINE_ERROR

}  // namespace lumen
