// `lumen inspect MODEL.onnx [--optimized] [--passes] [--dot FILE] [--svg FILE] [--memory]
// [--shape NAME=1x3x224x224]`: what a model holds, without running it; --optimized runs the
// optimizer first (--passes also prints what each pass did), so --dot/--svg draw and --memory
// plans the optimized graph; --memory compiles it and prints the arena plan, and for a model with
// symbolic dims the arena at sizes of each.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "tools/commands.h"

namespace lumen::cli {
namespace {

double mb(size_t bytes) {
  return static_cast<double>(bytes) / 1e6;
}

// Runs the optimizer and prints, for each pass and round that changed the graph, the live node
// count and every op whose count changed, then the op histogram after optimization.
void print_passes(Graph& graph) {
  std::vector<PassStats> stats = graph.optimize();
  std::printf("passes\n");
  for (const PassStats& s : stats) {
    if (!s.changed) continue;
    std::printf("  round %d %-14s nodes %d -> %d\n", s.round, s.pass.c_str(), s.nodes_before,
                s.nodes_after);
    std::map<std::string, std::pair<int, int>> diff;
    for (const auto& [op, count] : s.ops_before) diff[op].first = count;
    for (const auto& [op, count] : s.ops_after) diff[op].second = count;
    for (const auto& [op, counts] : diff)
      if (counts.first != counts.second)
        std::printf("    %-28s %d -> %d\n", op.c_str(), counts.first, counts.second);
  }
}

// The arena plan of the compiled model: no-reuse total, lower bound, arena, largest tensors.
void print_memory_plan(Graph& graph) {
  Runtime runtime;
  Executable* executable = graph.compile(&runtime);
  MemoryReport r = executable->memory_report();
  std::printf("memory    intermediates %zu, %zu steps in place\n", r.tensors.size(),
              r.in_place_steps);
  std::printf("  no reuse (sum of all intermediates)   %10.2f MB\n", mb(r.no_reuse_bytes));
  std::printf("  lower bound (most alive at one step)  %10.2f MB\n", mb(r.lower_bound_bytes));
  std::printf(
      "  planned arena                         %10.2f MB (%.1f%% of no reuse, %.1f%% "
      "above the lower bound)\n",
      mb(r.arena_bytes), r.no_reuse_bytes ? 100.0 * r.arena_bytes / r.no_reuse_bytes : 0.0,
      r.lower_bound_bytes ? 100.0 * r.arena_bytes / r.lower_bound_bytes - 100.0 : 0.0);
  std::printf("  largest intermediates:\n");
  for (size_t i = 0; i < r.tensors.size() && i < 5; ++i)
    std::printf("    %-40s %-24s %8.2f MB at %zu\n", r.tensors[i].name.c_str(),
                r.tensors[i].type.to_string().c_str(), mb(r.tensors[i].bytes), r.tensors[i].offset);
}

// The arena as a function of the symbolic dims the caller did not fix: for each one in turn, plans
// of the model's OnnxSession (one compile, then plans from its shape family) at sizes 2 to 512
// (the others at 1, or as fixed), its arena and lower bound at each, and the line through the
// arena where it is one (arena = a + b * dim at every size planned).
void print_memory_by_dims(const std::string& path, const OnnxModelInfo& info,
                          const OnnxLoadOptions& options) {
  std::map<std::string, Shape> base;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, int>>>> symbols;
  for (const OnnxInputInfo& in : info.inputs) {
    if (in.kind != OnnxValueKind::kTensor) return;
    auto fixed = options.input_shapes.find(in.name);
    std::vector<int64_t> dims = in.dims;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (dims[d] >= 0) continue;
      if (fixed != options.input_shapes.end()) {
        dims[d] = fixed->second[static_cast<int>(d)];
        continue;
      }
      dims[d] = 1;
      const std::string name =
          in.symbols[d].empty() ? in.name + "#" + std::to_string(d) : in.symbols[d];
      auto it = std::find_if(symbols.begin(), symbols.end(),
                             [&](const auto& s) { return s.first == name; });
      if (it == symbols.end()) it = symbols.insert(symbols.end(), {name, {}});
      it->second.push_back({in.name, static_cast<int>(d)});
    }
    base[in.name] = Shape(dims);
  }
  if (symbols.empty() || !info.value_inputs.empty()) return;
  OnnxSession session(path, options);
  std::printf("memory by size of the symbolic dims (the others at 1)\n");
  for (const auto& [name, places] : symbols) {
    std::vector<std::pair<int64_t, size_t>> arenas;
    for (int64_t size : {2, 8, 32, 128, 512}) {
      std::map<std::string, Shape> shapes = base;
      for (const auto& [input, d] : places) shapes[input][d] = size;
      Executable* plan = nullptr;
      try {
        plan = session.plan_for(shapes);
      } catch (const ShapeError&) {
        break;  // past what the model takes (a position table's length)
      }
      if (plan == nullptr) break;
      const MemoryReport r = plan->memory_report();
      std::printf("  %-12s %6lld   arena %10.2f MB   lower bound %10.2f MB\n", name.c_str(),
                  static_cast<long long>(size), mb(r.arena_bytes), mb(r.lower_bound_bytes));
      arenas.push_back({size, r.arena_bytes});
    }
    if (arenas.size() < 3) continue;
    const auto [x0, y0] = arenas.front();
    const auto [x1, y1] = arenas.back();
    const double slope = (static_cast<double>(y1) - static_cast<double>(y0)) / double(x1 - x0);
    bool line = true;
    for (const auto& [x, y] : arenas)
      line = line && std::abs(static_cast<double>(y0) + slope * double(x - x0) - double(y)) < 1.0;
    if (line)
      std::printf("  arena = %.0f + %.0f * %s bytes at every size above\n",
                  static_cast<double>(y0) - slope * double(x0), slope, name.c_str());
    else
      std::printf("  arena is not one line in %s (the planner packs tensors of other sizes)\n",
                  name.c_str());
  }
  const OnnxSession::Stats st = session.stats();
  std::printf("  (%zu compile%s, %zu plans made from shape families)\n", st.compiles,
              st.compiles == 1 ? "" : "s", st.sized);
}

// Multiply-adds times two of the ops that dominate a model's arithmetic (convolutions and matrix
// products; everything else is memory-bound and left out), as is usual for a model's FLOP count.
int64_t count_flops(const Graph& graph) {
  int64_t flops = 0;
  for (int id : graph.topological_order()) {
    const Node& n = graph.node(id);
    std::string op = op_name(n.op);
    const Shape& out = graph.value(n.outputs[0]).type.shape;
    if ((op == "Conv" || op == "FusedConv") && n.inputs.size() >= 2) {
      const Shape& w = graph.value(n.inputs[1]).type.shape;  // [Cout, Cin/group, k...]
      if (w.rank() >= 1 && w[0] > 0) flops += 2 * out.numel() * (w.numel() / w[0]);
    } else if ((op == "MatMul" || op == "FusedMatMul" || op == "MatMulNBits") &&
               n.inputs.size() >= 2) {
      const Shape& a = graph.value(n.inputs[0]).type.shape;
      int64_t k = a.rank() >= 2 ? a[a.rank() - 1] : a.numel();
      auto trans_a = n.attrs.find("trans_a");  // FusedMatMul may read A transposed
      if (trans_a != n.attrs.end() && trans_a->second.as_int() != 0 && a.rank() >= 2)
        k = a[a.rank() - 2];
      flops += 2 * out.numel() * k;
    } else if (op == "Gemm" && out.rank() == 2 && out[0] > 0) {
      flops += 2 * out.numel() * (graph.value(n.inputs[0]).type.shape.numel() / out[0]);
    } else if (op == "GroupedMatMul") {  // one product per output, all of one A [..., K]
      const Shape& a = graph.value(n.inputs[0]).type.shape;
      for (int y : n.outputs) flops += 2 * graph.value(y).type.shape.numel() * a[a.rank() - 1];
    }
  }
  return flops;
}

// Renders DOT text to an SVG file with Graphviz's `dot` (Debian's graphviz package).
void write_svg(const std::string& dot_text, const std::string& path) {
  std::string command = "dot -Tsvg -o '" + path + "'";
  if (path.find('\'') != std::string::npos)
    throw InvalidArgument("lumen inspect: --svg path must not contain a quote");
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "w"), pclose);
  if (!pipe) throw IoError("lumen inspect: cannot start Graphviz's dot");
  std::fwrite(dot_text.data(), 1, dot_text.size(), pipe.get());
  int status = pclose(pipe.release());
  if (status != 0)
    throw IoError("lumen inspect: Graphviz's `dot -Tsvg` failed (status " + std::to_string(status) +
                  "); install the graphviz package");
}

}  // namespace

int inspect_model(const std::vector<std::string>& args) {
  if (args.empty()) throw InvalidArgument("lumen inspect: give a model file");
  std::string dot;
  std::string svg;
  bool memory = false;
  bool passes = false;
  bool optimized = false;
  OnnxLoadOptions options;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--dot" && i + 1 < args.size()) {
      dot = args[++i];
    } else if (args[i] == "--svg" && i + 1 < args.size()) {
      svg = args[++i];
    } else if (args[i] == "--passes") {
      passes = true;
    } else if (args[i] == "--optimized") {
      optimized = true;
    } else if (args[i] == "--memory") {
      memory = true;
    } else if (args[i] == "--shape" && i + 1 < args.size()) {
      auto [name, shape] = parse_shape_arg(args[++i]);
      options.input_shapes[name] = shape;
    } else {
      throw InvalidArgument("lumen inspect: unknown argument '" + args[i] + "'");
    }
  }
  OnnxModelInfo info;
  Graph graph = load_onnx(args[0], options, &info);
  std::printf("model     %s\nproducer  %s\nir        %lld\nopset     %lld\n", args[0].c_str(),
              info.producer.c_str(), static_cast<long long>(info.ir_version),
              static_cast<long long>(info.opset));
  for (const OnnxInputInfo& in : info.inputs) {
    std::string dims;
    for (size_t i = 0; i < in.dims.size(); ++i)
      dims += (i ? ", " : "") + (in.dims[i] < 0 ? in.symbols[i] : std::to_string(in.dims[i]));
    const char* kind = in.kind == OnnxValueKind::kSequence           ? "sequence of "
                       : in.kind == OnnxValueKind::kOptionalTensor   ? "optional "
                       : in.kind == OnnxValueKind::kOptionalSequence ? "optional sequence of "
                                                                     : "";
    std::printf("input     %s: %s%s[%s]\n", in.name.c_str(), kind, dtype_name(in.dtype),
                dims.c_str());
  }
  for (int id : graph.outputs())
    std::printf("output    %s: %s (with symbolic dims set to 1)\n", graph.value(id).name.c_str(),
                graph.value(id).type.to_string().c_str());
  int64_t params = 0;
  int64_t bytes = 0;
  for (int v = 0; v < graph.num_values(); ++v) {
    const Value& value = graph.value(v);
    if (value.is_weight()) {
      params += value.data->numel();
      bytes += static_cast<int64_t>(value.data->nbytes());
    }
  }
  std::printf("params    %lld (%.2f MB)\n", static_cast<long long>(params), bytes / 1e6);
  std::map<std::string, int> histogram;
  int nodes = 0;
  for (int id : graph.topological_order()) {
    ++histogram[op_name(graph.node(id).op)];
    ++nodes;
  }
  std::printf("nodes     %d\n", nodes);
  int64_t flops = count_flops(graph);
  std::printf("flops     %lld (%.3f GFLOP in convolutions and matrix products)\n",
              static_cast<long long>(flops), static_cast<double>(flops) / 1e9);
  for (const auto& [op, count] : histogram) std::printf("  %-28s %d\n", op.c_str(), count);
  if (passes || optimized) {
    if (passes) {
      print_passes(graph);
    } else {
      graph.optimize();
    }
    std::map<std::string, int> optimized;
    int live = 0;
    for (int id : graph.topological_order()) {
      ++optimized[op_name(graph.node(id).op)];
      ++live;
    }
    std::printf("nodes     %d after optimization\n", live);
    for (const auto& [op, count] : optimized) std::printf("  %-28s %d\n", op.c_str(), count);
  }
  if (!dot.empty()) {
    std::ofstream out(dot);
    out << graph.to_dot();
    if (!out) throw IoError("cannot write '" + dot + "'");
    std::printf("wrote %s\n", dot.c_str());
  }
  if (!svg.empty()) {
    write_svg(graph.to_dot(), svg);
    std::printf("wrote %s\n", svg.c_str());
  }
  if (memory) {
    print_memory_plan(graph);
    print_memory_by_dims(args[0], info, options);
  }
  return 0;
}

}  // namespace lumen::cli
