// The C++ API example from the README: build a graph in code, compile it, run it.
#include <cstdio>

#include "lumen/lumen.h"

int main() {
  try {
    // Exactly as documented: a 1x10 input times a 10x5 weight.
    lumen::Runtime rt;
    lumen::Graph graph;
    auto* in = graph.add_input("input", {1, 10});
    auto* w = graph.add_weight("weight", {10, 5});
    auto* out = graph.add_op("matmul", {in, w});
    graph.mark_output(out);
    graph.optimize();
    auto* executable = graph.compile(&rt);
    auto input_buf = rt.alloc({1, 10});
    auto outputs = executable->execute({input_buf});
    std::printf("zero weights:  %s\n", outputs[0].to_string().c_str());

    // What a user does around it: fill the weight and the input, read the output.
    lumen::Graph g2;
    auto* x = g2.add_input("input", {1, 10});
    auto* w2 = g2.add_weight("weight", {10, 5});
    std::vector<float> weights(50);
    for (int i = 0; i < 50; ++i) weights[i] = 0.01f * static_cast<float>(i % 7 - 3);
    g2.set_data(w2, lumen::Tensor::from_vector<float>({10, 5}, weights));
    auto* y = g2.add_op("Relu", {g2.add_op("MatMul", {x, w2}, {}, "proj")});
    g2.mark_output(y);
    auto* exe2 = g2.compile(&rt);
    auto input = rt.alloc({1, 10});
    for (int i = 0; i < 10; ++i) input.data<float>()[i] = static_cast<float>(i);
    auto result = exe2->execute({input});
    std::printf("relu(x @ w):   %s\n", result[0].to_string().c_str());

    // A wrong shape is a lumen::ShapeError naming the node.
    try {
      g2.add_op("MatMul", {x, x}, {}, "bad");
    } catch (const lumen::ShapeError& e) {
      std::printf("expected error: %s\n", e.what());
    }
    return 0;
  } catch (const lumen::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
