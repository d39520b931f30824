// Graph::optimize. The pass manager and its passes are the optimizer issue's work; for now this
// removes nodes whose results nothing reads and re-checks the graph.
#include <algorithm>

#include "lumen/graph.h"

namespace lumen {

void Graph::optimize() {
  bool changed = true;
  while (changed) {
    changed = false;
    for (Node& n : nodes_) {
      if (n.removed) continue;
      bool used = false;
      for (int out : n.outputs) {
        const Value& v = values_[out];
        for (int c : v.consumers) used = used || !nodes_[c].removed;
        used = used || v.is_output;
      }
      if (used) continue;
      n.removed = true;
      for (int in : n.inputs) {
        if (in < 0) continue;
        auto& cons = values_[in].consumers;
        cons.erase(std::find(cons.begin(), cons.end(), n.id));
      }
      changed = true;
    }
  }
  verify();
}

}  // namespace lumen
