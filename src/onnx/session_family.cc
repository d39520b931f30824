// OnnxSession's plans for new sizes of symbolic dims: from a shape family (onnx/shape_family.h)
// and the kernels of the family's first plan (runtime/kernel_donor.h), without a compile.
#include "backends/kernel.h"
#include "lumen/onnx.h"
#include "onnx/session_state.h"
#include "runtime/kernel_donor.h"

namespace lumen {
namespace {

// The symbolic dims of sizes 2 and more in `shapes`: their names, sizes, the family key (the
// shapes with those dims as "*"), and where each occurs. Empty names where the shapes have none,
// or where one symbol has two sizes (then the shapes compile on their own).
struct SymbolPoint {
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  std::string key;
  std::map<std::string, std::vector<std::pair<int, int>>> where;  // input name -> (dim, symbol)
};

// The name of dim d of a declared input: its symbol, or "input#d" for an unnamed one.
std::string symbol_name(const OnnxInputInfo& in, int d) {
  const bool named = d < static_cast<int>(in.symbols.size()) && !in.symbols[d].empty();
  return named ? in.symbols[d] : in.name + "#" + std::to_string(d);
}

SymbolPoint symbol_point(const OnnxModelInfo& info, const std::map<std::string, Shape>& shapes) {
  SymbolPoint p;
  std::map<std::string, int64_t> size_of;
  for (const OnnxInputInfo& in : info.inputs) {
    auto it = shapes.find(in.name);
    if (it == shapes.end()) continue;
    const Shape& s = it->second;
    if (static_cast<int>(in.dims.size()) != s.rank()) return {};
    for (int d = 0; d < s.rank(); ++d) {
      if (in.dims[d] >= 0) continue;
      auto [at, fresh] = size_of.emplace(symbol_name(in, d), s[d]);
      if (!fresh && at->second != s[d]) return {};
    }
  }
  for (const auto& [name, size] : size_of)
    if (size >= 2) {
      p.names.push_back(name);
      p.sizes.push_back(size);
    }
  if (p.names.empty()) return {};
  for (const auto& [input, shape] : shapes) {
    p.key += input + "=[";
    const OnnxInputInfo* declared = nullptr;
    for (const OnnxInputInfo& in : info.inputs)
      if (in.name == input) declared = &in;
    for (int d = 0; d < shape.rank(); ++d) {
      int symbol = -1;
      if (declared != nullptr && declared->dims[d] < 0) {
        const std::string name = symbol_name(*declared, d);
        for (size_t j = 0; j < p.names.size(); ++j)
          if (p.names[j] == name) symbol = static_cast<int>(j);
      }
      if (symbol >= 0) p.where[input].push_back({d, symbol});
      p.key += (d ? "," : "") + (symbol >= 0 ? "*" : std::to_string(shape[d]));
    }
    p.key += "];";
  }
  return p;
}

std::map<std::string, Shape> shapes_at(std::map<std::string, Shape> shapes, const SymbolPoint& p,
                                       const std::vector<int64_t>& sizes) {
  for (const auto& [input, dims] : p.where)
    for (const auto& [d, symbol] : dims) shapes[input][d] = sizes[symbol];
  return shapes;
}

}  // namespace

bool OnnxSession::plan_from_family_locked(const std::map<std::string, Shape>& shapes,
                                          const OnnxLoadOptions& options,
                                          const std::shared_ptr<Plan>& plan) {
  const SymbolPoint point = symbol_point(info_, shapes);
  if (point.names.empty()) return false;
  const std::vector<std::string>& backends =
      compile_.is_auto() ? std::vector<std::string>{} : compile_.backends;
  auto it = families_.find(point.key);
  if (it == families_.end()) {
    auto family = std::make_shared<Family>();
    families_.emplace(point.key, family);
    const ShapeFamily::Builder build = [&](const std::vector<int64_t>& sizes,
                                           const std::set<std::string>& unfolded) {
      OnnxLoadOptions at = options;
      at.input_shapes = shapes_at(shapes, point, sizes);
      at.unfolded = unfolded;
      OnnxModelInfo built;
      Graph g = onnx_import::load_onnx_model(weights_->model, weights_->base_dir, at,
                                             weights_->cache, &built);
      if (family->forms.empty()) family->forms = std::move(built.output_forms);
      if (g.outputs().empty()) throw InvalidModel("the graph computes nothing");
      g.optimize(backends);
      return g;
    };
    Graph graph;
    family->shape = ShapeFamily::fit(point.sizes, build, &graph, &family->why);
    if (!family->shape) {
      stats_.refused = family->why;
      return false;
    }
    ++stats_.families;
    ++stats_.compiles;
    plan->graph = std::move(graph);
    plan->forms = family->forms;
    AnyShapeScope any_shape;
    plan->executable = plan->graph.compile(&plan->runtime, compile_);
    family->first = plan;
    return true;
  }
  const Family& family = *it->second;
  if (!family.shape) return false;
  try {
    plan->graph = family.shape->instantiate(point.sizes);
    plan->forms = family.forms;
    const KernelDonations before = kernel_donations();
    {
      KernelDonorScope donor(*family.first->executable);
      plan->executable = plan->graph.compile(&plan->runtime, compile_);
    }
    const KernelDonations after = kernel_donations();
    stats_.kernels_shared += static_cast<size_t>(after.taken - before.taken);
    stats_.kernels_built += static_cast<size_t>(after.built - before.built);
  } catch (const Error&) {
    // Sizes the family does not explain (outside the range the model takes): compiled on their
    // own, which gives the error the model's own shapes give, if any.
    plan->executable = nullptr;
    return false;
  }
  ++stats_.sized;
  return true;
}

}  // namespace lumen
