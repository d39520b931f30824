// Text and Graphviz forms of a graph.
#include <sstream>

#include "graph/op_kind.h"
#include "lumen/graph.h"

namespace lumen {
namespace {

std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string Graph::to_text() const {
  std::ostringstream os;
  os << "graph(";
  for (size_t i = 0; i < inputs_.size(); ++i)
    os << (i ? ", " : "") << "%" << values_[inputs_[i]].name << ": "
       << values_[inputs_[i]].type.to_string();
  os << ")\n";
  for (int id : topological_order()) {
    const Node& n = nodes_[id];
    os << "  ";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      os << (k ? ", " : "") << "%" << values_[n.outputs[k]].name << ": "
         << values_[n.outputs[k]].type.to_string();
    os << " = " << op_name(n.op) << "(";
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      os << (k ? ", " : "");
      if (n.inputs[k] < 0) {
        os << "_";
      } else {
        os << "%" << values_[n.inputs[k]].name;
      }
    }
    os << ")";
    if (!n.attrs.empty()) {
      os << " {";
      bool first = true;
      for (const auto& [key, attr] : n.attrs) {
        os << (first ? "" : ", ") << key << "=" << attr.to_string();
        first = false;
      }
      os << "}";
    }
    if (!n.backend.empty()) os << " @" << n.backend;
    os << "  # " << n.name << "\n";
  }
  os << "  return ";
  for (size_t i = 0; i < outputs_.size(); ++i)
    os << (i ? ", " : "") << "%" << values_[outputs_[i]].name;
  os << "\n";
  return os.str();
}

std::string Graph::to_dot() const {
  std::ostringstream os;
  os << "digraph lumen {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  for (int in : inputs_)
    os << "  v" << in << " [shape=ellipse, label=\"" << dot_escape(values_[in].name) << "\\n"
       << values_[in].type.to_string() << "\"];\n";
  for (int out : outputs_)
    os << "  o" << out << " [shape=ellipse, style=bold, label=\"" << dot_escape(values_[out].name)
       << "\"];\n";
  for (int id : topological_order()) {
    const Node& n = nodes_[id];
    os << "  n" << id << " [shape=box, label=\"" << op_name(n.op) << "\\n"
       << dot_escape(n.name) << (n.backend.empty() ? "" : "\\n@" + n.backend) << "\"];\n";
    for (int in : n.inputs) {
      if (in < 0) continue;
      const Value& v = values_[in];
      if (v.producer >= 0) {
        os << "  n" << v.producer << " -> n" << id << " [label=\"" << v.type.to_string()
           << "\"];\n";
      } else if (v.is_input) {
        os << "  v" << in << " -> n" << id << ";\n";
      }
    }
  }
  for (int out : outputs_)
    if (values_[out].producer >= 0) os << "  n" << values_[out].producer << " -> o" << out << ";\n";
  os << "}\n";
  return os.str();
}

}  // namespace lumen
