// Token-by-token generation with a key/value cache, for ONNX decoders in the Hugging Face / Optimum
// form: inputs input_ids [batch, seq], attention_mask [batch, past + seq], position_ids
// [batch, seq] and past_key_values.N.key / .value [batch, kv_heads, past, head_dim]; outputs
// logits [batch, seq, vocab] and present.N.key / .value [batch, kv_heads, past + seq, head_dim].
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lumen/onnx.h"

namespace lumen {

// How to choose each new token. Greedy (the most likely token, the first on a tie) unless
// do_sample; sampling draws from softmax(logits / temperature) after keeping the top_k most likely
// (0: all) and then the smallest set whose probability reaches top_p (1: all).
struct GenerateOptions {
  int64_t max_new_tokens = 32;  // at least 1
  bool do_sample = false;
  float temperature = 1.0f;   // > 0, with do_sample
  int64_t top_k = 0;          // >= 0
  float top_p = 1.0f;         // in (0, 1]
  int64_t eos_token_id = -1;  // a sequence that makes it stops there; < 0: none
  int64_t pad_token_id = 0;   // fed at padding positions, and after a sequence's end in results
  uint64_t seed = 0;          // the same seed, prompts and options give the same tokens
};

// What one generation did and how fast.
struct GenerateStats {
  int64_t batch = 0;
  int64_t prompt_tokens = 0;    // the longest prompt
  int64_t new_tokens = 0;       // decoding steps taken (the first token comes from the prefill)
  double prefill_seconds = 0;   // the prompt's run, including the first token's choice
  double decode_seconds = 0;    // every later step
  int64_t cache_length = 0;     // key/value slots per sequence (the static cache's size)
  bool cache_in_place = false;  // decoding steps write the cache in place (Generator)
  double compile_seconds = 0;   // building the prompt's and the step's plans, where they were new
  // Tokens per second, counting every sequence of the batch.
  double prefill_tokens_per_second() const;
  double decode_tokens_per_second() const;
};

// A decoder's cache layout, read from its declared inputs and outputs.
struct DecoderLayout {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab = 0;  // 0 when the model leaves it symbolic (read from the first logits)
  DType cache_dtype = DType::kFloat32;
  // "12 layers, 12 kv heads x 64, vocab 50257, float32 cache"
  std::string to_string() const;
};

class Generator;

// One generation in progress (Generator::start): each next() runs one step, the prompt first.
// Holds the cache for the maximum length, so steps never reallocate it; a step that throws leaves
// the generation unusable (next() then throws InvalidArgument) but the Generator usable.
class Generation {
 public:
  ~Generation();
  Generation(Generation&&) noexcept;
  Generation& operator=(Generation&&) noexcept;
  // The next token of every sequence (pad_token_id for one already ended); false once every
  // sequence has ended or max_new_tokens were made.
  bool next(std::vector<int64_t>* tokens);
  // The tokens made so far per sequence, each up to and including its eos.
  const std::vector<std::vector<int64_t>>& tokens() const;
  const GenerateStats& stats() const;

 private:
  friend class Generator;
  struct State;
  explicit Generation(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Generates from an ONNX decoder. The cache is static: each generation preallocates
// kv slots for its prompt plus max_new_tokens (rounded up to a multiple of kCacheStep), masks the
// unused ones through attention_mask and feeds positions through position_ids, so every decoding
// step runs one compiled plan (the prompt another) and plans are reused across generations of the
// same size class. Where the model's presents are Concat(past, new) (every exporter's form), the
// decoding step writes each new key and value into the cache in place and attends over the cache
// where it lies (onnx/cache_in_place.h); otherwise it makes each present whole and the new slot is
// copied into the cache. Thread-safe: several generations may run at once.
class Generator {
 public:
  // Cache lengths and prompt lengths are rounded up to multiples of these (fewer distinct plans).
  static constexpr int64_t kCacheStep = 64;
  static constexpr int64_t kPromptStep = 16;

  // Reads and checks the model (what OnnxSession throws); InvalidModel when its inputs and
  // outputs are not the decoder form above, naming what is missing or mismatched.
  explicit Generator(const std::string& path, CompileOptions compile = {},
                     OnnxLoadOptions load = {});
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  const DecoderLayout& layout() const { return layout_; }
  // Checks the prompts (token id lists, one per sequence, left-padded to the longest when they
  // differ; none empty) and options, and readies a generation: the cache is allocated and the
  // plans for the prompt and for one step are compiled now where they are new. InvalidArgument
  // naming input_ids for an empty batch or prompt, an id outside [0, vocab), max_new_tokens < 1, a
  // bad sampling option, or a prompt plus max_new_tokens beyond max_length (when set).
  Generation start(const std::vector<std::vector<int64_t>>& prompts,
                   const GenerateOptions& options);
  // start() and next() to the end: the new tokens per sequence. on_step, when given, sees each
  // step's tokens as they come.
  std::vector<std::vector<int64_t>> generate(
      const std::vector<std::vector<int64_t>>& prompts, const GenerateOptions& options,
      const std::function<void(const std::vector<int64_t>&)>& on_step = {},
      GenerateStats* stats = nullptr);
  // The compiled plan of one decoding step at this batch and cache length (compiled now if new;
  // the in-place form where the model allows it): for tools that show where the step runs
  // (Executable::summary).
  Executable* step_plan(int64_t batch, int64_t cache_length);
  // The longest prompt plus new tokens a generation may hold; 0 (the default) for no limit but
  // the model's own (a position beyond its table fails in the model, naming the node).
  void set_max_length(int64_t n);
  int64_t max_length() const { return max_length_; }
  OnnxSession& session() { return *session_; }
  // Where generations keep their cache: the GPU when the compile options use CUDA, else the host.
  Device cache_device() const { return cache_device_; }

 private:
  // The plan for calls of new_len tokens over a cache of `capacity` slots.
  Executable* plan(int64_t batch, int64_t new_len, int64_t capacity);
  // The decoding step over a cache of `capacity` slots that writes it in place, or null where the
  // model's form does not allow it.
  Executable* in_place_plan(int64_t batch, int64_t capacity);
  Device cache_device_;
  std::unique_ptr<OnnxSession> session_;
  DecoderLayout layout_;
  int64_t max_length_ = 0;
};

}  // namespace lumen
