// The ONNX importer's training-mode converters on models built with the protobuf API: Dropout
// (the identity in inference and in training mode with ratio 0, refused when it would be random)
// and BatchNormalization with training_mode=1 (batch statistics and updated running statistics,
// against a naive double-precision reference); optimizer nodes of domain ai.onnx.preview.training
// (Momentum) and the importer's refusals around that domain.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

void set_tensor(onnx::TensorProto* t, const std::string& name, const Tensor& data) {
  t->set_name(name);
  t->set_data_type(data.dtype() == DType::kBool ? onnx::TensorProto::BOOL
                                                : onnx::TensorProto::FLOAT);
  for (int64_t d : data.shape().dims()) t->add_dims(d);
  t->set_raw_data(std::string(static_cast<const char*>(data.raw_data()), data.nbytes()));
}

void add_io(onnx::ValueInfoProto* v, const std::string& name, const Shape& shape,
            int elem_type = onnx::TensorProto::FLOAT) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  for (int64_t d : shape.dims()) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::ModelProto empty_model(int64_t opset) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

// Dropout(x, ratio, training_mode) -> y, mask with ratio and training_mode as initializers, or
// training_mode as a graph input when `training` is empty.
onnx::ModelProto dropout_model(const Shape& shape, float ratio, std::optional<bool> training) {
  onnx::ModelProto m = empty_model(13);
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", shape);
  set_tensor(g->add_initializer(), "r", Tensor::scalar<float>(ratio));
  if (training)
    set_tensor(g->add_initializer(), "t", Tensor::scalar<bool>(*training));
  else
    add_io(g->add_input(), "t", Shape{}, onnx::TensorProto::BOOL);
  auto* n = g->add_node();
  n->set_op_type("Dropout");
  n->set_name("drop");
  for (const char* in : {"x", "r", "t"}) n->add_input(in);
  n->add_output("y");
  n->add_output("mask");
  add_io(g->add_output(), "y", shape);
  add_io(g->add_output(), "mask", shape, onnx::TensorProto::BOOL);
  return m;
}

TEST(OnnxTraining, DropoutIsTheIdentityWhenDeterministic) {
  const Shape shape{3, 4};
  Tensor x = test::random_tensor(shape, 1);
  for (auto [ratio, training] : {std::pair{0.0f, true}, std::pair{0.6f, false}}) {
    Graph g = load_onnx_bytes(dropout_model(shape, ratio, training).SerializeAsString());
    Runtime rt;
    auto out = g.compile(&rt)->execute({x});
    ASSERT_EQ(out.size(), 2u);
    test::expect_close(out[0], shape, test::to_doubles(x), 0, 0);
    test::expect_equal(out[1], DType::kBool, shape, std::vector<double>(12, 1.0));
  }
}

TEST(OnnxTraining, RandomDropoutIsRefused) {
  const Shape shape{2, 2};
  try {
    load_onnx_bytes(dropout_model(shape, 0.5f, true).SerializeAsString());
    ADD_FAILURE() << "random dropout was accepted";
  } catch (const UnsupportedOp& e) {
    EXPECT_NE(std::string(e.what()).find("node 'drop' (Dropout"), std::string::npos) << e.what();
  }
  // training_mode only known at run time: it must be fixed when the graph is built.
  EXPECT_THROW(load_onnx_bytes(dropout_model(shape, 0.0f, std::nullopt).SerializeAsString()),
               ShapeError);
  OnnxLoadOptions options;
  options.input_values["t"] = Tensor::scalar<bool>(true);
  Graph g = load_onnx_bytes(dropout_model(shape, 0.0f, std::nullopt).SerializeAsString(), options);
  Runtime rt;
  Tensor x = test::random_tensor(shape, 2);
  test::expect_close(g.compile(&rt)->execute({x})[0], shape, test::to_doubles(x), 0, 0);
}

TEST(OnnxTraining, BatchNormalizationWithBatchStatistics) {
  const Shape shape{3, 4, 2, 5};
  const int64_t c = 4, per = 3 * 2 * 5;
  const float epsilon = 0.01f, momentum = 0.8f;
  Tensor x = test::random_tensor(shape, 11, -2.0f, 3.0f);
  Tensor s = test::random_tensor({c}, 12), b = test::random_tensor({c}, 13);
  Tensor mean = test::random_tensor({c}, 14), var = test::random_tensor({c}, 15, 0.1f, 2.0f);
  onnx::ModelProto m = empty_model(15);
  auto* g = m.mutable_graph();
  add_io(g->add_input(), "x", shape);
  set_tensor(g->add_initializer(), "s", s);
  set_tensor(g->add_initializer(), "b", b);
  set_tensor(g->add_initializer(), "mean", mean);
  set_tensor(g->add_initializer(), "var", var);
  auto* n = g->add_node();
  n->set_op_type("BatchNormalization");
  n->set_name("bn");
  for (const char* in : {"x", "s", "b", "mean", "var"}) n->add_input(in);
  for (const char* out : {"y", "running_mean", "running_var"}) n->add_output(out);
  auto* a = n->add_attribute();
  a->set_name("training_mode");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  a = n->add_attribute();
  a->set_name("epsilon");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(epsilon);
  a = n->add_attribute();
  a->set_name("momentum");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(momentum);
  add_io(g->add_output(), "y", shape);
  add_io(g->add_output(), "running_mean", Shape{c});
  add_io(g->add_output(), "running_var", Shape{c});

  std::vector<double> xv = test::to_doubles(x), sv = test::to_doubles(s), bv = test::to_doubles(b),
                      mv = test::to_doubles(mean), vv = test::to_doubles(var);
  std::vector<double> bm(c, 0.0), bvar(c, 0.0), y(xv.size()), rm(c), rv(c);
  auto channel = [&](size_t i) { return (static_cast<int64_t>(i) / 10) % c; };
  for (size_t i = 0; i < xv.size(); ++i) bm[channel(i)] += xv[i] / per;
  for (size_t i = 0; i < xv.size(); ++i)
    bvar[channel(i)] += (xv[i] - bm[channel(i)]) * (xv[i] - bm[channel(i)]) / per;
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t k = channel(i);
    y[i] = sv[k] * (xv[i] - bm[k]) / std::sqrt(bvar[k] + epsilon) + bv[k];
  }
  for (int64_t k = 0; k < c; ++k) {
    rm[k] = mv[k] * momentum + bm[k] * (1 - momentum);
    rv[k] = vv[k] * momentum + bvar[k] * (1 - momentum);
  }
  Graph graph = load_onnx_bytes(m.SerializeAsString());
  Runtime rt;
  auto out = graph.compile(&rt)->execute({x});
  ASSERT_EQ(out.size(), 3u);
  test::expect_close(out[0], shape, y);
  test::expect_close(out[1], Shape{c}, rm);
  test::expect_close(out[2], Shape{c}, rv);
}

// Momentum(R, T, X, G, V) -> X_new, V_new as a node of domain ai.onnx.preview.training, in a model
// importing `domains` (name, version); `node_domain` is the node's own domain.
onnx::ModelProto momentum_model(const std::vector<std::pair<std::string, int64_t>>& domains,
                                const std::string& node_domain,
                                const std::string& op = "Momentum") {
  onnx::ModelProto m;
  m.set_ir_version(8);
  for (const auto& [domain, version] : domains) {
    auto* o = m.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
  }
  auto* g = m.mutable_graph();
  g->set_name("g");
  add_io(g->add_input(), "R", Shape{});
  add_io(g->add_input(), "T", Shape{}, onnx::TensorProto::INT64);
  for (const char* name : {"X", "G", "V"}) add_io(g->add_input(), name, Shape{5});
  add_io(g->add_output(), "X_new", Shape{5});
  add_io(g->add_output(), "V_new", Shape{5});
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_domain(node_domain);
  for (const char* name : {"R", "T", "X", "G", "V"}) n->add_input(name);
  n->add_output("X_new");
  n->add_output("V_new");
  auto add_float = [&](const char* name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  };
  add_float("alpha", 0.9f);
  add_float("beta", 0.5f);
  add_float("norm_coefficient", 0.01f);
  auto* mode = n->add_attribute();
  mode->set_name("mode");
  mode->set_type(onnx::AttributeProto::STRING);
  mode->set_s("nesterov");
  return m;
}

TEST(OnnxTraining, OptimizerOfTheTrainingDomainRuns) {
  const std::string kDomain = "ai.onnx.preview.training";
  for (const auto& domains :
       {std::vector<std::pair<std::string, int64_t>>{{kDomain, 1}},
        std::vector<std::pair<std::string, int64_t>>{{"", 17}, {kDomain, 1}}}) {
    Graph graph = load_onnx_bytes(momentum_model(domains, kDomain).SerializeAsString());
    const Tensor r = Tensor::scalar<float>(0.1f), t = Tensor::scalar<int64_t>(3);
    const Tensor x = test::random_tensor(Shape{5}, 1), g = test::random_tensor(Shape{5}, 2),
                 v = test::random_tensor(Shape{5}, 3);
    Runtime rt;
    auto out = graph.compile(&rt)->execute({r, t, x, g, v});
    ASSERT_EQ(out.size(), 2u);
    std::vector<double> want_x, want_v;
    for (int64_t i = 0; i < 5; ++i) {
      const double xi = x.item_as_double(i);
      const double gr = static_cast<double>(0.01f) * xi + g.item_as_double(i);
      const double vn = static_cast<double>(0.9f) * v.item_as_double(i) + 0.5 * gr;
      want_x.push_back(xi - static_cast<double>(0.1f) * (gr + static_cast<double>(0.9f) * vn));
      want_v.push_back(vn);
    }
    test::expect_close(out[0], Shape{5}, want_x);
    test::expect_close(out[1], Shape{5}, want_v);
  }
}

TEST(OnnxTraining, TrainingDomainRefusals) {
  const std::string kDomain = "ai.onnx.preview.training";
  auto load = [](const onnx::ModelProto& m) { load_onnx_bytes(m.SerializeAsString()); };
  // The domain's other ops (Gradient is not deterministic inference), and other versions.
  EXPECT_THROW(load(momentum_model({{kDomain, 1}}, kDomain, "Gradient")), UnsupportedOp);
  EXPECT_THROW(load(momentum_model({{kDomain, 2}}, kDomain)), UnsupportedOp);
  // An optimizer op named in the default domain.
  EXPECT_THROW(load(momentum_model({{"", 17}}, "")), UnsupportedOp);
  // A default-domain node in a model that imports only the training domain.
  EXPECT_THROW(load(momentum_model({{kDomain, 1}}, "", "Relu")), InvalidModel);
}

}  // namespace
}  // namespace lumen
