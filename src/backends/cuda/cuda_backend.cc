// The CUDA backend: device discovery, stream and events, CUDA-graph capture, library handles,
// workspaces and the kernel registry.
#include "backends/cuda/cuda_backend.h"

#include <array>
#include <functional>

#include "backends/backend_registry.h"
#include "backends/cuda/cuda_check.h"
#include "graph/op_kind.h"

namespace lumen::cuda {
namespace {

std::array<KernelEntry, kNumOpKinds>& kernel_table() {
  static std::array<KernelEntry, kNumOpKinds> table{};
  return table;
}

class CudaEvent final : public Event {
 public:
  explicit CudaEvent(bool timing = false) {
    check(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming),
          "create event");
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  void record(Stream& stream) override {
    auto* s = dynamic_cast<CudaStream*>(&stream);
    if (s == nullptr)
      throw DeviceError("CUDA event recorded on a " + stream.device().to_string() + " stream");
    check(cudaEventRecord(event_, s->handle()), "record event");
  }
  void synchronize() override { check(cudaEventSynchronize(event_), "wait for event"); }
  bool done() const override { return cudaEventQuery(event_) == cudaSuccess; }
  double elapsed_us(const Event& later) const override {
    const auto* end = dynamic_cast<const CudaEvent*>(&later);
    if (end == nullptr) throw DeviceError("CudaEvent::elapsed_us: the later event is not CUDA's");
    check(cudaEventSynchronize(end->event_), "wait for event");
    float ms = 0.f;
    check(cudaEventElapsedTime(&ms, event_, end->event_), "read event times");
    return 1000.0 * ms;
  }
  cudaEvent_t handle() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

class CudaGraphWork final : public CapturedWork {
 public:
  CudaGraphWork(cudaGraph_t graph, cudaStream_t stream) : graph_(graph), stream_(stream) {
    check(cudaGraphInstantiate(&exec_, graph_, 0), "instantiate CUDA graph");
  }
  ~CudaGraphWork() override {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  void replay() override { check(cudaGraphLaunch(exec_, stream_), "launch CUDA graph"); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

Backend* probe_cuda() {
  return cuda_backend();
}

// Whether host memory at p is ordinary pageable memory (not page-locked or registered with CUDA).
bool pageable(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // clear the error: p is then unknown to CUDA, so pageable
    return true;
  }
  return attr.type == cudaMemoryTypeUnregistered;
}

}  // namespace

CudaStream::CudaStream(int device, IndexErrors* index_errors)
    : device_(device), index_errors_(index_errors) {
  check(cudaSetDevice(device_), "select device");
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "create stream");
}

CudaStream::~CudaStream() {
  if (stream_) cudaStreamDestroy(stream_);
}

void CudaStream::synchronize() {
  check(cudaStreamSynchronize(stream_), "synchronize stream");
  // Every kernel queued so far has finished: its index failures are in the record.
  if (index_errors_ != nullptr) index_errors_->raise_pending(stream_);
}

void CudaStream::wait(const Event& event) {
  auto* e = dynamic_cast<const CudaEvent*>(&event);
  if (e == nullptr) return;  // host events are done when recorded
  check(cudaStreamWaitEvent(stream_, e->handle(), 0), "wait for event");
}

std::unique_ptr<Event> CudaStream::create_event() {
  return std::make_unique<CudaEvent>();
}

std::unique_ptr<Event> CudaStream::create_timing_event() {
  return std::make_unique<CudaEvent>(true);
}

void CudaStream::begin_capture() {
  // Relaxed: the allocator may call cudaMalloc while another thread records (it never needs to
  // here, since a warm-up run fills the pool first).
  check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), "begin capture");
}

std::unique_ptr<CapturedWork> CudaStream::end_capture() {
  cudaGraph_t graph = nullptr;
  check(cudaStreamEndCapture(stream_, &graph), "end capture");
  return std::make_unique<CudaGraphWork>(graph, stream_);
}

void CudaStream::copy(const Tensor& src, const Tensor& dst) {
  if (src.nbytes() != dst.nbytes())
    throw InvalidArgument("CudaStream::copy: " + std::to_string(src.nbytes()) + " bytes into " +
                          std::to_string(dst.nbytes()));
  if (src.nbytes() == 0) return;
  bool host_src = src.device().type == DeviceType::kCPU;
  bool host_dst = dst.device().type == DeviceType::kCPU;
  const std::string where = "copy " + src.device().to_string() + " -> " + dst.device().to_string();
  const bool pageable_to_device = host_src && !host_dst && pageable(src.raw_data());
  // A large pageable source (a graph input of a replay) or destination (its output) is staged by
  // the host's threads: the driver's own staging, on the calling thread, ran at 6-9 GB/s on the
  // H200 machine.
  if (pageable_to_device && stage_on_host_threads(src.nbytes())) {
    send_to_device(dst.raw_data(), src.raw_data(), src.nbytes(), *this, where);
    return;
  }
  // Into pageable memory, at any size, through pinned staging: the driver's own path for a
  // replay's 16 KB output took about 4 us longer (bench/replay_overhead.cu on the H200 machine).
  if (!host_src && host_dst && pageable(dst.raw_data())) {
    receive_from_device(dst.raw_data(), src.raw_data(), src.nbytes(), *this, where);
    // The copy waited for every kernel queued before it: raise an index one found out of range.
    if (index_errors_ != nullptr) index_errors_->raise_pending(stream_);
    return;
  }
  cudaMemcpyKind kind = host_src ? (host_dst ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice)
                                 : (host_dst ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice);
  check(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), kind, stream_), where);
  // From pageable host memory the driver has staged src when cudaMemcpyAsync returns, so the copy
  // needs no wait (a decoding step's inputs: three waits per token saved); from page-locked memory
  // the transfer reads src later, so it is waited for.
  if (host_dst || (host_src && !pageable_to_device)) synchronize();
}

void Workspace::reserve(size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (bytes <= size_) return;
  void* p = nullptr;
  check(cudaMalloc(&p, bytes), "workspace of " + std::to_string(bytes) + " bytes");
  if (ptr_) retired_.push_back(ptr_);
  ptr_ = p;
  size_ = bytes;
}

CudaBackend::CudaBackend(int device) : device_(device) {
  check(cudaSetDevice(device_), "select device");
  index_errors_ = std::make_unique<IndexErrors>();
  stream_ = std::make_unique<CudaStream>(device_, index_errors_.get());
  copy_stream_ = std::make_unique<CudaStream>(device_);
  check(cublasLtCreate(&cublas_), "create handle");
  check(cudnnCreate(&cudnn_), "create handle");
  check(cudnnSetStream(cudnn_, stream_->handle()), "set stream");
}

std::string CudaBackend::device_name() const {
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device_), "device properties");
  return prop.name;
}

size_t CudaBackend::cache_bytes() const {
  int bytes = 0;
  check(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device_), "L2 cache size");
  return static_cast<size_t>(bytes);
}

bool CudaBackend::supports(const Graph& graph, const Node& node, std::string* reason) const {
  const KernelEntry* entry = find_kernel(node.op);
  std::string why;
  if (entry == nullptr) {
    why = std::string("no CUDA kernel for ") + op_name(node.op);
  } else if (entry->check != nullptr) {
    why = entry->check(NodeContext(graph, node));
  }
  if (reason) *reason = why;
  return why.empty();
}

std::unique_ptr<Kernel> CudaBackend::make_kernel(const Graph& graph, const Node& node,
                                                 Precision precision) const {
  NodeContext ctx(graph, node, precision);
  const KernelEntry* entry = find_kernel(node.op);
  if (entry == nullptr) ctx.fail_unsupported("no CUDA kernel");
  if (entry->check != nullptr) {
    std::string why = entry->check(ctx);
    if (!why.empty()) ctx.fail_unsupported("CUDA: " + why);
  }
  check(cudaSetDevice(device_), "select device");
  return entry->make(ctx);
}

Allocator& CudaBackend::allocator() const {
  return device_allocator();
}

CudaBackend* cuda_backend() {
  // No device or no driver: the backend is simply not available (no error).
  static CudaBackend* backend = []() -> CudaBackend* {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      cudaGetLastError();  // clear the sticky "no device" status
      return nullptr;
    }
    return new CudaBackend(0);  // never destroyed: tensors may outlive main()
  }();
  return backend;
}

CudaBackend& require_cuda_backend() {
  CudaBackend* b = cuda_backend();
  if (b == nullptr) throw DeviceError("no CUDA device on this machine (cuda:0 is not available)");
  return *b;
}

cudaStream_t stream_of(const KernelContext& ctx) {
  auto* s = dynamic_cast<CudaStream*>(ctx.stream);
  return s ? s->handle() : require_cuda_backend().stream().handle();
}

IndexCheck index_check(const NodeContext& ctx) {
  return require_cuda_backend().index_errors().check_for(ctx.where());
}

bool register_kernel(OpKind op, KernelEntry entry) {
  kernel_table()[static_cast<size_t>(op)] = entry;
  return true;
}

const KernelEntry* find_kernel(OpKind op) {
  const KernelEntry& e = kernel_table()[static_cast<size_t>(op)];
  return e.make ? &e : nullptr;
}

std::string require_float(const NodeContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const DType t = ctx.input_dtype(i);
    if (!is_gpu_float(t))
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(t) +
             "; the CUDA kernel takes float32, float16 or bfloat16";
    if (t != ctx.input_dtype(0))
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(t) + " and input 0 " +
             dtype_name(ctx.input_dtype(0)) + "; the CUDA kernel takes one float type";
  }
  return "";
}

std::string require_float_static(const NodeContext& ctx) {
  std::string why = require_float(ctx);
  if (!why.empty()) return why;
  for (int i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && !ctx.input_shape(i).is_static())
      return "input " + std::to_string(i) + "'s shape is known only at run time";
  for (int i = 0; i < ctx.num_outputs(); ++i)
    if (!ctx.output(i).shape.is_static()) return "the output shape is known only at run time";
  return "";
}

bool fused_activation(const NodeContext& ctx, UnaryOp* op, float* alpha, float* beta) {
  const std::string act = ctx.attr_string("activation", "");
  *alpha = ctx.attr_float("activation_alpha", 0.f);
  *beta = ctx.attr_float("activation_beta", 0.f);
  static const std::pair<const char*, UnaryOp> kOps[] = {
      {"", UnaryOp::kIdentity},           {"Relu", UnaryOp::kRelu},
      {"LeakyRelu", UnaryOp::kLeakyRelu}, {"Clip", UnaryOp::kClip},
      {"Sigmoid", UnaryOp::kSigmoid},     {"Tanh", UnaryOp::kTanh},
      {"HardSwish", UnaryOp::kHardSwish}, {"Swish", UnaryOp::kSwish},
      {"GeluErf", UnaryOp::kGelu},        {"GeluTanh", UnaryOp::kGeluTanh}};
  for (const auto& [name, unary] : kOps)
    if (act == name) {
      *op = unary;
      return true;
    }
  return false;
}

namespace {

// The GPU time in milliseconds of what `enqueue` puts on `stream`, between two events.
float elapsed_ms(cudaStream_t stream, const std::function<void()>& enqueue, const char* where) {
  cudaEvent_t start = nullptr, stop = nullptr;
  check(cudaEventCreate(&start), where);
  check(cudaEventCreate(&stop), where);
  check(cudaEventRecord(start, stream), where);
  enqueue();
  check(cudaEventRecord(stop, stream), where);
  check(cudaEventSynchronize(stop), where);
  float ms = 0.f;
  check(cudaEventElapsedTime(&ms, start, stop), where);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

}  // namespace

float time_once_on_stream(cudaStream_t stream, const std::function<void()>& run,
                          const char* where) {
  run();
  return elapsed_ms(stream, run, where);
}

float time_on_stream(cudaStream_t stream, const std::function<void()>& run, const char* where) {
  constexpr int kReps = 8;
  run();
  check(cudaStreamSynchronize(stream), where);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool captured = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (captured) {
    for (int r = 0; r < kReps; ++r) run();
    captured = cudaStreamEndCapture(stream, &graph) == cudaSuccess &&
               cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  }
  if (!captured) (void)cudaGetLastError();
  auto once = [&] {
    if (captured) {
      check(cudaGraphLaunch(exec, stream), where);
    } else {
      for (int r = 0; r < kReps; ++r) run();
    }
  };
  once();
  const float ms = elapsed_ms(stream, once, where);
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  return ms / kReps;
}

std::pair<float, float> MeasuredPairs::get(
    const std::string& key, const std::function<std::pair<float, float>()>& measure) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pairs_.find(key);
    if (it != pairs_.end()) return it->second;
  }
  const std::pair<float, float> measured = measure();
  std::lock_guard<std::mutex> lock(mutex_);
  if (pairs_.size() >= kMaxEntries) pairs_.clear();
  pairs_[key] = measured;
  return measured;
}

TimingStream::TimingStream(const std::string& where) {
  check(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking), where);
}

TimingStream::~TimingStream() {
  if (handle) cudaStreamDestroy(handle);
}

AttentionDesc attention_desc(const Shape& q, int64_t sk, int64_t depth_v, float scale,
                             const Shape* mask) {
  const int rank = q.rank();
  AttentionDesc d;
  d.sq = q[-2];
  d.depth = q[-1];
  d.sk = sk;
  d.depth_v = depth_v;
  d.scale = scale;
  d.batch = 1;
  d.lead_rank = rank - 2;
  for (int j = 0; j < rank - 2; ++j) {
    d.lead_dims[j] = q[j];
    d.batch *= q[j];
  }
  if (mask != nullptr) {
    std::vector<int64_t> scores(q.dims().begin(), q.dims().end() - 1);
    scores.push_back(sk);
    int64_t strides[kMaxRank + 2] = {};
    broadcast_strides(*mask, Shape(scores), strides);
    for (int j = 0; j < rank - 2; ++j) d.mask_lead_strides[j] = strides[j];
    d.mask_q_stride = strides[rank - 2];
    d.mask_k_stride = strides[rank - 1];
  }
  return d;
}

void broadcast_strides(const Shape& in, const Shape& out, int64_t* strides) {
  const int offset = out.rank() - in.rank();
  int64_t stride = 1;
  for (int k = out.rank() - 1; k >= 0; --k) {
    const int j = k - offset;
    strides[k] = j < 0 || in[j] == 1 ? 0 : stride;
    if (j >= 0) stride *= in[j];
  }
}

}  // namespace lumen::cuda

// The plugin's entry point (core/plugins.h): registers the backend and the device's memory ops
// once, when this build's version is the loading core's.
extern "C" __attribute__((visibility("default"))) const char* lumen_plugin_register(
    const char* core_version) {
  static const std::string kMismatch = std::string("built for Lumen ") + LUMEN_VERSION;
  if (core_version == nullptr || std::string(core_version) != LUMEN_VERSION)
    return kMismatch.c_str();
  static const bool kRegistered = (lumen::register_backend(&lumen::cuda::probe_cuda),
                                   lumen::cuda::register_cuda_device_ops(), true);
  (void)kRegistered;
  return nullptr;
}
