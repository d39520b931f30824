// Graph::mark_input_written: a step that runs in place over a graph input writes the caller's
// tensor (a decoder's key/value cache), and write_cache_in_place, the decoding-step rewrite that
// uses it (onnx/cache_in_place.h). Every element against a reference kept on the side.
#include <gtest/gtest.h>

#include <vector>

#include "lumen/lumen.h"
#include "onnx/cache_in_place.h"
#include "ops/op_test_util.h"

namespace lumen::test {
namespace {

constexpr int64_t kBatch = 2, kHeads = 3, kSlots = 8, kDim = 4;

Tensor index_of(const std::vector<int64_t>& values) {
  Tensor t = Tensor::empty(Shape{static_cast<int64_t>(values.size())}, DType::kInt64);
  std::copy(values.begin(), values.end(), t.data<int64_t>());
  return t;
}

// want[b, h, index[b], :] = update[b, h, 0, :].
void scatter(std::vector<double>& want, const Tensor& update, const std::vector<int64_t>& index) {
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t h = 0; h < kHeads; ++h)
      for (int64_t d = 0; d < kDim; ++d)
        want[((b * kHeads + h) * kSlots + index[b]) * kDim + d] =
            update.data<float>()[(b * kHeads + h) * kDim + d];
}

// cache -> TensorScatter(cache, update, index) -> Mul(s, s): the scatter's output is read by a
// later step, as a decoder's attention reads its cache.
Executable* compile_scatter(Runtime& rt, Graph& g, bool written) {
  Value* cache = g.add_input("cache", Shape{kBatch, kHeads, kSlots, kDim});
  Value* update = g.add_input("update", Shape{kBatch, kHeads, 1, kDim});
  Value* index = g.add_input("index", Shape{kBatch}, DType::kInt64);
  Value* s = g.add_op("TensorScatter", {cache, update, index}, {{"axis", int64_t{2}}}, "scatter");
  g.mark_output(g.add_op("Mul", {s, s}, {}, "square"));
  if (written) g.mark_input_written(cache);
  CompileOptions options;
  options.backends = {"cpu"};
  return g.compile(&rt, options);
}

TEST(WrittenInputs, AnInPlaceStepWritesTheCallersTensor) {
  Runtime rt;
  Graph g;
  Executable* exe = compile_scatter(rt, g, true);
  const Tensor cache = random_tensor({kBatch, kHeads, kSlots, kDim}, 1);
  std::vector<double> want = to_doubles(cache);
  const void* where = cache.raw_data();
  for (int round = 0; round < 4; ++round) {
    const Tensor update = random_tensor({kBatch, kHeads, 1, kDim}, 10 + round);
    const std::vector<int64_t> index = {round, kSlots - 1 - round};
    const std::vector<Tensor> outs = exe->execute({cache, update, index_of(index)});
    scatter(want, update, index);
    EXPECT_EQ(cache.raw_data(), where);
    expect_close(cache, {kBatch, kHeads, kSlots, kDim}, want, 0, 0);
    std::vector<double> squares = want;
    for (double& v : squares) v *= v;
    expect_close(outs[0], {kBatch, kHeads, kSlots, kDim}, squares, 1e-6, 1e-6);
  }
  // The scatter writes over the input: nothing of the cache's size is planned for it.
  EXPECT_LT(exe->memory_report().arena_bytes, static_cast<size_t>(cache.nbytes()));
}

TEST(WrittenInputs, WithoutTheMarkTheCallersTensorStaysAsItWas) {
  Runtime rt;
  Graph g;
  Executable* exe = compile_scatter(rt, g, false);
  const Tensor cache = random_tensor({kBatch, kHeads, kSlots, kDim}, 2);
  const std::vector<double> before = to_doubles(cache);
  const Tensor update = random_tensor({kBatch, kHeads, 1, kDim}, 3);
  const std::vector<Tensor> outs = exe->execute({cache, update, index_of({1, 2})});
  expect_close(cache, {kBatch, kHeads, kSlots, kDim}, before, 0, 0);
  std::vector<double> want = before;
  scatter(want, update, {1, 2});
  for (double& v : want) v *= v;
  expect_close(outs[0], {kBatch, kHeads, kSlots, kDim}, want, 1e-6, 1e-6);
}

TEST(WrittenInputs, BadCalls) {
  Graph g;
  Value* x = g.add_input("x", Shape{2});
  Value* y = g.add_op("Relu", {x}, {}, "relu");
  g.mark_output(y);
  EXPECT_THROW(g.mark_input_written(y), InvalidArgument);
  EXPECT_THROW(g.mark_input_written(nullptr), InvalidArgument);
  EXPECT_THROW(g.remove_output(x->id), InvalidArgument);
  g.remove_output(y->id);
  EXPECT_TRUE(g.outputs().empty());
}

Tensor two() {
  Tensor t = Tensor::empty(Shape{1});
  t.data<float>()[0] = 2.0f;
  return t;
}

// A one-layer decoding step in the exporters' form: present = Concat(past, new) along the
// sequence, attention-like readers of present, and logits. With `extra_reader` the past has a
// second reader, which the rewrite refuses.
void build_step(Graph& g, int64_t past_len, bool extra_reader) {
  const Shape past{kBatch, kHeads, past_len, kDim};
  Value* x = g.add_input("x", Shape{kBatch, kHeads, 1, kDim});
  Value* pk = g.add_input("past_key_values.0.key", past);
  Value* pv = g.add_input("past_key_values.0.value", past);
  Value* k = g.add_op("Mul", {x, g.add_constant("two", two())}, {}, "k");
  Value* key = g.add_op("Concat", {pk, k}, {{"axis", int64_t{-2}}}, "concat_k");
  Value* value = g.add_op("Concat", {pv, x}, {{"axis", int64_t{2}}}, "concat_v");
  g.rename(key, "present.0.key");
  g.rename(value, "present.0.value");
  Value* scores = g.add_op("Mul", {key, value}, {}, "scores");
  Value* logits = g.add_op("ReduceSum", {scores, g.add_constant("axes", index_of({2}))},
                           {{"keepdims", int64_t{0}}}, "sum");
  if (extra_reader) logits = g.add_op("Add", {logits, g.add_op("ReduceMax", {pk}, {}, "max")});
  g.rename(logits, "logits");
  g.mark_output(logits);
  g.mark_output(key);
  g.mark_output(value);
}

TEST(WrittenInputs, DecodingStepWritesItsCacheInPlace) {
  Graph g;
  build_step(g, kSlots - 1, false);
  ASSERT_TRUE(write_cache_in_place(g, 1));
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "logits");
  const Shape full{kBatch, kHeads, kSlots, kDim};
  EXPECT_EQ(g.find_value("past_key_values.0.key")->type.shape, full);
  ASSERT_NE(g.find_value(kCacheWriteIndex), nullptr);
  Runtime rt;
  CompileOptions options;
  options.backends = {"cpu"};
  Executable* exe = g.compile(&rt, options);
  const Tensor keys = random_tensor({kBatch, kHeads, kSlots, kDim}, 4);
  const Tensor values = random_tensor({kBatch, kHeads, kSlots, kDim}, 5);
  std::vector<double> want_k = to_doubles(keys), want_v = to_doubles(values);
  for (int64_t slot = 0; slot < 3; ++slot) {
    const Tensor x = random_tensor({kBatch, kHeads, 1, kDim}, 6 + slot);
    const std::vector<int64_t> index = {slot, slot + 4};
    std::map<std::string, Tensor> in = {{"x", x},
                                        {"past_key_values.0.key", keys},
                                        {"past_key_values.0.value", values},
                                        {kCacheWriteIndex, index_of(index)}};
    const std::vector<Tensor> outs = exe->execute(in);
    Tensor doubled = x.clone();
    for (int64_t i = 0; i < doubled.numel(); ++i) doubled.data<float>()[i] *= 2;
    scatter(want_k, doubled, index);
    scatter(want_v, x, index);
    expect_close(keys, full, want_k, 0, 0);
    expect_close(values, full, want_v, 0, 0);
    std::vector<double> logits(kBatch * kHeads * kDim, 0.0);
    for (int64_t b = 0; b < kBatch; ++b)
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t s = 0; s < kSlots; ++s)
          for (int64_t d = 0; d < kDim; ++d) {
            const int64_t at = ((b * kHeads + h) * kSlots + s) * kDim + d;
            logits[(b * kHeads + h) * kDim + d] += want_k[at] * want_v[at];
          }
    expect_close(outs[0], {kBatch, kHeads, kDim}, logits, 1e-5, 1e-5);
  }
}

TEST(WrittenInputs, DecodingStepOfAnotherFormIsLeftAlone) {
  Graph g;
  build_step(g, kSlots - 1, true);
  EXPECT_FALSE(write_cache_in_place(g, 1));
  EXPECT_EQ(g.outputs().size(), 3u);
  EXPECT_EQ(g.find_value("past_key_values.0.key")->type.shape[2], kSlots - 1);
  EXPECT_EQ(g.find_value(kCacheWriteIndex), nullptr);
  Graph two_layers;
  build_step(two_layers, kSlots - 1, false);
  EXPECT_FALSE(write_cache_in_place(two_layers, 2));  // no layer 1
  EXPECT_EQ(two_layers.outputs().size(), 3u);
}

}  // namespace
}  // namespace lumen::test
