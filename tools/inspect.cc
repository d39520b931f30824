// `lumen inspect MODEL.onnx [--dot FILE]`: what a model holds, without running it.
#include <cstdio>
#include <fstream>
#include <map>

#include "graph/op_kind.h"
#include "lumen/lumen.h"
#include "lumen/onnx.h"
#include "tools/commands.h"

namespace lumen::cli {

int inspect_model(const std::vector<std::string>& args) {
  if (args.empty()) throw InvalidArgument("lumen inspect: give a model file");
  std::string dot;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--dot" && i + 1 < args.size()) {
      dot = args[++i];
    } else {
      throw InvalidArgument("lumen inspect: unknown argument '" + args[i] + "'");
    }
  }
  OnnxModelInfo info;
  Graph graph = load_onnx(args[0], {}, &info);
  std::printf("model     %s\nproducer  %s\nir        %lld\nopset     %lld\n", args[0].c_str(),
              info.producer.c_str(), static_cast<long long>(info.ir_version),
              static_cast<long long>(info.opset));
  for (const OnnxInputInfo& in : info.inputs) {
    std::string dims;
    for (size_t i = 0; i < in.dims.size(); ++i)
      dims += (i ? ", " : "") + (in.dims[i] < 0 ? in.symbols[i] : std::to_string(in.dims[i]));
    std::printf("input     %s: %s[%s]\n", in.name.c_str(), dtype_name(in.dtype), dims.c_str());
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
  for (const auto& [op, count] : histogram) std::printf("  %-28s %d\n", op.c_str(), count);
  if (!dot.empty()) {
    std::ofstream out(dot);
    out << graph.to_dot();
    if (!out) throw IoError("cannot write '" + dot + "'");
    std::printf("wrote %s\n", dot.c_str());
  }
  return 0;
}

}  // namespace lumen::cli
