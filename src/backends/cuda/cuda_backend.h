// The CUDA backend's insides shared by its files: the backend object (device, stream, library
// handles, workspaces), its stream and event types and the kernel registry.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/index_errors.h"
#include "backends/cuda/launch.h"
#include "backends/recording.h"
#include "graph/node_context.h"

namespace lumen::cuda {

// A CUDA stream behind the runtime's Stream. The backend's stream is non-blocking (it does not
// wait for the legacy default stream). Where `index_errors` is given (the stream the kernels run
// on), synchronize() and copies to or from the host raise the out-of-range indices its kernels
// recorded (IndexErrors::raise_pending): the host reads the record only where it waits anyway.
class CudaStream final : public Stream, public RecordingStream {
 public:
  explicit CudaStream(int device, IndexErrors* index_errors = nullptr);
  ~CudaStream() override;
  Device device() const override { return Device::cuda(device_); }
  void synchronize() override;
  void wait(const Event& event) override;
  std::unique_ptr<Event> create_event() override;
  std::unique_ptr<Event> create_timing_event() override;
  void begin_capture() override;
  std::unique_ptr<CapturedWork> end_capture() override;
  void copy(const Tensor& src, const Tensor& dst) override;
  cudaStream_t handle() const { return stream_; }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  IndexErrors* index_errors_ = nullptr;
};

// Device memory that only grows, for library workspaces: a kernel reads ptr() when it runs, and
// blocks it has outgrown stay allocated, since captured CUDA graphs may still point at them.
class Workspace {
 public:
  void reserve(size_t bytes);
  void* ptr() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  std::mutex mutex_;
  void* ptr_ = nullptr;
  size_t size_ = 0;
  std::vector<void*> retired_;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::cuda(device_); }
  std::string device_name() const override;
  bool supports(const Graph& graph, const Node& node, std::string* reason) const override;
  std::unique_ptr<Kernel> make_kernel(const Graph& graph, const Node& node,
                                      Precision precision) const override;
  Allocator& allocator() const override;
  Stream& default_stream() override { return *stream_; }
  bool takes_half_floats(DType /*half*/) const override { return true; }
  size_t cache_bytes() const override;
  // Copies on a stream of their own, through pinned staging memory (async_copy.cc).
  Tensor move(const Tensor& src, Device to, Event* ready) override;

  CudaStream& stream() { return *stream_; }
  // The stream of Backend::move's copies (and DeviceOps::copy_to_host_after's).
  CudaStream& copy_stream() { return *copy_stream_; }
  cublasLtHandle_t cublas() const { return cublas_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  Workspace& workspace() const { return workspace_; }
  // The record of out-of-range indices that the index kernels with run-time indices report to.
  IndexErrors& index_errors() const { return *index_errors_; }

 private:
  int device_;
  std::unique_ptr<IndexErrors> index_errors_;
  std::unique_ptr<CudaStream> stream_;
  std::unique_ptr<CudaStream> copy_stream_;  // Backend::move's copies
  cublasLtHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  mutable Workspace workspace_;
};

// The backend of device 0, or nullptr where no CUDA device (or driver) exists. The first call
// probes; later calls return the same answer.
CudaBackend* cuda_backend();
// The backend, or DeviceError when this machine has no usable CUDA device.
CudaBackend& require_cuda_backend();

// The raw stream a kernel runs on.
cudaStream_t stream_of(const KernelContext& ctx);

// The index check (index_check.h) that the index kernel built for `ctx`'s node passes to its
// launches: an out-of-range index is raised as an error naming the node (IndexErrors).
IndexCheck index_check(const NodeContext& ctx);

// The caching pool of device memory (cuda_allocator.cc).
Allocator& device_allocator();
// Makes the pool and the device's copies core's DeviceOps for DeviceType::kCUDA (from the
// plugin's entry point).
void register_cuda_device_ops();

// Builds a node's kernel; throws UnsupportedOp (ctx.fail_unsupported) for variants it cannot run.
using KernelFactory = std::unique_ptr<Kernel> (*)(const NodeContext& ctx);
// Returns "" when the kernel can run the node, else the reason it cannot.
using KernelCheck = std::string (*)(const NodeContext& ctx);

struct KernelEntry {
  KernelFactory make = nullptr;
  KernelCheck check = nullptr;
};

bool register_kernel(OpKind op, KernelEntry entry);
const KernelEntry* find_kernel(OpKind op);

// Registers the CUDA kernel of op `Name` (from the bottom of the kernel's file).
#define LUMEN_REGISTER_CUDA_KERNEL(Name, ...)                                             \
  static const bool lumen_cuda_kernel_registered_##Name = ::lumen::cuda::register_kernel( \
      ::lumen::OpKind::k##Name, ::lumen::cuda::KernelEntry{__VA_ARGS__})

// Whether the backend's float kernels take `dtype` (float32, float16 or bfloat16).
inline bool is_gpu_float(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kFloat16 || dtype == DType::kBFloat16;
}
// The kernels' element type of a float32, float16 or bfloat16 tensor.
inline Storage storage_of(DType dtype) {
  return dtype == DType::kFloat16    ? Storage::kFloat16
         : dtype == DType::kBFloat16 ? Storage::kBFloat16
                                     : Storage::kFloat32;
}
inline DType dtype_of(Storage storage) {
  return storage == Storage::kFloat16    ? DType::kFloat16
         : storage == Storage::kBFloat16 ? DType::kBFloat16
                                         : DType::kFloat32;
}

// The usual check: every present input is float32, or every one float16, or every one bfloat16
// (one storage per node).
std::string require_float(const NodeContext& ctx);
// require_float, and every input and output shape known at compile time (where the kernel reads
// its geometry).
std::string require_float_static(const NodeContext& ctx);

// The activation of a fused node (FusedConv, FusedMatMul: attributes activation,
// activation_alpha, activation_beta) as an epilogue's op and parameters; false when the backend's
// kernels have no such activation.
bool fused_activation(const NodeContext& ctx, UnaryOp* op, float* alpha, float* beta);

// The GPU time in milliseconds of one `run` (which enqueues work on `stream`): a few runs
// captured as a CUDA graph and replayed, as an Executable runs them, after one eager warm-up; timed
// eagerly where capture fails. For kernels that choose among their ways at compile time.
float time_on_stream(cudaStream_t stream, const std::function<void()>& run, const char* where);
// The GPU time in milliseconds of one `run` after one warm-up: a first, cheap look (launch
// overheads included) before time_on_stream.
float time_once_on_stream(cudaStream_t stream, const std::function<void()>& run, const char* where);

// What kernels that choose between two ways at build time measured, kept for the process per
// geometry key, so that a model's layers, and the plans of later shapes that repeat one, measure
// once. One instance per kind of kernel (a function-local static); at most kMaxEntries keys, all
// dropped past that.
class MeasuredPairs {
 public:
  // The pair stored for `key`, else `measure()`'s, stored (measured outside the lock: two threads
  // compiling the same geometry at once may both measure).
  std::pair<float, float> get(const std::string& key,
                              const std::function<std::pair<float, float>()>& measure);

 private:
  static constexpr size_t kMaxEntries = 4096;
  std::mutex mutex_;
  std::map<std::string, std::pair<float, float>> pairs_;
};

// A stream of its own for time_on_stream, so that a capture there cannot catch other work.
struct TimingStream {
  explicit TimingStream(const std::string& where);
  ~TimingStream();
  TimingStream(const TimingStream&) = delete;
  TimingStream& operator=(const TimingStream&) = delete;
  cudaStream_t handle = nullptr;
};

// Queues on `on` the copy of `bytes` bytes of host memory at `src` to device memory at `dst`,
// staged in pinned memory by the process's CPU threads chunk by chunk, each chunk sent while the
// next is staged (async_copy.cc); `src` may be reused once it returns. `where` names the copy in
// errors.
void send_to_device(void* dst, const void* src, size_t bytes, Stream& on, const std::string& where);

// Copies `bytes` bytes of device memory at `src` to host memory at `dst` after the work queued on
// `on`, and returns when they are there: the copy engine writes chunks into pinned memory, two
// in flight, while the CPU copies the one before out to `dst` (the process's threads where
// stage_on_host_threads(bytes), else the calling thread; async_copy.cc).
void receive_from_device(void* dst, const void* src, size_t bytes, Stream& on,
                         const std::string& where);

// Whether a copy of `bytes` bytes between pageable host memory and the device is faster through
// send_to_device / receive_from_device than through the driver's own staging, at the process's
// thread count.
bool stage_on_host_threads(size_t bytes);

// Element strides (out.rank() of them) that read `in`, broadcast by NumPy's rules, at each index
// of `out`: 0 along the dims where `in` is broadcast.
void broadcast_strides(const Shape& in, const Shape& out, int64_t* strides);

// The geometry of attention over queries of logical shape q [..., Sq, D] and sk keys with values
// of depth depth_v: leading dims, sizes and scale, and where `mask` is given, its strides as
// broadcast onto the scores [..., Sq, Sk] (k_transposed is left false).
AttentionDesc attention_desc(const Shape& q, int64_t sk, int64_t depth_v, float scale,
                             const Shape* mask);

}  // namespace lumen::cuda
