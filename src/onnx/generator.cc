// Generator: prefill and decode loop over an OnnxSession with a static key/value cache.
//
// The ONNX decoder form concatenates past and new keys, so a cache that grows by one slot per step
// would give every step a new shape. Instead each generation preallocates its cache (batch x
// kv_heads x length x head_dim per layer) and feeds all of it as the past at every step: unused
// and padding slots are zeros, masked out through attention_mask, and position_ids carries each
// token's true position, so attention sees exactly the keys it would with a growing cache (its
// result does not depend on where in the past a key sits). Every decoding step then has one shape
// (one compiled plan, reused by later generations of the same size class). Where the model allows
// it the decoding step is rewritten to write its new slot into the cache in place
// (cache_in_place.h); otherwise, and after the prompt, the new slots of each present output are
// copied into the cache.
#include "lumen/generate.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "backends/backend.h"
#include "core/device_ops.h"
#include "lumen/error.h"
#include "onnx/cache_in_place.h"
#include "onnx/token_choice.h"

namespace lumen {
namespace {

const char* const kInputIds = "input_ids";
const char* const kAttentionMask = "attention_mask";
const char* const kPositionIds = "position_ids";
const char* const kLogits = "logits";

std::string past_name(int64_t layer, bool key) {
  return "past_key_values." + std::to_string(layer) + (key ? ".key" : ".value");
}
std::string present_name(int64_t layer, bool key) {
  return "present." + std::to_string(layer) + (key ? ".key" : ".value");
}

int64_t round_up(int64_t n, int64_t step) {
  return (n + step - 1) / step * step;
}

bool is_index_type(DType t) {
  return t == DType::kInt64 || t == DType::kInt32;
}

// A [rows, cols] tensor of `dtype` (int64 or int32) from int64 values.
Tensor index_tensor(DType dtype, int64_t rows, int64_t cols, const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty(Shape{rows, cols}, dtype);
  if (dtype == DType::kInt64) {
    std::copy(values.begin(), values.end(), t.data<int64_t>());
  } else {
    auto* p = t.data<int32_t>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<int32_t>(values[i]);
  }
  return t;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Where the cache lives: on the GPU when the compile options use CUDA and it is present (the
// decoder's attention runs there, so present outputs come from there), else on the host.
Device cache_device_for(const CompileOptions& compile) {
  const auto& b = compile.backends;
  bool uses = b.empty() || compile.is_auto() || std::find(b.begin(), b.end(), "cuda") != b.end();
  Backend* cuda = uses ? find_backend("cuda") : nullptr;  // a CPU run loads no GPU plugin
  return cuda != nullptr ? cuda->device() : Device::cpu();
}

}  // namespace

double GenerateStats::prefill_tokens_per_second() const {
  return prefill_seconds > 0 ? static_cast<double>(batch * prompt_tokens) / prefill_seconds : 0;
}
double GenerateStats::decode_tokens_per_second() const {
  return decode_seconds > 0 ? static_cast<double>(batch * new_tokens) / decode_seconds : 0;
}

std::string DecoderLayout::to_string() const {
  return std::to_string(layers) + " layers, " + std::to_string(kv_heads) + " kv heads x " +
         std::to_string(head_dim) + ", vocab " + (vocab > 0 ? std::to_string(vocab) : "?") + ", " +
         dtype_name(cache_dtype) + " cache";
}

struct Generation::State {
  OnnxSession* session = nullptr;
  DecoderLayout layout;
  DType ids_dtype = DType::kInt64;
  DType mask_dtype = DType::kInt64;
  DType position_dtype = DType::kInt64;
  std::vector<int> present_key_out;  // per layer: index of present.N.key among the outputs
  std::vector<int> present_value_out;
  int logits_out = 0;
  // Whether the decoding step writes the cache in place (cache_in_place.h); else each step makes
  // the presents whole and store() copies their new slot into the cache. The in-place step's plan
  // (looked up at each unbound step: the session may have evicted and recompiled it) and its
  // logits output's index among its outputs.
  bool in_place = false;
  std::function<Executable*()> in_place_step;
  int in_place_logits = 0;
  bool float32_logits = false;  // the model declares logits float32
  GenerateOptions options;
  std::vector<std::vector<int64_t>> prompts;
  int64_t batch = 0;
  int64_t chunk = 0;                // the prompt's padded length
  int64_t capacity = 0;             // cache slots per sequence
  int64_t filled = 0;               // slots in use
  Device device = Device::cpu();    // where the cache lives
  std::vector<Tensor> cache;        // per layer: key, value ([batch, kv_heads, capacity, head_dim])
  std::vector<int64_t> slot_valid;  // [batch, capacity]: 1 where a slot holds a real token
  std::vector<int64_t> position;    // per sequence: the next token's position
  std::vector<int64_t> last;        // per sequence: the token to feed next
  std::vector<bool> ended;
  std::vector<std::vector<int64_t>> made;
  std::mt19937_64 rng;
  std::vector<std::pair<float, int64_t>> scratch;
  GenerateStats stats;
  bool broken = false;
  // On a device, after the first decoding step: the step's replay reading the cache in place
  // (Executable::bind), so a step copies neither the cache in nor the presents out.
  std::unique_ptr<BoundReplay> bound_step;
  bool bind_tried = false;
  // Greedy decoding kept on the device (where picks_on_device() and the device offers
  // argmax_rows_into, mark and copy_to_host_after), once the step is bound: the step's ids, mask
  // and positions are bound device tensors too, written on the device after each step (the ids by
  // its choice, the mask's new slot and the positions by row copies), so the host enqueues the
  // next step before it reads this one's tokens and the device never waits for the host.
  struct OnDevice {
    Tensor ids, mask, positions;  // the bound inputs
    Tensor write_index;           // and, for the in-place step, the cache slot it writes
    Tensor position_table;        // [steps + 1, batch]: the positions of each later step
    Tensor slot_table;            // [steps + 1, batch]: the in-place step's later slots
    Tensor one;                   // one mask value of 1
    Tensor chosen;                // [2, batch] int64: the choices of the last two steps
    int64_t steps = 0;            // steps enqueued
    bool pending = false;         // a step is enqueued whose tokens were not read
    uint64_t pending_mark = 0;
  };
  std::unique_ptr<OnDevice> on_device;

  std::map<std::string, Tensor> feeds(const Tensor& ids, const std::vector<int64_t>& mask,
                                      int64_t new_len, const Tensor& positions) const {
    std::map<std::string, Tensor> in;
    in[kInputIds] = ids;
    in[kAttentionMask] = index_tensor(mask_dtype, batch, capacity + new_len, mask);
    in[kPositionIds] = positions;
    for (int64_t l = 0; l < layout.layers; ++l) {
      in[past_name(l, true)] = cache[2 * l];
      in[past_name(l, false)] = cache[2 * l + 1];
    }
    return in;
  }

  // The decoding step's attention_mask columns: the in-place step's mask covers the cache alone
  // (the new token in slot `filled`), the other one the cache and the new token after it.
  int64_t mask_columns() const { return in_place ? capacity : capacity + 1; }

  // The in-place step's write_index: slot `filled` for every sequence.
  Tensor write_index() const {
    Tensor t = Tensor::empty(Shape{batch}, DType::kInt64);
    std::fill(t.data<int64_t>(), t.data<int64_t>() + batch, filled);
    return t;
  }

  // The in-place step's inputs.
  std::map<std::string, Tensor> in_place_feeds(const Tensor& ids, const std::vector<int64_t>& mask,
                                               const Tensor& positions) const {
    std::map<std::string, Tensor> in;
    in[kInputIds] = ids;
    in[kAttentionMask] = index_tensor(mask_dtype, batch, capacity, mask);
    in[kPositionIds] = positions;
    in[kCacheWriteIndex] = write_index();
    for (int64_t l = 0; l < layout.layers; ++l) {
      in[past_name(l, true)] = cache[2 * l];
      in[past_name(l, false)] = cache[2 * l + 1];
    }
    return in;
  }

  // After an in-place step: its slot holds each sequence's new token.
  void filled_in_place() {
    for (int64_t b = 0; b < batch; ++b) slot_valid[b * capacity + filled] = 1;
    ++filled;
  }

  // Whether pick() chooses on the cache's device (greedy over float32 logits): its wait for the
  // chosen indices then also waits for the step and its cache copies.
  bool picks_on_device() const {
    return (!options.do_sample || options.top_k == 1) && float32_logits &&
           device.type != DeviceType::kCPU && device_ops(device).argmax_rows != nullptr;
  }

  // Whether decoding can stay on the device (OnDevice above).
  bool can_stay_on_device() const {
    if (!picks_on_device()) return false;
    const DeviceOps& ops = device_ops(device);
    return ops.argmax_rows_into != nullptr && ops.mark != nullptr &&
           ops.copy_to_host_after != nullptr && ops.copy_rows != nullptr;
  }

  // Device tensors for the step's ids, mask and positions (bound with the cache), and the tables
  // the device copies from.
  void make_on_device(std::map<std::string, Tensor>& bound) {
    auto od = std::make_unique<OnDevice>();
    od->ids = Tensor::empty(Shape{batch, 1}, ids_dtype, device);
    od->mask = Tensor::empty(Shape{batch, mask_columns()}, mask_dtype, device);
    od->positions = Tensor::empty(Shape{batch, 1}, position_dtype, device);
    od->chosen = Tensor::empty(Shape{2, batch}, DType::kInt64, device);
    od->one = index_tensor(mask_dtype, 1, 1, {1}).to(device);
    bound[kInputIds] = od->ids;
    bound[kAttentionMask] = od->mask;
    bound[kPositionIds] = od->positions;
    if (in_place) {
      od->write_index = Tensor::empty(Shape{batch}, DType::kInt64, device);
      bound[kCacheWriteIndex] = od->write_index;
    }
    on_device = std::move(od);
  }

  // Writes the next step's inputs from the host's state (once, when decoding moves to the device):
  // the ids to feed, the mask and the positions, and the table of later positions.
  void start_on_device(const std::vector<int64_t>& mask) {
    OnDevice& od = *on_device;
    const DeviceOps& ops = device_ops(device);
    auto upload = [&](const Tensor& host, Tensor& dst) {
      ops.copy(dst.raw_data(), device, host.raw_data(), Device::cpu(), host.nbytes());
    };
    upload(index_tensor(ids_dtype, batch, 1, last), od.ids);
    upload(index_tensor(mask_dtype, batch, mask_columns(), mask), od.mask);
    const int64_t steps = std::max<int64_t>(options.max_new_tokens, 1);
    std::vector<int64_t> table(static_cast<size_t>((steps + 1) * batch));
    for (int64_t k = 0; k <= steps; ++k)
      for (int64_t b = 0; b < batch; ++b) table[k * batch + b] = position[b] + k;
    od.position_table = index_tensor(position_dtype, steps + 1, batch, table).to(device);
    upload(index_tensor(position_dtype, batch, 1, position), od.positions);
    if (in_place) {
      for (int64_t k = 0; k <= steps; ++k)
        for (int64_t b = 0; b < batch; ++b)
          table[k * batch + b] = std::min(filled + k, capacity - 1);
      od.slot_table = index_tensor(DType::kInt64, steps + 1, batch, table).to(device);
      upload(write_index(), od.write_index);
    }
  }

  // Enqueues one decoding step on the device: the replay, the cache copies, the choice (into the
  // bound ids and a slot of `chosen`), the next step's mask slot and positions. Nothing waits.
  void enqueue_on_device() {
    OnDevice& od = *on_device;
    const DeviceOps& ops = device_ops(device);
    std::vector<Tensor> outs = bound_step->run({}, false);
    const int64_t slot = filled;
    if (in_place)
      filled_in_place();
    else
      store(outs, 1, std::vector<int64_t>(static_cast<size_t>(batch), 1), false);
    const Tensor& logits = outs[in_place ? in_place_logits : logits_out];
    const int64_t vocab = logits.shape()[2];
    ops.argmax_rows_into(static_cast<const float*>(logits.raw_data()), batch, vocab, vocab, device,
                         od.ids.raw_data(), ids_dtype == DType::kInt32,
                         static_cast<int64_t*>(od.chosen.raw_data()) + (od.steps % 2) * batch);
    ++od.steps;
    const size_t mask_bytes = dtype_size(mask_dtype), pos_bytes = dtype_size(position_dtype);
    // The slot this step wrote stays unmasked; the in-place step's next slot is unmasked now.
    const int64_t unmask = in_place ? std::min(slot + 1, capacity - 1) : slot;
    RowCopy slot_valid_copy{static_cast<char*>(od.mask.raw_data()) + unmask * mask_bytes,
                            static_cast<size_t>(mask_columns()) * mask_bytes,
                            od.one.raw_data(),
                            0,
                            mask_bytes,
                            static_cast<size_t>(batch)};
    const int64_t row = std::min(od.steps, od.position_table.shape()[0] - 1);
    RowCopy positions_copy{od.positions.raw_data(),
                           0,
                           static_cast<const char*>(od.position_table.raw_data()) +
                               static_cast<size_t>(row * batch) * pos_bytes,
                           0,
                           static_cast<size_t>(batch) * pos_bytes,
                           1};
    RowCopy copies[3] = {slot_valid_copy, positions_copy, {}};
    if (in_place)
      copies[2] = {od.write_index.raw_data(),
                   0,
                   static_cast<const char*>(od.slot_table.raw_data()) +
                       static_cast<size_t>(row * batch) * sizeof(int64_t),
                   0,
                   static_cast<size_t>(batch) * sizeof(int64_t),
                   1};
    ops.copy_rows(copies, in_place ? 3 : 2, device, false);
    for (int64_t b = 0; b < batch; ++b) ++position[b];
    od.pending_mark = ops.mark(device);
    od.pending = true;
  }

  // The tokens chosen by enqueued step `step` (counted from 0), once the device is past `mark`.
  std::vector<int64_t> collect_on_device(uint64_t mark, int64_t step) {
    OnDevice& od = *on_device;
    std::vector<int64_t> next(static_cast<size_t>(batch));
    device_ops(device).copy_to_host_after(
        next.data(), static_cast<const int64_t*>(od.chosen.raw_data()) + (step % 2) * batch,
        static_cast<size_t>(batch) * sizeof(int64_t), device, mark);
    return next;
  }

  // One decoding step on the device; with `more`, the next step is enqueued before this one's
  // tokens are read (a sequence that ends here is fed its own choice there, not pad_token_id: its
  // later tokens are not kept).
  void decode_on_device(std::vector<int64_t>* tokens, bool more) {
    OnDevice& od = *on_device;
    if (!od.pending) enqueue_on_device();
    const uint64_t mark = od.pending_mark;
    const int64_t step = od.steps - 1;
    od.pending = false;
    if (more) enqueue_on_device();
    std::vector<int64_t> next = collect_on_device(mark, step);
    accept(next);
    *tokens = next;
  }

  // Waits for a step enqueued ahead that no call will read (the generation ends or fails), so
  // its device work is done before the cache and the bound tensors are released.
  void drain() noexcept {
    if (!on_device || !on_device->pending) return;
    try {
      collect_on_device(on_device->pending_mark, on_device->steps - 1);
    } catch (...) {
    }
    on_device->pending = false;
  }

  // Copies new positions [0, count) of each present output (they follow the `capacity` past
  // slots) into cache slots [filled, filled + count) on the cache's device; slots of padding get
  // zeros. Without `wait` the device copies are only enqueued (pick() waits for them).
  void store(const std::vector<Tensor>& outs, int64_t count, const std::vector<int64_t>& valid,
             bool wait = true) {
    const size_t row = static_cast<size_t>(layout.head_dim) * dtype_size(layout.cache_dtype);
    const size_t heads = static_cast<size_t>(layout.kv_heads);
    std::vector<Tensor> keep;  // presents moved to the cache's device, alive until copied
    std::vector<RowCopy> copies;
    for (int64_t l = 0; l < layout.layers; ++l)
      for (int kv = 0; kv < 2; ++kv) {
        Tensor present = outs[kv == 0 ? present_key_out[l] : present_value_out[l]];
        const Shape want{batch, layout.kv_heads, capacity + count, layout.head_dim};
        if (present.shape() != want || present.dtype() != layout.cache_dtype)
          throw ShapeError("generate: output '" + present_name(l, kv == 0) + "' is " +
                           TensorType{present.dtype(), present.shape()}.to_string() +
                           ", expected " + TensorType{layout.cache_dtype, want}.to_string());
        if (present.device() != device) present = present.to(device);
        keep.push_back(present);
        const auto* src = static_cast<const char*>(present.raw_data());
        auto* dst = static_cast<char*>(cache[2 * l + kv].raw_data());
        // Per sequence, runs of new positions that are all real tokens or all padding: one
        // strided copy (or zeroing) over every head each.
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t j = 0; j < count;) {
            int64_t end = j + 1;
            const bool real = valid[b * count + j] != 0;
            while (end < count && (valid[b * count + end] != 0) == real) ++end;
            RowCopy c;
            c.dst = dst + (static_cast<size_t>(b) * heads * capacity + filled + j) * row;
            c.dst_pitch = static_cast<size_t>(capacity) * row;
            c.src =
                real ? src + (static_cast<size_t>(b) * heads * (capacity + count) + capacity + j) *
                                 row
                     : nullptr;
            c.src_pitch = static_cast<size_t>(capacity + count) * row;
            c.width = static_cast<size_t>(end - j) * row;
            c.rows = heads;
            copies.push_back(c);
            j = end;
          }
      }
    copy_rows_on(device, copies.data(), copies.size(), wait);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < count; ++j)
        slot_valid[b * capacity + filled + j] = valid[b * count + j];
    filled += count;
  }

  // Picks each sequence's next token from the logits of its last position.
  std::vector<int64_t> pick(const Tensor& logits, int64_t new_len) {
    if (logits.rank() != 3 || logits.shape()[0] != batch || logits.shape()[1] != new_len ||
        (layout.vocab > 0 && logits.shape()[2] != layout.vocab))
      throw ShapeError("generate: output 'logits' is " + logits.shape().to_string() +
                       ", expected [" + std::to_string(batch) + ", " + std::to_string(new_len) +
                       ", vocab]");
    const int64_t vocab = logits.shape()[2];
    std::vector<int64_t> next(static_cast<size_t>(batch));
    // Greedy over float32 logits on a device that offers it: the choice made there, and only the
    // indices copied back (a row with a NaN is decided on the host, as below).
    if ((!options.do_sample || options.top_k == 1) && logits.device().type != DeviceType::kCPU &&
        logits.dtype() == DType::kFloat32 && vocab > 0) {
      const DeviceOps& ops = device_ops(logits.device());
      const float* last_row = static_cast<const float*>(logits.raw_data()) + (new_len - 1) * vocab;
      if (ops.argmax_rows != nullptr &&
          ops.argmax_rows(last_row, batch, vocab, new_len * vocab, logits.device(), next.data()))
        return next;
    }
    const Tensor host = logits.to(Device::cpu());
    Tensor f32 = host.dtype() == DType::kFloat32 ? host : Tensor();
    std::vector<float> converted;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t at = (b * new_len + new_len - 1) * vocab;
      const float* row = nullptr;
      if (f32.defined()) {
        row = f32.data<float>() + at;
      } else {
        converted.resize(static_cast<size_t>(vocab));
        for (int64_t v = 0; v < vocab; ++v)
          converted[v] = static_cast<float>(host.item_as_double(at + v));
        row = converted.data();
      }
      next[b] = choose_token(row, vocab, options, rng, scratch);
    }
    return next;
  }

  // Records the chosen tokens: ended sequences give pad_token_id; eos ends a sequence.
  void accept(std::vector<int64_t>& next) {
    for (int64_t b = 0; b < batch; ++b) {
      if (ended[b]) {
        next[b] = options.pad_token_id;
        continue;
      }
      made[b].push_back(next[b]);
      if (options.eos_token_id >= 0 && next[b] == options.eos_token_id) ended[b] = true;
    }
    last = next;
  }

  void prefill(std::vector<int64_t>* tokens) {
    std::vector<int64_t> ids(static_cast<size_t>(batch * chunk), options.pad_token_id);
    std::vector<int64_t> valid(static_cast<size_t>(batch * chunk), 0);
    std::vector<int64_t> pos(static_cast<size_t>(batch * chunk), 0);
    for (int64_t b = 0; b < batch; ++b) {
      const auto& p = prompts[b];
      const int64_t pad = chunk - static_cast<int64_t>(p.size());
      for (size_t j = 0; j < p.size(); ++j) {
        ids[b * chunk + pad + j] = p[j];
        valid[b * chunk + pad + j] = 1;
        pos[b * chunk + pad + j] = static_cast<int64_t>(j);
      }
      position[b] = static_cast<int64_t>(p.size());
    }
    std::vector<int64_t> mask(static_cast<size_t>(batch * (capacity + chunk)), 0);
    for (int64_t b = 0; b < batch; ++b)
      std::copy(valid.begin() + b * chunk, valid.begin() + (b + 1) * chunk,
                mask.begin() + b * (capacity + chunk) + capacity);
    std::vector<Tensor> outs =
        session->run(feeds(index_tensor(ids_dtype, batch, chunk, ids), mask, chunk,
                           index_tensor(position_dtype, batch, chunk, pos)),
                     OutputPlace::kDevice);
    store(outs, chunk, valid);
    std::vector<int64_t> next = pick(outs[logits_out], chunk);
    accept(next);
    *tokens = next;
  }

  // A decoding step's attention_mask [batch, mask_columns()]: the cache slots filled so far, and
  // the step's own token (in slot `filled` for the in-place step, else after the cache).
  std::vector<int64_t> step_mask() const {
    const int64_t cols = mask_columns();
    std::vector<int64_t> mask(static_cast<size_t>(batch * cols), 0);
    for (int64_t b = 0; b < batch; ++b) {
      std::copy(slot_valid.begin() + b * capacity, slot_valid.begin() + (b + 1) * capacity,
                mask.begin() + b * cols);
      mask[b * cols + (in_place ? filled : capacity)] = 1;
    }
    return mask;
  }

  // One decoding step; `more`: the caller will ask for another.
  void decode(std::vector<int64_t>* tokens, bool more) {
    if (on_device) {
      decode_on_device(tokens, more);
      return;
    }
    const std::vector<int64_t> mask = step_mask();
    std::vector<int64_t> valid(static_cast<size_t>(batch), 1);
    const Tensor ids = index_tensor(ids_dtype, batch, 1, last);
    const Tensor positions = index_tensor(position_dtype, batch, 1, position);
    std::vector<Tensor> outs;
    if (bound_step) {
      // Where pick() waits on the device, the step and the cache copies are only enqueued: one
      // wait per token instead of three.
      const bool wait = !picks_on_device();
      std::map<std::string, Tensor> in = {
          {kInputIds, ids},
          {kAttentionMask, index_tensor(mask_dtype, batch, mask_columns(), mask)},
          {kPositionIds, positions}};
      if (in_place) in[kCacheWriteIndex] = write_index();
      outs = bound_step->run(in, wait);
      if (in_place)
        filled_in_place();
      else
        store(outs, 1, valid, wait);
    } else {
      Executable* plan = nullptr;
      if (in_place) {
        plan = in_place_step();
        if (plan == nullptr)  // the rewrite applied when the generation started
          throw InvalidModel("generate: the in-place decoding step could not be rebuilt");
        outs = plan->execute(in_place_feeds(ids, mask, positions), OutputPlace::kDevice);
        filled_in_place();
      } else {
        const std::map<std::string, Tensor> in = feeds(ids, mask, 1, positions);
        outs = session->run(in, OutputPlace::kDevice);
        store(outs, 1, valid);
        plan = session->plan_for(in);
      }
      if (!bind_tried && device.type != DeviceType::kCPU) {
        bind_tried = true;
        std::map<std::string, Tensor> cache_inputs;
        for (int64_t l = 0; l < layout.layers; ++l) {
          cache_inputs[past_name(l, true)] = cache[2 * l];
          cache_inputs[past_name(l, false)] = cache[2 * l + 1];
        }
        if (can_stay_on_device()) {
          std::map<std::string, Tensor> all_inputs = cache_inputs;
          make_on_device(all_inputs);
          bound_step = plan->bind(all_inputs);
          if (!bound_step) on_device.reset();
        }
        if (!bound_step) bound_step = plan->bind(cache_inputs);
      }
    }
    for (int64_t b = 0; b < batch; ++b) ++position[b];
    std::vector<int64_t> next = pick(outs[in_place ? in_place_logits : logits_out], 1);
    accept(next);
    *tokens = next;
    if (on_device && !on_device->position_table.defined()) start_on_device(step_mask());
  }
};

Generation::Generation(std::unique_ptr<State> state) : state_(std::move(state)) {}
Generation::~Generation() {
  if (state_) state_->drain();
}
Generation::Generation(Generation&&) noexcept = default;
Generation& Generation::operator=(Generation&& other) noexcept {
  if (state_ && state_ != other.state_) state_->drain();
  state_ = std::move(other.state_);
  return *this;
}

bool Generation::next(std::vector<int64_t>* tokens) {
  State& s = *state_;
  if (s.broken)
    throw InvalidArgument("generate: an earlier step of this generation failed; start a new one");
  const int64_t made = s.stats.new_tokens + (s.filled > 0 ? 1 : 0);
  bool all_ended = s.filled > 0;
  for (bool e : s.ended) all_ended = all_ended && e;
  if (made >= s.options.max_new_tokens || all_ended) return false;
  const auto start = std::chrono::steady_clock::now();
  try {
    if (s.filled == 0) {
      s.prefill(tokens);
      s.stats.prefill_seconds = seconds_since(start);
    } else {
      s.decode(tokens, made + 1 < s.options.max_new_tokens);
      s.stats.decode_seconds += seconds_since(start);
      ++s.stats.new_tokens;
    }
  } catch (...) {
    s.broken = true;
    s.drain();
    throw;
  }
  return true;
}

const std::vector<std::vector<int64_t>>& Generation::tokens() const {
  return state_->made;
}
const GenerateStats& Generation::stats() const {
  return state_->stats;
}

Generator::Generator(const std::string& path, CompileOptions compile, OnnxLoadOptions load)
    : cache_device_(cache_device_for(compile)),
      session_(std::make_unique<OnnxSession>(path, std::move(load), std::move(compile))) {
  const OnnxModelInfo& info = session_->info();
  auto fail = [&](const std::string& why) {
    throw InvalidModel("generate: " + path + ": " + why +
                       " (a decoder needs inputs input_ids, attention_mask, position_ids and "
                       "past_key_values.N.key/.value, outputs logits and present.N.key/.value)");
  };
  std::map<std::string, const OnnxInputInfo*> inputs;
  for (const OnnxInputInfo& in : info.inputs) {
    if (in.kind != OnnxValueKind::kTensor) fail("input '" + in.name + "' is not a tensor");
    inputs[in.name] = &in;
  }
  for (const char* name : {kInputIds, kAttentionMask, kPositionIds}) {
    auto it = inputs.find(name);
    if (it == inputs.end()) fail(std::string("no input '") + name + "'");
    if (!is_index_type(it->second->dtype) || it->second->dims.size() != 2)
      fail(std::string("input '") + name + "' must be a 2-D int64 or int32 tensor");
  }
  while (inputs.count(past_name(layout_.layers, true))) ++layout_.layers;
  if (layout_.layers == 0) fail("no input 'past_key_values.0.key'");
  for (int64_t l = 0; l < layout_.layers; ++l)
    for (bool key : {true, false}) {
      auto it = inputs.find(past_name(l, key));
      if (it == inputs.end()) fail("no input '" + past_name(l, key) + "'");
      const OnnxInputInfo& in = *it->second;
      if (in.dims.size() != 4 || in.dims[1] <= 0 || in.dims[3] <= 0)
        fail("input '" + in.name + "' must be [batch, kv_heads, past, head_dim] with fixed " +
             "kv_heads and head_dim");
      if (l == 0 && key) {
        layout_.kv_heads = in.dims[1];
        layout_.head_dim = in.dims[3];
        layout_.cache_dtype = in.dtype;
      }
      if (in.dims[1] != layout_.kv_heads || in.dims[3] != layout_.head_dim ||
          in.dtype != layout_.cache_dtype)
        fail("input '" + in.name + "' does not match past_key_values.0.key's heads, size or type");
    }
  if (static_cast<int64_t>(inputs.size()) != 3 + 2 * layout_.layers)
    for (const auto& [name, in] : inputs)
      if (name != kInputIds && name != kAttentionMask && name != kPositionIds &&
          name.rfind("past_key_values.", 0) != 0)
        fail("input '" + name + "' is not part of the decoder form");
  std::map<std::string, int> outputs;
  for (size_t k = 0; k < info.outputs.size(); ++k) outputs[info.outputs[k]] = static_cast<int>(k);
  if (!outputs.count(kLogits)) fail("no output 'logits'");
  if (static_cast<size_t>(outputs[kLogits]) < info.output_types.size()) {
    const OnnxInputInfo& logits = info.output_types[outputs[kLogits]];
    if (logits.dims.size() == 3 && logits.dims[2] > 0) layout_.vocab = logits.dims[2];
  }
  for (int64_t l = 0; l < layout_.layers; ++l)
    for (bool key : {true, false})
      if (!outputs.count(present_name(l, key))) fail("no output '" + present_name(l, key) + "'");
  if (!info.output_forms.empty())
    for (const OnnxOutputForm& form : info.output_forms)
      if (form.kind != OnnxValueKind::kTensor) fail("an output is not a tensor");
}

Generator::~Generator() = default;

Executable* Generator::plan(int64_t batch, int64_t new_len, int64_t capacity) {
  const Shape cache_shape{batch, layout_.kv_heads, capacity, layout_.head_dim};
  std::map<std::string, Shape> shapes;
  shapes[kInputIds] = Shape{batch, new_len};
  shapes[kPositionIds] = Shape{batch, new_len};
  shapes[kAttentionMask] = Shape{batch, capacity + new_len};
  for (int64_t l = 0; l < layout_.layers; ++l) {
    shapes[past_name(l, true)] = cache_shape;
    shapes[past_name(l, false)] = cache_shape;
  }
  return session_->plan_for(shapes);
}

Executable* Generator::in_place_plan(int64_t batch, int64_t capacity) {
  if (capacity < 2) return nullptr;
  // Pasts one slot short of the cache, so that every size the model derives from past + 1 is
  // the cache's; the rewrite then gives them the cache's length.
  const Shape past{batch, layout_.kv_heads, capacity - 1, layout_.head_dim};
  std::map<std::string, Shape> shapes;
  shapes[kInputIds] = Shape{batch, 1};
  shapes[kPositionIds] = Shape{batch, 1};
  shapes[kAttentionMask] = Shape{batch, capacity};
  for (int64_t l = 0; l < layout_.layers; ++l) {
    shapes[past_name(l, true)] = past;
    shapes[past_name(l, false)] = past;
  }
  const int64_t layers = layout_.layers;
  // A step that fails to compile in this form leaves the one that copies the new slots in, which
  // ran before this form existed.
  try {
    return session_->plan_edited(shapes, "cache in place",
                                 [layers](Graph& g) { return write_cache_in_place(g, layers); });
  } catch (const Error&) {
    return nullptr;
  }
}

Executable* Generator::step_plan(int64_t batch, int64_t cache_length) {
  if (batch < 1 || cache_length < 1)
    throw InvalidArgument("generate: step_plan needs a positive batch and cache length");
  Executable* in_place = in_place_plan(batch, cache_length);
  return in_place != nullptr ? in_place : plan(batch, 1, cache_length);
}

void Generator::set_max_length(int64_t n) {
  if (n < 0) throw InvalidArgument("generate: max_length must not be negative");
  max_length_ = n;
}

Generation Generator::start(const std::vector<std::vector<int64_t>>& prompts,
                            const GenerateOptions& options) {
  check_options(options);
  if (prompts.empty()) throw InvalidArgument("generate: input_ids holds no sequence");
  size_t longest = 0;
  for (size_t b = 0; b < prompts.size(); ++b) {
    if (prompts[b].empty())
      throw InvalidArgument("generate: input_ids sequence " + std::to_string(b) + " is empty");
    longest = std::max(longest, prompts[b].size());
    for (size_t j = 0; j < prompts[b].size(); ++j) {
      int64_t id = prompts[b][j];
      if (id < 0 || (layout_.vocab > 0 && id >= layout_.vocab))
        throw InvalidArgument("generate: input_ids[" + std::to_string(b) + "][" +
                              std::to_string(j) + "] = " + std::to_string(id) +
                              " is outside the vocabulary [0, " +
                              (layout_.vocab > 0 ? std::to_string(layout_.vocab) : "vocab") + ")");
    }
  }
  if (layout_.vocab > 0 && options.pad_token_id >= layout_.vocab)
    throw InvalidArgument("generate: pad_token_id " + std::to_string(options.pad_token_id) +
                          " is outside the vocabulary");
  const int64_t total = static_cast<int64_t>(longest) + options.max_new_tokens;
  if (max_length_ > 0 && total > max_length_)
    throw InvalidArgument("generate: input_ids of " + std::to_string(longest) + " tokens plus " +
                          std::to_string(options.max_new_tokens) +
                          " new tokens exceed the maximum length " + std::to_string(max_length_));

  const OnnxModelInfo& info = session_->info();
  auto s = std::make_unique<Generation::State>();
  s->session = session_.get();
  s->layout = layout_;
  for (const OnnxInputInfo& in : info.inputs) {
    if (in.name == kInputIds) s->ids_dtype = in.dtype;
    if (in.name == kAttentionMask) s->mask_dtype = in.dtype;
    if (in.name == kPositionIds) s->position_dtype = in.dtype;
  }
  for (size_t k = 0; k < info.outputs.size(); ++k) {
    const std::string& name = info.outputs[k];
    if (name == kLogits) {
      s->logits_out = static_cast<int>(k);
      s->float32_logits =
          k < info.output_types.size() && info.output_types[k].dtype == DType::kFloat32;
    }
  }
  for (int64_t l = 0; l < layout_.layers; ++l)
    for (size_t k = 0; k < info.outputs.size(); ++k) {
      if (info.outputs[k] == present_name(l, true))
        s->present_key_out.push_back(static_cast<int>(k));
      if (info.outputs[k] == present_name(l, false))
        s->present_value_out.push_back(static_cast<int>(k));
    }
  s->options = options;
  s->prompts = prompts;
  s->batch = static_cast<int64_t>(prompts.size());
  s->chunk = round_up(static_cast<int64_t>(longest), kPromptStep);
  s->capacity = round_up(s->chunk + options.max_new_tokens - 1, kCacheStep);
  const Shape cache_shape{s->batch, layout_.kv_heads, s->capacity, layout_.head_dim};
  s->device = cache_device_;
  for (int64_t l = 0; l < 2 * layout_.layers; ++l)
    s->cache.push_back(Tensor::zeros(cache_shape, layout_.cache_dtype, s->device));
  s->slot_valid.assign(static_cast<size_t>(s->batch * s->capacity), 0);
  s->position.assign(static_cast<size_t>(s->batch), 0);
  s->ended.assign(static_cast<size_t>(s->batch), false);
  s->made.resize(static_cast<size_t>(s->batch));
  s->rng.seed(options.seed);
  s->stats.batch = s->batch;
  s->stats.prompt_tokens = static_cast<int64_t>(longest);
  s->stats.cache_length = s->capacity;
  const auto compile_start = std::chrono::steady_clock::now();
  plan(s->batch, s->chunk, s->capacity);
  Executable* in_place = in_place_plan(s->batch, s->capacity);
  s->in_place = in_place != nullptr;
  s->stats.cache_in_place = s->in_place;
  if (in_place != nullptr) {
    s->in_place_step = [this, batch = s->batch, capacity = s->capacity] {
      return in_place_plan(batch, capacity);
    };
    const auto& outs = in_place->outputs();
    for (size_t k = 0; k < outs.size(); ++k)
      if (outs[k].name == kLogits) s->in_place_logits = static_cast<int>(k);
  } else {
    plan(s->batch, 1, s->capacity);
  }
  s->stats.compile_seconds = seconds_since(compile_start);
  return Generation(std::move(s));
}

std::vector<std::vector<int64_t>> Generator::generate(
    const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
    const std::function<void(const std::vector<int64_t>&)>& on_step, GenerateStats* stats) {
  Generation g = start(prompts, options);
  std::vector<int64_t> step;
  while (g.next(&step))
    if (on_step) on_step(step);
  if (stats != nullptr) *stats = g.stats();
  return g.tokens();
}

}  // namespace lumen
