// Shared oneDNN plumbing for the CPU kernels that use it (gemm.cc, conv.cc, pool.cc).
#pragma once

#include <dnnl.hpp>
#include <string>

#include "lumen/error.h"
#include "lumen/shape.h"

namespace lumen::cpu {

// The process-wide CPU engine.
inline dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One oneDNN stream per host thread, so concurrent executes never share one.
inline dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

inline dnnl::memory::dims to_dnnl_dims(const Shape& shape) {
  return dnnl::memory::dims(shape.dims().begin(), shape.dims().end());
}

// Runs `f`, turning a dnnl::error into a DeviceError that names `where`.
template <typename F>
auto dnnl_call(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    throw DeviceError(where + ": oneDNN: " + e.what());
  }
}

}  // namespace lumen::cpu
