// Common subexpression elimination: of two deterministic nodes with the same op, the same inputs
// and equal attributes, the later one is removed and its readers read the earlier one's outputs.
#include <map>
#include <utility>

#include "graph/schema.h"
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

class CsePass : public Pass {
 public:
  const char* name() const override { return "cse"; }
  bool run(Graph& graph) override {
    bool changed = false;
    std::map<std::pair<OpKind, std::vector<int>>, std::vector<int>> seen;
    for (int id : graph.topological_order()) {
      const Node& n = graph.node(id);
      if (!op_schema(n.op).foldable) continue;  // not deterministic (or control flow)
      std::vector<int>& same = seen[{n.op, n.inputs}];
      int original = -1;
      for (int other : same)
        if (equivalent(graph, graph.node(other), n)) original = other;
      if (original < 0) {
        same.push_back(id);
        continue;
      }
      const Node& o = graph.node(original);
      bool movable = true;
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        const Value& v = graph.value(n.outputs[k]);
        bool used = v.is_output || !v.consumers.empty();
        if (used && !can_replace_uses(graph, n.outputs[k], o.outputs[k])) movable = false;
      }
      if (!movable) {
        same.push_back(id);
        continue;
      }
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        const Value& v = graph.value(n.outputs[k]);
        if (v.is_output || !v.consumers.empty()) replace_uses(graph, n.outputs[k], o.outputs[k]);
      }
      remove_node(graph, id);
      changed = true;
    }
    return changed;
  }

 private:
  static bool equivalent(const Graph& graph, const Node& a, const Node& b) {
    if (a.outputs.size() != b.outputs.size()) return false;
    for (size_t k = 0; k < a.outputs.size(); ++k)
      if (!(graph.value(a.outputs[k]).type == graph.value(b.outputs[k]).type)) return false;
    return attributes_equal(a.attrs, b.attrs);
  }
};

}  // namespace

std::unique_ptr<Pass> make_cse_pass() {
  return std::make_unique<CsePass>();
}

}  // namespace lumen
