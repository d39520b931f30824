// Lumen's main job on the model it ships: classify held-out 8x8 digits with models/digits.
//   classify_digits [MODEL_DIR]   (default: models/digits)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "lumen/lumen.h"

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "models/digits";
  try {
    lumen::Tensor images = lumen::read_npy(dir + "/test_x.npy");
    lumen::Tensor labels = lumen::read_npy(dir + "/test_y.npy");
    int64_t n = images.shape()[0];

    auto t0 = std::chrono::steady_clock::now();
    lumen::OnnxLoadOptions options;
    options.input_shapes["image"] = images.shape();  // the whole held-out set as one batch
    lumen::Graph graph = lumen::load_onnx(dir + "/digits.onnx", options);
    graph.optimize();
    lumen::Runtime rt;
    lumen::Executable* model = graph.compile(&rt);
    auto t1 = std::chrono::steady_clock::now();

    std::vector<lumen::Tensor> out = model->execute({images});
    std::vector<double> ms;
    for (int r = 0; r < 50; ++r) {
      auto a = std::chrono::steady_clock::now();
      out = model->execute({images});
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
    }
    std::sort(ms.begin(), ms.end());

    const float* logits = out[0].data<float>();
    int64_t correct = 0;
    for (int64_t i = 0; i < n; ++i) {
      int64_t best = std::max_element(logits + i * 10, logits + i * 10 + 10) - (logits + i * 10);
      correct += best == labels.data<int64_t>()[i];
    }
    std::string reference;
    std::ifstream(dir + "/reference.txt") >> reference;

    std::printf("digits: %lld held-out 8x8 images, one batch\n", static_cast<long long>(n));
    std::printf("accuracy: %.4f (%lld of %lld); PyTorch on the same digits: %s\n",
                static_cast<double>(correct) / n, static_cast<long long>(correct),
                static_cast<long long>(n), reference.c_str());
    std::printf("load + compile: %.1f ms\n",
                std::chrono::duration<double, std::milli>(t1 - t0).count());
    std::printf("latency per batch of %lld: median %.3f ms, min %.3f ms (%zu runs)\n",
                static_cast<long long>(n), ms[ms.size() / 2], ms.front(), ms.size());
    std::printf("placement: %s", model->summary().c_str());
    return 0;
  } catch (const lumen::Error& e) {
    std::fprintf(stderr, "classify_digits: %s\n", e.what());
    return 1;
  }
}
