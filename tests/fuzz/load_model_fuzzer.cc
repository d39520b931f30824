// libFuzzer target: arbitrary bytes as an ONNX model. Loading, verifying and compiling must end in
// a model or a lumen::Error, never a crash, a hang or a huge allocation; a model that compiles
// with small shapes is also run once on deterministic inputs.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lumen/lumen.h"
#include "lumen/onnx.h"

namespace {

// Inputs larger than this are not run (the fuzzer looks for crashes, not for slow models).
constexpr int64_t kMaxRunElements = 1 << 16;
// The host pool's limit while fuzzing: a model asking for more must fail with OutOfMemory, well
// below libFuzzer's own RSS and malloc limits (fuzz.sh: 4 GB).
constexpr size_t kHostMemoryLimit = size_t{1} << 30;

lumen::Tensor fill(const lumen::TensorInfo& info) {
  lumen::Tensor t = lumen::Tensor::zeros(info.type.shape, info.type.dtype);
  auto* bytes = static_cast<unsigned char*>(t.raw_data());
  // Bool inputs hold 0 or 1 (the API's contract, as for a C++ bool); other dtypes any bytes.
  const unsigned modulus = info.type.dtype == lumen::DType::kBool ? 2 : 5;
  for (size_t i = 0; i < t.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(i * 7 % modulus);
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lumen::set_host_memory_limit(kHostMemoryLimit);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lumen::OnnxLoadOptions options;
  options.default_dim = 2;
  try {
    lumen::Graph graph = lumen::load_onnx_bytes(
        std::string_view(reinterpret_cast<const char*>(data), size), options, "/nonexistent");
    graph.optimize();
    lumen::Runtime runtime;
    lumen::Executable* exe = graph.compile(&runtime);
    std::vector<lumen::Tensor> inputs;
    bool small = true;
    for (const lumen::TensorInfo& info : exe->inputs()) {
      small = small && info.type.shape.is_static() && info.type.shape.numel() <= kMaxRunElements;
      if (small) inputs.push_back(fill(info));
    }
    if (small) exe->execute(inputs);
  } catch (const lumen::Error&) {
    // The expected outcome for almost every input.
  }
  // Each input stands for a process of its own: the pool's cached blocks (kept for the next run of
  // the same model) go back, so libFuzzer's RSS limit measures one input, not the corpus so far.
  lumen::cpu_allocator().release_cached();
  return 0;
}
