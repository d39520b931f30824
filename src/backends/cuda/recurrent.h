// Launchers of the CUDA cell kernels of RNN, GRU and LSTM (recurrent.cu); the matrix products
// around them are cuBLASLt's (recurrent_op.cc). float32, every ONNX activation, clip, peepholes,
// input_forget, both GRU forms, sequence_lens, both layouts. Plain C++ types, so the kernel class
// needs no CUDA C++.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/index_check.h"

namespace lumen::cuda {

// graph/schemas/recurrent.h's RnnActKind, for device code.
struct RnnAct {
  int kind = 1;  // RnnActKind's value
  float alpha = 0.f, beta = 0.f;
};

// One direction of one recurrent node.
struct RnnCellDesc {
  int gates = 1;  // 1 (RNN), 3 (GRU: z, r, h), 4 (LSTM: i, o, f, c)
  int64_t seq = 0, batch = 0, hidden = 0, dirs = 1, dir = 0;
  bool reverse = false, batch_major = false, has_clip = false;
  bool linear_before_reset = false, input_forget = false;
  float clip = 0.f;
  RnnAct acts[3];
  // sequence_lens (int32 or int64, null: every entry has seq steps): an entry outside [0, seq]
  // is reported through `check` and runs no step.
  const void* lens = nullptr;
  bool lens_int64 = false;
  IndexCheck check;
};

// h (and c) of every batch entry <- the initial state of direction d (null: zeros).
void launch_rnn_init(const RnnCellDesc& d, const float* init_h, const float* init_c, float* h,
                     float* c, cudaStream_t stream);

// GRU with linear_before_reset = 0, before the cell: r = f(xw_r + hr_r + Wb_r + Rb_r) and
// rh = r (.) h, for the second product (rh Rh^T).
void launch_gru_reset(const RnnCellDesc& d, int64_t step, const float* xw, const float* hr,
                      const float* bias, const float* h, float* rh, cudaStream_t stream);

// One step of every batch entry: the gate equations over xw (X W^T, all steps, X's row order),
// hr (h R^T for this step, [batch, gates * hidden]), hh (GRU without linear_before_reset:
// (r (.) h) Rh^T, [batch, hidden]), the node's bias (null: none) and peepholes (null: none);
// updates h and c in place and writes the step's row of y (null: not wanted).
void launch_rnn_cell(const RnnCellDesc& d, int64_t step, const float* xw, const float* hr,
                     const float* hh, const float* bias, const float* peep, float* h, float* c,
                     float* y, cudaStream_t stream);

// y_h and y_c (null: not wanted) <- the final h and c of direction d.
void launch_rnn_final(const RnnCellDesc& d, const float* h, const float* c, float* y_h, float* y_c,
                      cudaStream_t stream);

}  // namespace lumen::cuda
