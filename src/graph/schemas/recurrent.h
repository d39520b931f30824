// Resolved attributes and dimensions of RNN, GRU and LSTM: computed by the schema (which
// validates them) and again by the CPU kernel, so that both read the ONNX rules the same way.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/node_context.h"

namespace lumen {

enum class RnnActKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus,
};

// One activation with its alpha and beta (ONNX defaults filled in where not given).
struct RnnActivation {
  RnnActKind kind = RnnActKind::kTanh;
  float alpha = 0.0f;
  float beta = 0.0f;
};

struct RecurrentSpec {
  int gates = 1;                // 1 (RNN), 3 (GRU: z, r, h) or 4 (LSTM: i, o, f, c)
  int activations_per_dir = 1;  // RNN: f; GRU: f, g; LSTM: f, g, h
  int num_directions = 1;
  bool reverse = false;      // direction == "reverse" (bidirectional runs forward then reverse)
  bool batch_major = false;  // layout == 1
  int64_t seq_length = 0, batch = 0, input_size = 0, hidden = 0;
  bool has_clip = false;
  float clip = 0.0f;
  bool linear_before_reset = false;        // GRU
  bool input_forget = false;               // LSTM
  std::vector<RnnActivation> activations;  // activations_per_dir per direction
};

// Reads and checks a recurrent node's attributes and input shapes. Throws InvalidModel for bad
// attributes and ShapeError for inputs that do not fit.
RecurrentSpec recurrent_spec(const NodeContext& ctx);

}  // namespace lumen
