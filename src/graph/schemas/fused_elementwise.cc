// Schema of FusedElementwise, made by the optimizer (fuse-elementwise pass), never by importers: a
// chain or tree of element-wise float32 ops run as one loop over the output. The program format
// is in graph/fused_elementwise.h; a malformed program fails here, at the node, so a hostile
// model never reaches a kernel with it.
#include "graph/fused_elementwise.h"

#include <iterator>
#include <string>
#include <vector>

#include "graph/schema.h"
#include "graph/schemas/elementwise_infer.h"

namespace lumen {

const char* ew_op_name(EwOp op) {
  static constexpr const char* kNames[] = {
      "Add",      "Sub",        "Mul",     "Div",     "Max",       "Min",         "Pow",
      "Relu",     "Sigmoid",    "Tanh",    "Exp",     "Log",       "Neg",         "Abs",
      "Sqrt",     "Reciprocal", "Erf",     "Clip",    "LeakyRelu", "HardSigmoid", "HardSwish",
      "Softplus", "Swish",      "GeluErf", "GeluTanh"};
  static_assert(std::size(kNames) == static_cast<size_t>(EwOp::kCount));
  auto k = static_cast<size_t>(op);
  return k < std::size(kNames) ? kNames[k] : "?";
}

bool ew_is_binary(EwOp op) {
  return op <= EwOp::kPow;
}

int ew_num_params(EwOp op) {
  switch (op) {
    case EwOp::kClip:
    case EwOp::kHardSigmoid:
      return 2;
    case EwOp::kLeakyRelu:
      return 1;
    default:
      return 0;
  }
}

std::vector<EwInstr> decode_ew_program(const std::vector<int64_t>& code, size_t num_consts,
                                       int num_inputs, std::string* error) {
  auto fail = [&](const std::string& why) {
    *error = why;
    return std::vector<EwInstr>{};
  };
  if (num_inputs < 1 || num_inputs >= kEwMaxRegisters)
    return fail("takes 1 to " + std::to_string(kEwMaxRegisters - 1) + " inputs, got " +
                std::to_string(num_inputs));
  if (code.empty() || code.size() % kEwFields != 0)
    return fail("'code' must hold a positive multiple of " + std::to_string(kEwFields) +
                " integers (opcode, dst, a, b), got " + std::to_string(code.size()));
  const size_t count = code.size() / kEwFields;
  if (count > static_cast<size_t>(kEwMaxInstructions))
    return fail("the program has " + std::to_string(count) + " instructions, at most " +
                std::to_string(kEwMaxInstructions) + " are allowed");
  std::vector<bool> written(kEwMaxRegisters, false);
  for (int r = 0; r < num_inputs; ++r) written[r] = true;
  std::vector<EwInstr> program;
  program.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const int64_t* f = code.data() + i * kEwFields;
    const std::string at = "instruction " + std::to_string(i) + ": ";
    if (f[0] < 0 || f[0] >= static_cast<int64_t>(EwOp::kCount))
      return fail(at + "unknown opcode " + std::to_string(f[0]));
    const auto op = static_cast<EwOp>(f[0]);
    const std::string what = at + ew_op_name(op) + ": ";
    // A register operand: in range and already written.
    auto reg_ok = [&](int64_t r) {
      return r >= 0 && r < kEwMaxRegisters && written[static_cast<size_t>(r)];
    };
    // An immediate operand naming `n` consecutive consts.
    auto imm_ok = [&](int64_t v, int n) {
      return v < 0 && v >= -static_cast<int64_t>(num_consts) &&
             static_cast<size_t>(-v - 1) + static_cast<size_t>(n) <= num_consts;
    };
    auto operand = [&](int64_t v) { return v >= 0 ? reg_ok(v) : imm_ok(v, 1); };
    if (ew_is_binary(op)) {
      if (op == EwOp::kPow) {
        if (!reg_ok(f[2]) || !imm_ok(f[3], 1))
          return fail(what + "needs a written register and an immediate exponent, got " +
                      std::to_string(f[2]) + ", " + std::to_string(f[3]));
      } else if (!operand(f[2]) || !operand(f[3]) || (f[2] < 0 && f[3] < 0)) {
        return fail(what + "operands " + std::to_string(f[2]) + ", " + std::to_string(f[3]) +
                    " are not written registers or immediates in range (at most one immediate)");
      }
    } else {
      const int params = ew_num_params(op);
      if (!reg_ok(f[2]))
        return fail(what + "operand " + std::to_string(f[2]) + " is not a written register");
      if (params == 0 ? f[3] != 0 : !imm_ok(f[3], params))
        return fail(what +
                    (params == 0
                         ? "b must be 0, got "
                         : "b must name " + std::to_string(params) + " immediates in range, got ") +
                    std::to_string(f[3]));
    }
    if (f[1] < num_inputs || f[1] >= kEwMaxRegisters)
      return fail(what + "destination " + std::to_string(f[1]) + " is not a temporary register (" +
                  std::to_string(num_inputs) + " to " + std::to_string(kEwMaxRegisters - 1) + ")");
    written[static_cast<size_t>(f[1])] = true;
    program.push_back({op, static_cast<int>(f[1]), static_cast<int>(f[2]), static_cast<int>(f[3])});
  }
  return program;
}

bool decode_ew_perms(const std::vector<int64_t>& flat, const std::vector<int>& ranks,
                     std::vector<std::vector<int64_t>>* perms, std::string* error) {
  perms->assign(ranks.size(), {});
  if (flat.empty()) return true;
  size_t want = 0;
  for (int r : ranks) want += static_cast<size_t>(r);
  if (flat.size() != want) {
    *error = "'perms' must hold " + std::to_string(want) +
             " integers (a permutation of each input's dims), got " + std::to_string(flat.size());
    return false;
  }
  size_t at = 0;
  for (size_t k = 0; k < ranks.size(); ++k) {
    const int rank = ranks[k];
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    std::vector<int64_t> perm(flat.begin() + static_cast<std::ptrdiff_t>(at),
                              flat.begin() + static_cast<std::ptrdiff_t>(at + rank));
    at += static_cast<size_t>(rank);
    bool identity = true;
    for (int d = 0; d < rank; ++d) {
      const int64_t p = perm[static_cast<size_t>(d)];
      if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) {
        *error = "'perms' of input " + std::to_string(k) + " is not a permutation of its " +
                 std::to_string(rank) + " dims";
        return false;
      }
      seen[static_cast<size_t>(p)] = true;
      identity = identity && p == d;
    }
    if (!identity) (*perms)[k] = std::move(perm);
  }
  return true;
}

std::vector<int64_t> ew_permuted_dims(const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& perm) {
  if (perm.empty()) return in;
  std::vector<int64_t> out(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) out[d] = in[static_cast<size_t>(perm[d])];
  return out;
}

std::vector<int64_t> ew_input_strides(const std::vector<int64_t>& in,
                                      const std::vector<int64_t>& perm,
                                      const std::vector<int64_t>& out) {
  std::vector<int64_t> contiguous(in.size(), 1);
  for (size_t d = in.size(); d-- > 1;) contiguous[d - 1] = contiguous[d] * in[d];
  const std::vector<int64_t> dims = ew_permuted_dims(in, perm);
  std::vector<int64_t> strides(out.size(), 0);
  const size_t lead = out.size() - dims.size();  // right-aligned, as NumPy broadcasts
  for (size_t d = 0; d < dims.size(); ++d) {
    const size_t src = perm.empty() ? d : static_cast<size_t>(perm[d]);
    strides[lead + d] = dims[d] == 1 && out[lead + d] != 1 ? 0 : contiguous[src];
  }
  return strides;
}

namespace {

void infer_fused_elementwise(InferContext& ctx) {
  std::vector<int> ins = all_inputs(ctx);
  for (int i : ins) {
    if (!ctx.has_input(i)) ctx.fail_model("input " + std::to_string(i) + " is missing");
    require_input(ctx, i, ctx.input_dtype(i) == DType::kFloat32, "float32");
  }
  std::string error;
  std::vector<float> consts = ctx.attr_floats("consts", {});
  if (decode_ew_program(ctx.attr_ints("code"), consts.size(), ctx.num_inputs(), &error).empty())
    ctx.fail_model(error);
  std::vector<int> ranks;
  ranks.reserve(ins.size());
  for (int i : ins) ranks.push_back(ctx.input_shape(i).rank());
  std::vector<std::vector<int64_t>> perms;
  if (!decode_ew_perms(ctx.attr_ints("perms", {}), ranks, &perms, &error)) ctx.fail_model(error);
  Shape out;
  for (size_t k = 0; k < ins.size(); ++k) {
    const Shape in(ew_permuted_dims(ctx.input_shape(ins[k]).dims(), perms[k]));
    try {
      out = k == 0 ? in : broadcast_shapes(out, in);
    } catch (const ShapeError&) {
      ctx.fail_shape("input " + std::to_string(k) + " (" + in.to_string() +
                     " as read) does not broadcast with " + out.to_string());
    }
  }
  ctx.set_output(0, DType::kFloat32, out);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(FusedElementwise, {.min_inputs = 1,
                                         .max_inputs = kEwMaxRegisters - 1,
                                         .attrs = {{"code", AttrType::kInts, true},
                                                   {"consts", AttrType::kFloats},
                                                   {"perms", AttrType::kInts}},
                                         .infer = &infer_fused_elementwise});

}  // namespace lumen
