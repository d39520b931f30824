// Schemas of the recurrent ops RNN, GRU and LSTM (opset 14 forms, with layout).
#include "graph/schemas/recurrent.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "graph/schema.h"

namespace lumen {
namespace {

struct ActInfo {
  const char* name;
  RnnActKind kind;
  bool takes_alpha, takes_beta;
  float alpha, beta;  // defaults
};

constexpr ActInfo kActs[] = {
    {"relu", RnnActKind::kRelu, false, false, 0.0f, 0.0f},
    {"tanh", RnnActKind::kTanh, false, false, 0.0f, 0.0f},
    {"sigmoid", RnnActKind::kSigmoid, false, false, 0.0f, 0.0f},
    {"affine", RnnActKind::kAffine, true, true, 1.0f, 0.0f},
    {"leakyrelu", RnnActKind::kLeakyRelu, true, false, 0.01f, 0.0f},
    {"thresholdedrelu", RnnActKind::kThresholdedRelu, true, false, 1.0f, 0.0f},
    {"scaledtanh", RnnActKind::kScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", RnnActKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", RnnActKind::kElu, true, false, 1.0f, 0.0f},
    {"softsign", RnnActKind::kSoftsign, false, false, 0.0f, 0.0f},
    {"softplus", RnnActKind::kSoftplus, false, false, 0.0f, 0.0f},
};

void check_shape(const NodeContext& ctx, int i, const char* what, const Shape& want) {
  if (ctx.input_shape(i) != want)
    ctx.fail_shape(std::string(what) + " must have shape " + want.to_string() + ", got " +
                   ctx.input_shape(i).to_string());
}

void check_float(const NodeContext& ctx, int i, const char* what) {
  if (ctx.input_dtype(i) != ctx.input_dtype(0))
    ctx.fail_shape(std::string(what) + " must be " + dtype_name(ctx.input_dtype(0)) + ", not " +
                   dtype_name(ctx.input_dtype(i)));
}

void read_activations(const NodeContext& ctx, RecurrentSpec& spec) {
  std::vector<std::string> names;
  if (ctx.has_attr("activations")) {
    names = ctx.attr("activations")->as_strings();
  } else {
    static const char* const kDefaults[3][3] = {
        {"Tanh", "", ""}, {"Sigmoid", "Tanh", ""}, {"Sigmoid", "Tanh", "Tanh"}};
    const int which = spec.gates == 1 ? 0 : spec.gates == 3 ? 1 : 2;
    for (int d = 0; d < spec.num_directions; ++d) {
      for (int k = 0; k < spec.activations_per_dir; ++k) names.push_back(kDefaults[which][k]);
    }
  }
  const int per_dir = spec.activations_per_dir;
  const int total = per_dir * spec.num_directions;
  if (static_cast<int>(names.size()) == per_dir && total > per_dir) {
    std::vector<std::string> twice = names;
    names.insert(names.end(), twice.begin(), twice.end());
  }
  if (static_cast<int>(names.size()) != total)
    ctx.fail_model("activations must list " + std::to_string(total) + " functions, got " +
                   std::to_string(names.size()));
  std::vector<float> alphas = ctx.attr_floats("activation_alpha", {});
  std::vector<float> betas = ctx.attr_floats("activation_beta", {});
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const ActInfo* info = nullptr;
    for (const ActInfo& a : kActs) {
      if (lower == a.name) info = &a;
    }
    if (info == nullptr) ctx.fail_model("unknown activation function '" + name + "'");
    RnnActivation act{info->kind, info->alpha, info->beta};
    if (info->takes_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    spec.activations.push_back(act);
  }
}

}  // namespace

RecurrentSpec recurrent_spec(const NodeContext& ctx) {
  RecurrentSpec spec;
  const OpKind op = ctx.op();
  spec.gates = op == OpKind::kLSTM ? 4 : op == OpKind::kGRU ? 3 : 1;
  spec.activations_per_dir = op == OpKind::kLSTM ? 3 : op == OpKind::kGRU ? 2 : 1;
  std::string direction = ctx.attr_string("direction", "forward");
  if (direction == "bidirectional") {
    spec.num_directions = 2;
  } else if (direction == "reverse") {
    spec.reverse = true;
  } else if (direction != "forward") {
    ctx.fail_model("direction must be forward, reverse or bidirectional, got '" + direction + "'");
  }
  int64_t layout = ctx.attr_int("layout", 0);
  if (layout != 0 && layout != 1) ctx.fail_model("layout must be 0 or 1");
  spec.batch_major = layout == 1;
  if (ctx.has_attr("clip")) {
    spec.has_clip = true;
    spec.clip = ctx.attr_float("clip", 0.0f);
    if (!(spec.clip > 0.0f)) ctx.fail_model("clip must be positive");
  }
  if (op == OpKind::kGRU) spec.linear_before_reset = ctx.attr_int("linear_before_reset", 0) != 0;
  if (op == OpKind::kLSTM) spec.input_forget = ctx.attr_int("input_forget", 0) != 0;

  const Shape& x = ctx.input_shape(0);
  if (!is_floating(ctx.input_dtype(0)))
    ctx.fail_shape(std::string("X must be floating-point, not ") + dtype_name(ctx.input_dtype(0)));
  if (x.rank() != 3) ctx.fail_shape("X must have rank 3, got " + x.to_string());
  spec.seq_length = spec.batch_major ? x.dims()[1] : x.dims()[0];
  spec.batch = spec.batch_major ? x.dims()[0] : x.dims()[1];
  spec.input_size = x.dims()[2];
  const Shape& r = ctx.input_shape(2);
  if (r.rank() != 3) ctx.fail_shape("R must have rank 3, got " + r.to_string());
  spec.hidden = ctx.attr_int("hidden_size", r.dims()[2]);
  if (spec.hidden < 1) ctx.fail_model("hidden_size must be positive");
  const int64_t dirs = spec.num_directions, gh = spec.gates * spec.hidden, h = spec.hidden;
  check_float(ctx, 1, "W");
  check_float(ctx, 2, "R");
  check_shape(ctx, 1, "W", Shape{dirs, gh, spec.input_size});
  check_shape(ctx, 2, "R", Shape{dirs, gh, h});
  if (ctx.has_input(3)) {
    check_float(ctx, 3, "B");
    check_shape(ctx, 3, "B", Shape{dirs, 2 * gh});
  }
  if (ctx.has_input(4)) {
    DType t = ctx.input_dtype(4);
    if (t != DType::kInt32 && t != DType::kInt64)
      ctx.fail_shape(std::string("sequence_lens must be int32, not ") + dtype_name(t));
    check_shape(ctx, 4, "sequence_lens", Shape{spec.batch});
  }
  const Shape state = spec.batch_major ? Shape{spec.batch, dirs, h} : Shape{dirs, spec.batch, h};
  if (ctx.has_input(5)) {
    check_float(ctx, 5, "initial_h");
    check_shape(ctx, 5, "initial_h", state);
  }
  if (ctx.has_input(6)) {
    check_float(ctx, 6, "initial_c");
    check_shape(ctx, 6, "initial_c", state);
  }
  if (ctx.has_input(7)) {
    check_float(ctx, 7, "P");
    check_shape(ctx, 7, "P", Shape{dirs, 3 * h});
  }
  read_activations(ctx, spec);
  return spec;
}

namespace {

void infer_recurrent(InferContext& ctx) {
  RecurrentSpec spec = recurrent_spec(ctx);
  const int64_t dirs = spec.num_directions, h = spec.hidden;
  const DType dtype = ctx.input_dtype(0);
  const Shape y = spec.batch_major ? Shape{spec.batch, spec.seq_length, dirs, h}
                                   : Shape{spec.seq_length, dirs, spec.batch, h};
  const Shape state = spec.batch_major ? Shape{spec.batch, dirs, h} : Shape{dirs, spec.batch, h};
  for (int i = 0; i < ctx.num_outputs(); ++i) ctx.set_output(i, dtype, i == 0 ? y : state);
}

}  // namespace

LUMEN_REGISTER_SCHEMA(RNN, {.min_inputs = 3,
                            .max_inputs = 6,
                            .min_outputs = 0,
                            .max_outputs = 2,
                            .attrs = {{"activation_alpha", AttrType::kFloats},
                                      {"activation_beta", AttrType::kFloats},
                                      {"activations", AttrType::kStrings},
                                      {"clip", AttrType::kFloat},
                                      {"direction", AttrType::kString},
                                      {"hidden_size", AttrType::kInt},
                                      {"layout", AttrType::kInt}},
                            .infer = &infer_recurrent});
LUMEN_REGISTER_SCHEMA(GRU, {.min_inputs = 3,
                            .max_inputs = 6,
                            .min_outputs = 0,
                            .max_outputs = 2,
                            .attrs = {{"activation_alpha", AttrType::kFloats},
                                      {"activation_beta", AttrType::kFloats},
                                      {"activations", AttrType::kStrings},
                                      {"clip", AttrType::kFloat},
                                      {"direction", AttrType::kString},
                                      {"hidden_size", AttrType::kInt},
                                      {"layout", AttrType::kInt},
                                      {"linear_before_reset", AttrType::kInt}},
                            .infer = &infer_recurrent});
LUMEN_REGISTER_SCHEMA(LSTM, {.min_inputs = 3,
                             .max_inputs = 8,
                             .min_outputs = 0,
                             .max_outputs = 3,
                             .attrs = {{"activation_alpha", AttrType::kFloats},
                                       {"activation_beta", AttrType::kFloats},
                                       {"activations", AttrType::kStrings},
                                       {"clip", AttrType::kFloat},
                                       {"direction", AttrType::kString},
                                       {"hidden_size", AttrType::kInt},
                                       {"layout", AttrType::kInt},
                                       {"input_forget", AttrType::kInt}},
                             .infer = &infer_recurrent});

}  // namespace lumen
