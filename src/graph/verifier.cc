// Graph::verify: every structural invariant, checked without trusting any of them.
#include <algorithm>

#include "graph/schema.h"
#include "lumen/graph.h"

namespace lumen {

void Graph::verify() const {
  auto fail = [](const std::string& msg) { throw InvalidModel("verify: " + msg); };
  for (int i = 0; i < num_values(); ++i) {
    const Value& v = values_[i];
    if (v.id != i)
      fail("value '" + v.name + "' has id " + std::to_string(v.id) + " at " + std::to_string(i));
    if (v.producer >= num_nodes()) fail("value '" + v.name + "' has a bad producer");
    if (v.producer >= 0) {
      const Node& p = nodes_[v.producer];
      if (std::find(p.outputs.begin(), p.outputs.end(), i) == p.outputs.end())
        fail("value '" + v.name + "' is not an output of its producer '" + p.name + "'");
    }
    if (v.data && !(TensorType{v.data->dtype(), v.data->shape()} == v.type))
      fail("value '" + v.name + "' holds data of another type than " + v.type.to_string());
    for (int c : v.consumers) {
      if (c < 0 || c >= num_nodes()) fail("value '" + v.name + "' has a bad consumer");
      const auto& ins = nodes_[c].inputs;
      if (std::find(ins.begin(), ins.end(), i) == ins.end())
        fail("value '" + v.name + "' lists consumer '" + nodes_[c].name + "' that does not use it");
    }
  }
  for (int i = 0; i < num_nodes(); ++i) {
    const Node& n = nodes_[i];
    if (n.removed) continue;
    if (n.id != i) fail("node '" + n.name + "' has a wrong id");
    if (!has_schema(n.op)) fail("node '" + n.name + "' has an op without a schema");
    for (int in : n.inputs) {
      if (in < -1 || in >= num_values()) fail("node '" + n.name + "' has a dangling input");
      if (in < 0) continue;
      const Value& v = values_[in];
      if (v.producer < 0 && !v.is_input && !v.data)
        fail("input '" + v.name + "' of node '" + n.name + "' is produced by nothing");
      if (v.producer >= 0 && nodes_[v.producer].removed)
        fail("input '" + v.name + "' of node '" + n.name + "' comes from a removed node");
      if (std::count(v.consumers.begin(), v.consumers.end(), i) !=
          std::count(n.inputs.begin(), n.inputs.end(), in))
        fail("value '" + v.name + "' does not list node '" + n.name + "' as its consumer");
    }
    for (int out : n.outputs)
      if (out < 0 || out >= num_values() || values_[out].producer != i)
        fail("node '" + n.name + "' has an output it does not produce");
  }
  for (int out : outputs_) {
    const Value& v = values_[out];
    if (v.producer >= 0 && nodes_[v.producer].removed)
      fail("graph output '" + v.name + "' comes from a removed node");
    if (v.producer < 0 && !v.is_input && !v.data)
      fail("graph output '" + v.name + "' is produced by nothing");
  }
  topological_order();  // throws on a cycle
}

}  // namespace lumen
