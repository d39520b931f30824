#include "lumen/error.h"

namespace lumen {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidModel:
      return "InvalidModel";
    case ErrorKind::kUnsupportedOp:
      return "UnsupportedOp";
    case ErrorKind::kShapeError:
      return "ShapeError";
    case ErrorKind::kInvalidArgument:
      return "InvalidArgument";
    case ErrorKind::kOutOfMemory:
      return "OutOfMemory";
    case ErrorKind::kDeviceError:
      return "DeviceError";
    case ErrorKind::kIoError:
      return "IoError";
  }
  return "Error";
}

Error::Error(ErrorKind kind, const std::string& message)
    : std::runtime_error(std::string(error_kind_name(kind)) + ": " + message), kind_(kind) {}

}  // namespace lumen
