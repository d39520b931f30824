// Reading and writing NumPy .npy files (format version 1.0/2.0, little-endian, C order).
#pragma once

#include <string>

#include "lumen/tensor.h"

namespace lumen {

// Reads a NumPy .npy file into a host tensor; throws IoError (file) or InvalidArgument (a dtype
// lumen lacks, Fortran order, big-endian data, a malformed header).
Tensor read_npy(const std::string& path);
// Writes a host tensor as .npy; throws IoError.
void write_npy(const std::string& path, const Tensor& tensor);

}  // namespace lumen
