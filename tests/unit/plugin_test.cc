// Backend plugins (lumen/plugin.h): a CPU-only run loads none; a plugin for this version
// registers its backend once; a missing file, a library without the entry point and a plugin
// built for another version each give a DeviceError naming the file, and register nothing.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "backends/backend.h"
#include "lumen/lumen.h"
#include "ops/op_test_util.h"

namespace lumen {
namespace {

std::string mapped_files() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str();
}

bool lists(const std::vector<std::string>& lines, const std::string& needle) {
  for (const std::string& line : lines)
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

void expect_device_error(const std::string& path, const std::string& why) {
  try {
    load_backend_plugin(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const DeviceError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(why), std::string::npos) << what;
  }
}

// First in the file: the whole executable has asked for the CPU alone up to here.
TEST(Plugins, CpuWorkLoadsNoPlugin) {
  Runtime rt;
  Graph graph;
  Tensor w = test::random_tensor({16, 8}, 3);
  Value* x = graph.add_input("x", {2, 16});
  graph.mark_output(
      graph.add_op("Relu", {graph.add_op("MatMul", {x, graph.add_constant("w", w)})}));
  graph.optimize();
  CompileOptions options;
  options.backends = {"cpu"};
  Executable* exe = graph.compile(&rt, options);
  Tensor input = test::random_tensor({2, 16}, 4);
  std::vector<Tensor> out = exe->execute({input});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(mapped_files().find("liblumen_cuda"), std::string::npos);
  EXPECT_EQ(mapped_files().find("libcudart"), std::string::npos);
}

TEST(Plugins, MissingFileNamesItself) {
  expect_device_error("/nonexistent/liblumen_nothing.so.0", "No such file");
  EXPECT_TRUE(lists(backend_plugins(), "/nonexistent/liblumen_nothing.so.0: failed"));
}

TEST(Plugins, LibraryWithoutEntryPointIsRefused) {
  expect_device_error(LUMEN_TEST_NOT_A_PLUGIN, "not a Lumen backend plugin");
}

TEST(Plugins, OtherVersionIsRefusedBeforeRegistering) {
  expect_device_error(LUMEN_TEST_OTHER_VERSION_PLUGIN, "built for Lumen 0.0.0-other");
  EXPECT_EQ(find_backend("plugin_test"), nullptr);
}

TEST(Plugins, PluginRegistersItsBackendOnce) {
  EXPECT_EQ(find_backend("plugin_test"), nullptr);
  load_backend_plugin(LUMEN_TEST_PLUGIN);
  load_backend_plugin(LUMEN_TEST_PLUGIN);  // again: nothing more
  Backend* b = find_backend("plugin_test");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->device(), Device::cpu());
  int listed = 0;
  for (Backend* each : available_backends()) listed += each->name() == "plugin_test";
  EXPECT_EQ(listed, 1);
  void* handle = dlopen(LUMEN_TEST_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto registrations = reinterpret_cast<int (*)()>(dlsym(handle, "fake_plugin_registrations"));
  ASSERT_NE(registrations, nullptr);
  EXPECT_EQ(registrations(), 1);
  dlclose(handle);
  EXPECT_TRUE(lists(backend_plugins(), std::string(LUMEN_TEST_PLUGIN) + ": loaded"));
  // A compile that lists it places nothing there (it runs no op) and falls back to the host.
  Runtime rt;
  Graph graph;
  Value* x = graph.add_input("x", {4});
  graph.mark_output(graph.add_op("Relu", {x}));
  CompileOptions options;
  options.backends = {"plugin_test", "cpu"};
  Tensor input = test::random_tensor({4}, 5);
  std::vector<Tensor> out = graph.compile(&rt, options)->execute({input});
  ASSERT_EQ(out.size(), 1u);
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(out[0].data<float>()[i], std::max(0.0f, input.data<float>()[i]));
}

}  // namespace
}  // namespace lumen
