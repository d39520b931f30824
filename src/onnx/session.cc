// OnnxSession: one ONNX file, one compiled plan per distinct set of input shapes.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lumen/onnx.h"

namespace lumen {

// A plan keeps its Graph alive next to the Executable compiled from it.
struct OnnxSession::Plan {
  Graph graph;
  Executable* executable = nullptr;
};

OnnxSession::OnnxSession(const std::string& path, OnnxLoadOptions options, CompileOptions compile)
    : options_(std::move(options)), compile_(std::move(compile)) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open '" + path + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (!in && !in.eof()) throw IoError("cannot read '" + path + "'");
  bytes_ = std::move(buffer).str();
  base_dir_ = std::filesystem::path(path).parent_path().string();
  options_.input_shapes.clear();
  // Load once with the default dims: a malformed or unsupported model fails here, not at run.
  load_onnx_bytes(bytes_, options_, base_dir_, &info_);
}

OnnxSession::~OnnxSession() = default;

Executable* OnnxSession::plan_for(const std::map<std::string, Shape>& shapes) {
  std::string key;
  for (const auto& [name, shape] : shapes) key += name + "=" + shape.to_string() + ";";
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second->executable;
  OnnxLoadOptions options = options_;
  options.input_shapes = shapes;
  auto plan = std::make_unique<Plan>();
  plan->graph = load_onnx_bytes(bytes_, options, base_dir_);
  // With "auto" every available backend may run the graph.
  plan->graph.optimize(compile_.is_auto() ? std::vector<std::string>{} : compile_.backends);
  plan->executable = plan->graph.compile(&runtime_, compile_);
  Executable* executable = plan->executable;
  plans_.emplace(key, std::move(plan));
  return executable;
}

std::vector<Tensor> OnnxSession::run(const std::map<std::string, Tensor>& inputs) {
  std::map<std::string, Shape> shapes;
  for (const OnnxInputInfo& declared : info_.inputs) {
    if (options_.input_values.count(declared.name)) continue;
    auto it = inputs.find(declared.name);
    if (it == inputs.end())
      throw InvalidArgument("OnnxSession::run: input '" + declared.name + "' is missing");
    if (!it->second.defined())
      throw InvalidArgument("OnnxSession::run: input '" + declared.name + "' is undefined");
    shapes[declared.name] = it->second.shape();
  }
  for (const auto& [name, tensor] : inputs)
    if (!shapes.count(name))
      throw InvalidArgument("OnnxSession::run: the model has no input named '" + name + "'");
  return plan_for(shapes)->execute(inputs);
}

size_t OnnxSession::num_plans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

}  // namespace lumen
