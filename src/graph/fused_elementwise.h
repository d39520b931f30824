// The program a FusedElementwise node runs: what its `code` and `consts` attributes mean, shared
// by the schema that validates them, the fuse-elementwise pass that writes them and the kernels
// that run them.
//
// A FusedElementwise node has N >= 1 float32 inputs, all broadcast (NumPy rules) to one output
// shape, and computes its output one element at a time with a straight-line program over float
// registers. Registers 0 .. N-1 hold the inputs' elements and are read-only; registers N ..
// kMaxRegisters-1 are temporaries. `code` is a flat list of instructions, kFields int64s each:
// (opcode, dst, a, b). The output is the last instruction's dst.
//
// Operands: a value r >= 0 names register r (an input, or a temporary already written); a value
// -(k+1) < 0 names the immediate consts[k].
//   binary ops (Add .. Min):   dst = op(a, b); a and b registers or immediates, not both
//                              immediates.
//   Pow:                       dst = a ^ b; a a register, b an immediate (constant exponent).
//   unary ops without params:  dst = op(a); a a register, b 0.
//   unary ops with params:     dst = op(a; consts[k], ...); a a register, b = -(k+1) naming the
//                              first of num_params(op) consecutive immediates:
//                              Clip (min, max), LeakyRelu (alpha), HardSigmoid (alpha, beta).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lumen {

// The opcodes of a FusedElementwise program (the values stored in `code`).
enum class EwOp : int64_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kPow,
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kNeg,
  kAbs,
  kSqrt,
  kReciprocal,
  kErf,
  kClip,
  kLeakyRelu,
  kHardSigmoid,
  kHardSwish,
  kSoftplus,
  kSwish,     // x * sigmoid(x) (SiLU)
  kGeluErf,   // Gelu, approximate = "none"
  kGeluTanh,  // Gelu, approximate = "tanh"
  kCount,
};

// One decoded instruction: dst = op(a, b) under the operand rules above.
struct EwInstr {
  EwOp op = EwOp::kAdd;
  int dst = 0;
  int a = 0;
  int b = 0;
};

// Limits of a program, checked by decode_ew_program.
inline constexpr int kEwFields = 4;
inline constexpr int kEwMaxRegisters = 32;
inline constexpr int kEwMaxInstructions = 512;

// "Add", "Clip", ... for messages and printing.
const char* ew_op_name(EwOp op);
// True for the ops that take two operands (Add, Sub, Mul, Div, Max, Min, Pow).
bool ew_is_binary(EwOp op);
// How many immediates a unary op reads from consts (Clip 2, LeakyRelu 1, HardSigmoid 2, else 0).
int ew_num_params(EwOp op);
// The immediate index an operand names (-(k+1) -> k).
inline int ew_immediate(int operand) {
  return -operand - 1;
}

// Decodes and checks `code` for a node with `num_inputs` inputs and `num_consts` immediates:
// opcodes, arity, registers in range and written before they are read, immediates in range,
// N >= 1, at least one instruction. On a problem returns an empty list and sets *error to the
// reason ("instruction 3: register 40 is out of range"); never reads outside `code`.
std::vector<EwInstr> decode_ew_program(const std::vector<int64_t>& code, size_t num_consts,
                                       int num_inputs, std::string* error);

// The optional `perms` attribute: for each input in order, a permutation of its rank dims, the
// input read as Transpose(input, perm) before it is broadcast (the fold-layout-transposes pass
// reads a transposed tensor in place that way). Sets (*perms)[k] to input k's permutation, empty
// where it is the identity or `flat` is empty. On a malformed list (wrong length, not a
// permutation) returns false and sets *error; never reads outside `flat`.
bool decode_ew_perms(const std::vector<int64_t>& flat, const std::vector<int>& ranks,
                     std::vector<std::vector<int64_t>>* perms, std::string* error);

// Input `in`'s shape once permuted by `perm` (empty: the identity).
std::vector<int64_t> ew_permuted_dims(const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& perm);

// The element strides, along each of `out`'s dims, of a contiguous input of dims `in` read
// through `perm` (empty: the identity) and broadcast to `out` (0 along broadcast dims).
std::vector<int64_t> ew_input_strides(const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& perm,
                                      const std::vector<int64_t>& out);

}  // namespace lumen
