// Dead code elimination: removes nodes none of whose outputs is read by a live node or is a graph
// output.
#include "passes/pass.h"
#include "passes/rewrite.h"

namespace lumen {
namespace {

class DeadCodePass : public Pass {
 public:
  const char* name() const override { return "dead-code"; }
  bool run(Graph& graph) override {
    bool changed = false;
    bool again = true;
    while (again) {
      again = false;
      for (int id = graph.num_nodes() - 1; id >= 0; --id) {
        const Node& n = graph.node(id);
        if (n.removed) continue;
        bool used = false;
        for (int out : n.outputs) {
          const Value& v = graph.value(out);
          if (v.producer != id) continue;
          used = used || v.is_output;
          for (int c : v.consumers) used = used || !graph.node(c).removed;
        }
        if (used) continue;
        remove_node(graph, id);
        again = changed = true;
      }
    }
    return changed;
  }
};

}  // namespace

std::unique_ptr<Pass> make_dead_code_pass() {
  return std::make_unique<DeadCodePass>();
}

}  // namespace lumen
