// Graph IR: building, inference errors, verification, folding, printers.
#include <gtest/gtest.h>

#include "backends/cpu/kernel_registry.h"
#include "graph/op_kind.h"
#include "graph/schema.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"
#include "runtime/control_flow.h"

namespace lumen {
namespace {

TEST(Graph, OpNamesAnyCase) {
  EXPECT_EQ(op_kind_from_name("MatMul"), OpKind::kMatMul);
  EXPECT_EQ(op_kind_from_name("matmul"), OpKind::kMatMul);
  EXPECT_EQ(op_kind_from_name("LAYERNORMALIZATION"), OpKind::kLayerNormalization);
  EXPECT_FALSE(op_kind_from_name("NoSuchOp").has_value());
  EXPECT_STREQ(op_name(OpKind::kConv), "Conv");
}

TEST(Graph, EveryOpHasASchemaAndACpuKernel) {
  Runtime rt;
  for (int k = 0; k < kNumOpKinds; ++k) {
    auto op = static_cast<OpKind>(k);
    EXPECT_TRUE(has_schema(op)) << op_name(op) << " has no schema";
    // If, Loop and Scan run compiled subgraphs: their kernels come from the runtime.
    if (is_control_flow(op)) continue;
    EXPECT_NE(cpu::find_kernel(op), nullptr) << op_name(op) << " has no CPU kernel";
  }
}

TEST(Graph, InfersTypesWhenBuilt) {
  Graph g;
  Value* x = g.add_input("x", {2, 3, 4});
  Value* w = g.add_weight("w", {4, 5});
  Value* y = g.add_op("MatMul", {x, w}, {}, "mm");
  EXPECT_EQ(y->type, (TensorType{DType::kFloat32, {2, 3, 5}}));
  EXPECT_EQ(g.node(y->producer).name, "mm");
  Value* z = g.add_op("relu", {y});
  EXPECT_EQ(z->type.shape, (Shape{2, 3, 5}));
  g.mark_output(z);
  g.verify();
  EXPECT_NE(g.to_text().find("MatMul(%x, %w)"), std::string::npos) << g.to_text();
  EXPECT_NE(g.to_dot().find("digraph"), std::string::npos);
}

TEST(Graph, ErrorsNameTheNode) {
  Graph g;
  Value* x = g.add_input("x", {1, 10});
  Value* w = g.add_weight("w", {9, 5});
  try {
    g.add_op("MatMul", {x, w}, {}, "proj");
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("proj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MatMul"), std::string::npos) << e.what();
  }
  // The failed node left nothing behind.
  EXPECT_EQ(g.num_nodes(), 0);
  g.verify();
  EXPECT_THROW(g.add_op("Frobnicate", {x}), UnsupportedOp);
  EXPECT_THROW(g.add_op("Relu", {}), InvalidModel);                         // missing input
  EXPECT_THROW(g.add_op("Relu", {x}, {{"bogus", 1}}), InvalidModel);        // unknown attribute
  EXPECT_THROW(g.add_op("Softmax", {x}, {{"axis", "one"}}), InvalidModel);  // wrong attr type
  EXPECT_THROW(g.add_op("Softmax", {x}, {{"axis", 5}}), ShapeError);
  EXPECT_THROW(g.add_input("x", {2}), InvalidModel);  // duplicate name
  EXPECT_THROW(g.add_input("neg", {-2}), ShapeError);
  Graph other;
  Value* foreign = other.add_input("f", {1, 10});
  EXPECT_THROW(g.add_op("Relu", {foreign}), InvalidArgument);
  Value* i = g.add_input("i", {1, 10}, DType::kInt64);
  EXPECT_THROW(g.add_op("Add", {x, i}), ShapeError);  // dtype mismatch
}

TEST(Graph, VerifyFindsCycles) {
  Graph g;
  Value* x = g.add_input("x", {4});
  Value* a = g.add_op("Relu", {x});
  Value* b = g.add_op("Relu", {a});
  // Rewire a's producer to read b: a cycle that only a buggy pass or importer could make.
  Node& first = g.node(a->producer);
  g.value(first.inputs[0]).consumers.clear();
  first.inputs[0] = b->id;
  b->consumers.push_back(first.id);
  EXPECT_THROW(g.verify(), InvalidModel);
  EXPECT_THROW(g.topological_order(), InvalidModel);
}

TEST(Graph, FoldsShapeArithmeticAtBuildTime) {
  Graph g;
  Value* x = g.add_input("x", {2, 3, 4});
  Value* shape = g.add_op("Shape", {x});
  ASSERT_TRUE(shape->data.has_value());
  Value* idx = g.add_constant("idx", Tensor::scalar<int64_t>(0));
  Value* batch = g.add_op("Gather", {shape, idx}, {{"axis", 0}});
  ASSERT_TRUE(batch->data.has_value());
  Value* axes = g.add_constant("axes", Tensor::from_vector<int64_t>({1}, {0}));
  Value* b1 = g.add_op("Unsqueeze", {batch, axes});
  Value* minus1 = g.add_constant("m1", Tensor::from_vector<int64_t>({1}, {-1}));
  Value* target = g.add_op("Concat", {b1, minus1}, {{"axis", 0}});
  ASSERT_TRUE(target->data.has_value());
  Value* y = g.add_op("Reshape", {x, target});
  EXPECT_EQ(y->type.shape, (Shape{2, 12}));
  g.mark_output(y);
  Runtime rt;
  Executable* exe = g.compile(&rt);
  EXPECT_EQ(exe->summary().find("Concat"), std::string::npos) << exe->summary();
  Tensor in = test::random_tensor({2, 3, 4}, 1);
  auto out = exe->execute({in});
  test::expect_close(out[0], {2, 12}, test::to_doubles(in), 0, 0);
}

TEST(Graph, WeightsAreNotFoldedBeforeTheyAreSet) {
  Graph g;
  Value* w = g.add_weight("w", {3});
  Value* y = g.add_op("Relu", {w});
  EXPECT_FALSE(y->data.has_value());
  g.set_data(w, Tensor::from_vector<float>({3}, {-1, 2, -3}));
  g.mark_output(y);
  Runtime rt;
  auto out = g.compile(&rt)->execute(std::vector<Tensor>{});
  test::expect_close(out[0], {3}, {0, 2, 0});
  EXPECT_THROW(g.set_data(w, Tensor::zeros({4})), ShapeError);
  EXPECT_THROW(g.set_data(y, Tensor::zeros({3})), InvalidArgument);
}

TEST(Graph, OptimizeDropsDeadNodes) {
  Graph g;
  Value* x = g.add_input("x", {4});
  Value* used = g.add_op("Relu", {x});
  g.add_op("Sigmoid", {x});  // nothing reads it
  g.mark_output(used);
  g.optimize();
  int live = 0;
  for (int i = 0; i < g.num_nodes(); ++i) live += g.node(i).removed ? 0 : 1;
  EXPECT_EQ(live, 1);
  g.verify();
}

}  // namespace
}  // namespace lumen
