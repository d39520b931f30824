// Matrix products: MatMul, Gemm and FusedMatMul (bias, residual and activation in the epilogue)
// through the tiled shaders (shaders/gemm_tiled.comp, gemm.comp for short products) that read
// every operand by strides, split along k where the tiles alone leave the GPU idle.
#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <vector>

#include "backends/vulkan/gemm.h"
#include "backends/vulkan/vulkan_context.h"
#include "graph/op_kind.h"

namespace lumen::vulkan {
namespace {

// The geometry of op(A) x op(B) with numpy.matmul's batching: A's batch folded into its rows where
// B has none (one product of batch * m rows), else one product per batch (z of the dispatch) with
// one operand shared or both batched alike. False for other batch broadcasts.
struct Product {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t a_bs = 0, a_rs = 0, a_cs = 0, b_bs = 0, b_rs = 0, b_cs = 0;
};

bool plan_product(Shape a, Shape b, bool trans_a, bool trans_b, Product* p) {
  if (a.rank() == 1) a = Shape({1, a[0]});
  if (b.rank() == 1) b = Shape({b[0], 1});
  const int64_t rows = a[-2], cols = a[-1], b_rows = b[-2], b_cols = b[-1];
  p->m = trans_a ? cols : rows;
  p->k = trans_a ? rows : cols;
  p->n = trans_b ? b_rows : b_cols;
  p->a_rs = trans_a ? 1 : cols;
  p->a_cs = trans_a ? cols : 1;
  p->b_rs = trans_b ? 1 : b_cols;
  p->b_cs = trans_b ? b_cols : 1;
  std::vector<int64_t> ab(a.dims().begin(), a.dims().end() - 2);
  std::vector<int64_t> bb(b.dims().begin(), b.dims().end() - 2);
  int64_t na = 1, nb = 1;
  for (int64_t d : ab) na *= d;
  for (int64_t d : bb) nb *= d;
  if (nb == 1 && !trans_a) {
    p->m *= na;
    p->batch = 1;
  } else if (nb == 1) {
    p->batch = na;
    p->a_bs = rows * cols;
  } else if (na == 1) {
    p->batch = nb;
    p->b_bs = b_rows * b_cols;
  } else {
    while (ab.size() < bb.size()) ab.insert(ab.begin(), 1);
    while (bb.size() < ab.size()) bb.insert(bb.begin(), 1);
    if (ab != bb) return false;
    p->batch = na;
    p->a_bs = rows * cols;
    p->b_bs = b_rows * b_cols;
  }
  return p->batch <= 65535;
}

// The activation code of a FusedMatMul (shaders/common.glsl), -1 where it has none.
int activation_code(const std::string& act) {
  static const std::pair<const char*, int> kCodes[] = {
      {"", 0},     {"Relu", 1},      {"LeakyRelu", 2}, {"Clip", 3},    {"Sigmoid", 4},
      {"Tanh", 5}, {"HardSwish", 7}, {"Swish", 8},     {"GeluErf", 9}, {"GeluTanh", 10}};
  for (const auto& [name, code] : kCodes)
    if (act == name) return code;
  return -1;
}

// A product kernel: geometry from the tensors at run time, the epilogue from the node.
struct Epilogue {
  int act = 0;
  float act_a = 0.f, act_b = 0.f, alpha = 1.f, beta = 0.f;
  bool trans_a = false, trans_b = false;
  int c_input = -1;       // Gemm's C or FusedMatMul's bias
  bool bias_row = false;  // C is a bias row [N]
  int d_input = -1;       // FusedMatMul's residual Z
};

std::unique_ptr<Kernel> make_product(const Epilogue& e) {
  return make_fn_kernel([e](KernelContext& k) {
    const Tensor& a = k.inputs[0];
    const Tensor& b = k.inputs[1];
    Tensor& y = k.outputs[0];
    Product pr;
    if (!plan_product(a.shape(), b.shape(), e.trans_a, e.trans_b, &pr))
      throw ShapeError("vulkan: MatMul batch dims " + a.shape().to_string() + " x " +
                       b.shape().to_string() + " are not supported");
    if (y.numel() == 0) return;
    GemmPush push;
    push.a = address(a);
    push.b = address(b);
    push.y = address(y);
    push.m = static_cast<int32_t>(pr.m);
    push.n = static_cast<int32_t>(pr.n);
    push.k = static_cast<int32_t>(pr.k);
    push.a_bs = static_cast<int32_t>(pr.a_bs);
    push.a_rs = static_cast<int32_t>(pr.a_rs);
    push.a_cs = static_cast<int32_t>(pr.a_cs);
    push.b_bs = static_cast<int32_t>(pr.b_bs);
    push.b_rs = static_cast<int32_t>(pr.b_rs);
    push.b_cs = static_cast<int32_t>(pr.b_cs);
    push.alpha = e.alpha;
    push.beta = e.beta;
    push.act_a = e.act_a;
    push.act_b = e.act_b;
    if (e.c_input >= 0 && k.inputs.size() > static_cast<size_t>(e.c_input) &&
        k.inputs[e.c_input].defined() && e.beta != 0.f) {
      const Tensor& c = k.inputs[e.c_input];
      push.c = address(c);
      if (e.bias_row) {
        push.c_cs = 1;
      } else {  // Gemm's C, broadcast to [M, N]
        const Shape& cs = c.shape();
        const int64_t cm = cs.rank() == 2 ? cs[0] : 1, cn = cs.rank() >= 1 ? cs[-1] : 1;
        push.c_rs = cm == 1 ? 0 : static_cast<int32_t>(cn);
        push.c_cs = cn == 1 ? 0 : 1;
      }
    }
    if (e.d_input >= 0 && k.inputs.size() > static_cast<size_t>(e.d_input) &&
        k.inputs[e.d_input].defined()) {
      push.d = address(k.inputs[e.d_input]);
      push.d_rs = push.n;
      push.d_cs = 1;
      push.d_bs = push.m * push.n;
    }
    if (pr.k == 0) {
      push.k = 0;  // the shader's loop does nothing: Y = epilogue(0)
    }
    enqueue_gemm(stream_of(k), push, pr.batch, e.act, y.dtype());
  });
}

std::string check_product(const NodeContext& ctx, bool trans_a, bool trans_b) {
  std::string why = require_float(ctx);
  if (!why.empty()) return why;
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (!a.is_static() || !b.is_static()) return "the operand shapes are known only at run time";
  Product p;
  if (!plan_product(a, b, trans_a, trans_b, &p))
    return "batch dims " + a.to_string() + " x " + b.to_string() +
           " broadcast partly (one operand must have no batch, or both the same)";
  return "";
}

std::string check_matmul(const NodeContext& ctx) {
  return check_product(ctx, false, false);
}

std::unique_ptr<Kernel> make_matmul(const NodeContext& /*ctx*/) {
  return make_product(Epilogue{});
}

std::string check_gemm(const NodeContext& ctx) {
  std::string why =
      check_product(ctx, ctx.attr_int("transA", 0) != 0, ctx.attr_int("transB", 0) != 0);
  if (!why.empty()) return why;
  if (ctx.input_shape(0).rank() != 2 || ctx.input_shape(1).rank() != 2)
    return "A and B must be 2-D";
  if (ctx.has_input(2) && ctx.input_shape(2).rank() > 2) return "C has rank above 2";
  return "";
}

std::unique_ptr<Kernel> make_gemm(const NodeContext& ctx) {
  Epilogue e;
  e.trans_a = ctx.attr_int("transA", 0) != 0;
  e.trans_b = ctx.attr_int("transB", 0) != 0;
  e.alpha = ctx.attr_float("alpha", 1.f);
  e.beta = ctx.attr_float("beta", 1.f);
  if (ctx.has_input(2)) e.c_input = 2;
  return make_product(e);
}

std::string check_fused_matmul(const NodeContext& ctx) {
  if (activation_code(ctx.attr_string("activation", "")) < 0) return "unknown activation";
  if (ctx.num_inputs() > 4 && ctx.has_input(4)) return "no norm epilogue";
  return check_product(ctx, ctx.attr_int("trans_a", 0) != 0, ctx.attr_int("trans_b", 0) != 0);
}

std::unique_ptr<Kernel> make_fused_matmul(const NodeContext& ctx) {
  Epilogue e;
  e.trans_a = ctx.attr_int("trans_a", 0) != 0;
  e.trans_b = ctx.attr_int("trans_b", 0) != 0;
  e.act = activation_code(ctx.attr_string("activation", ""));
  e.act_a = ctx.attr_float("activation_alpha", 0.f);
  e.act_b = ctx.attr_float("activation_beta", 0.f);
  if (ctx.has_input(2)) {
    e.c_input = 2;
    e.bias_row = true;
    e.beta = 1.f;
  }
  if (ctx.num_inputs() > 3 && ctx.has_input(3)) e.d_input = 3;
  return make_product(e);
}

}  // namespace

namespace {

int64_t groups_of(int64_t m, int64_t n, int64_t batch, int64_t bm, int64_t bn) {
  return (m + bm - 1) / bm * ((n + bn - 1) / bn) * batch;
}

// Whether gemm_tiled.comp may read the operands as vec4: A row-major, B row-major or transposed
// (`bt`), k, n and the row and batch strides multiples of 4, the tensors aligned to 4 elements of
// `bytes` each.
bool vec4_form(const GemmPush& p, bool bt, uint64_t bytes) {
  const bool b_rows = bt ? p.b_rs == 1 && p.b_cs % 4 == 0 : p.b_cs == 1 && p.b_rs % 4 == 0;
  const bool quads =
      p.k % 4 == 0 && p.n % 4 == 0 && p.a_rs % 4 == 0 && p.a_bs % 4 == 0 && p.b_bs % 4 == 0;
  const uint64_t quad = 4 * bytes;
  const bool aligned = p.a % quad == 0 && p.b % quad == 0 && p.y % quad == 0;
  return p.a_cs == 1 && b_rows && quads && aligned;
}

}  // namespace

SplitK plan_split(int64_t groups, int64_t k, int64_t depth, int64_t outputs) {
  constexpr int64_t kMinDepth = 64, kMaxSplits = 16;
  if (groups <= 0 || groups >= kBusyGroups) return {};
  int64_t s = std::min({(4 * kBusyGroups + groups - 1) / groups, k / kMinDepth, kMaxSplits});
  const auto room = static_cast<int64_t>(Context::kSplitWorkspaceBytes / sizeof(float));
  while (s > 1 && s * outputs > room) --s;
  if (s < 2) return {};
  const int64_t chunk = ((k + s - 1) / s + depth - 1) / depth * depth;
  const int64_t splits = (k + chunk - 1) / chunk;
  if (splits < 2) return {};
  return {static_cast<int32_t>(splits), static_cast<int32_t>(chunk)};
}

void enqueue_gemm(VulkanStream& stream, const GemmPush& push, int64_t batch, int act, DType dtype) {
  const auto bytes = static_cast<uint64_t>(dtype_size(dtype));
  // The shader, its specialization constants (the activation at act_slot) and its tile.
  int64_t edge_m = 0, edge_n = 0, depth = 0;
  std::string shader;
  std::array<int32_t, 4> constants{};
  size_t count = 0, act_slot = 0;
  const bool bt = push.b_rs == 1 && push.b_cs != 1;  // B stored n x k (a transposed weight)
  // Tensor cores for float16 products with enough 64x64 tiles to fill the GPU; the others (which
  // would be split along k) run the tiled shader's float16 form, measured faster for them (BERT).
  if (dtype == DType::kFloat16 && require_vulkan_backend().context().info().cooperative_matrix &&
      groups_of(push.m, push.n, batch, 64, 64) >= kBusyGroups) {
    shader = "gemm_coop.f16";
    constants = {act, vec4_form(push, bt, bytes) ? 1 : 0, bt ? 1 : 0};
    count = 3;
    act_slot = 0;
    edge_m = edge_n = 64;
    depth = 32;
  } else if (push.m <= 16) {  // one row of threads per 16 rows (decoding)
    shader = shader_for("gemm", dtype);
    constants = {1, 4, act};
    count = 3;
    act_slot = 2;
    edge_m = 16;
    edge_n = 64;
    depth = 16;
  } else {
    const int32_t tm = groups_of(push.m, push.n, batch, 128, 128) >= kBusyGroups ? 8 : 4;
    shader = shader_for("gemm_tiled", dtype);
    constants = {act, tm, vec4_form(push, bt, bytes) ? 1 : 0, bt ? 1 : 0};
    count = 4;
    edge_m = edge_n = int64_t{16} * tm;
    depth = 64 / tm;
  }
  const int64_t gx = (push.n + edge_n - 1) / edge_n, gy = (push.m + edge_m - 1) / edge_m;
  const SplitK split = plan_split(gx * gy * batch, push.k, depth, batch * push.m * push.n);
  if (gx > 65535 || gy > 65535 || batch * split.splits > 65535)
    throw ShapeError("vulkan: a product too large for one dispatch");
  if (split.splits == 1) {
    const Pipeline& pipe = pipeline(shader, std::span<const int32_t>(constants.data(), count));
    stream.dispatch(pipe, &push, sizeof(push), static_cast<uint32_t>(gx), static_cast<uint32_t>(gy),
                    static_cast<uint32_t>(batch));
    return;
  }
  // Partial sums into the workspace, then one pass adds them and applies the epilogue.
  GemmPush part = push;
  part.c = part.d = 0;
  part.y = require_vulkan_backend().context().split_workspace();
  part.k_split = split.k_split;
  constants[act_slot] = 0;
  const Pipeline& partial = pipeline(shader, std::span<const int32_t>(constants.data(), count));
  ReducePush r;
  r.w = part.y;
  r.c = push.c;
  r.d = push.d;
  r.y = push.y;
  r.m = push.m;
  r.n = push.n;
  r.batch = static_cast<int32_t>(batch);
  r.splits = split.splits;
  r.c_bs = push.c_bs;
  r.c_rs = push.c_rs;
  r.c_cs = push.c_cs;
  r.d_bs = push.d_bs;
  r.d_rs = push.d_rs;
  r.d_cs = push.d_cs;
  r.beta = push.beta;
  r.act_a = push.act_a;
  r.act_b = push.act_b;
  const int32_t reduce_constants[] = {act};
  const VulkanStream::Dispatch work[] = {
      {&partial, &part, sizeof(part), static_cast<uint32_t>(gx), static_cast<uint32_t>(gy),
       static_cast<uint32_t>(batch * split.splits)},
      {&pipeline(shader_for("gemm_reduce", dtype), reduce_constants), &r, sizeof(r),
       groups_for(batch * push.m * push.n, 256)}};
  stream.dispatch(work);
}

LUMEN_REGISTER_VULKAN_KERNEL(MatMul, &make_matmul, &check_matmul);
LUMEN_REGISTER_VULKAN_KERNEL(Gemm, &make_gemm, &check_gemm);
LUMEN_REGISTER_VULKAN_KERNEL(FusedMatMul, &make_fused_matmul, &check_fused_matmul);

}  // namespace lumen::vulkan
