// ShapeFamily: probes, the multilinear fit of every size-derived number, and instantiation.
#include "onnx/shape_family.h"

#include <cstring>

#include "lumen/error.h"

namespace lumen {
namespace {

// Integer constants up to this many elements are numbers that may follow the sizes (a Reshape's
// target, a Slice's ends); larger constants must be the same in every probe.
constexpr int64_t kMaxSizeConstant = 64;
constexpr size_t kMaxSymbols = 3;

bool is_size_constant(const Tensor& t) {
  return (t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32) &&
         t.numel() <= kMaxSizeConstant;
}

int64_t element(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
}

bool same_data(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.nbytes() != b.nbytes()) return false;
  if (a.raw_data() == b.raw_data()) return true;
  return std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

std::string float_bits(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

}  // namespace

// What a probe shows: its structure (everything that must not change with the sizes, as text)
// and its numbers, in a fixed walk order; `places` says where each number lives (kept for the
// first probe only).
struct ShapeFamily::Reading {
  std::string structure;
  std::vector<int64_t> numbers;
  std::vector<Place> places;
  std::string mismatch;  // a large constant or tensor attribute that differs from the first probe
  std::set<std::string> differing;  // the nodes that made those constants (folded)
};

namespace {

// Walks `g` into *out. With `first` (the first probe), large constants and tensor attributes are
// compared with its; with `places`, where each number lives is recorded.
template <typename Reading, typename Place>
void read_graph(const Graph& g, const Graph* first, bool places, Reading* out) {
  std::string& st = out->structure;
  const auto number = [&](int64_t v, typename Place::Kind kind, int id, int index,
                          const std::string& attr) {
    out->numbers.push_back(v);
    if (places) out->places.push_back({kind, id, index, attr});
  };
  st += std::to_string(g.num_values()) + " " + std::to_string(g.num_nodes()) + "|";
  for (int in : g.inputs()) st += std::to_string(in) + ",";
  st += "|";
  for (int o : g.outputs()) st += std::to_string(o) + ",";
  st += "\n";
  for (int id = 0; id < g.num_values(); ++id) {
    const Value& v = g.value(id);
    st += v.name + " " + dtype_name(v.type.dtype) + " " + std::to_string(v.type.shape.rank()) +
          " " + std::to_string(v.producer) + (v.is_input ? " in" : "") +
          (v.is_output ? " out" : "") + "\n";
    for (int d = 0; d < v.type.shape.rank(); ++d)
      number(v.type.shape.dims()[d], Place::Kind::kDim, id, d, "");
    if (!v.data) continue;
    const Tensor& t = *v.data;
    if (is_size_constant(t)) {
      st += "  small " + std::to_string(t.numel()) + "\n";
      for (int64_t i = 0; i < t.numel(); ++i)
        number(element(t, i), Place::Kind::kConstant, id, static_cast<int>(i), "");
      continue;
    }
    st += "  data\n";  // its size may follow the sizes: compared below
    if (first != nullptr) {
      const auto& f = id < first->num_values() ? first->value(id).data : std::nullopt;
      if (!f || !same_data(*f, t)) {
        if (out->mismatch.empty()) out->mismatch = "constant '" + v.name + "'";
        // Folded values lose their producer (constant_fold.cc); the node stays, removed.
        for (int nid = 0; nid < g.num_nodes(); ++nid)
          for (int o : g.node(nid).outputs)
            if (o == id) out->differing.insert(g.node(nid).name);
      }
    }
  }
  for (int id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    st += std::to_string(static_cast<int>(n.op)) + " " + n.name + (n.removed ? " removed" : "") +
          " <";
    for (int in : n.inputs) st += std::to_string(in) + ",";
    st += "> <";
    for (int o : n.outputs) st += std::to_string(o) + ",";
    st += ">\n";
    for (const auto& [name, a] : n.attrs) {
      st += "  " + name + ":" + attr_type_name(a.type());
      switch (a.type()) {
        case AttrType::kInt:
          number(a.as_int(), Place::Kind::kAttrInt, id, 0, name);
          break;
        case AttrType::kInts:
          st += " " + std::to_string(a.as_ints().size());
          for (size_t i = 0; i < a.as_ints().size(); ++i)
            number(a.as_ints()[i], Place::Kind::kAttrInts, id, static_cast<int>(i), name);
          break;
        case AttrType::kFloat:
          st += float_bits({a.as_float()});
          break;
        case AttrType::kFloats:
          st += float_bits(a.as_floats());
          break;
        case AttrType::kString:
          st += " " + a.as_string();
          break;
        case AttrType::kStrings:
          for (const std::string& s : a.as_strings()) st += " " + s;
          break;
        case AttrType::kTensor:
          if (first != nullptr && out->mismatch.empty()) {
            const Node& fn = first->node(id);
            auto it = fn.attrs.find(name);
            if (it == fn.attrs.end() || it->second.type() != AttrType::kTensor ||
                !same_data(it->second.as_tensor(), a.as_tensor()))
              out->mismatch = "attribute '" + name + "' of node '" + n.name + "'";
          }
          break;
        case AttrType::kGraph:
          // A subgraph's own shapes are not read here: a control-flow node is not sized.
          if (out->mismatch.empty()) out->mismatch = "the subgraph of node '" + n.name + "'";
          break;
      }
      st += "\n";
    }
  }
}

std::string point_text(const std::vector<int64_t>& p) {
  std::string s = "(";
  for (size_t i = 0; i < p.size(); ++i) s += (i ? ", " : "") + std::to_string(p[i]);
  return s + ")";
}

}  // namespace

ShapeFamily::~ShapeFamily() = default;

bool ShapeFamily::evaluate(const std::vector<int64_t>& corners, const std::vector<int64_t>& point,
                           int64_t* out) const {
  const size_t k = lo_.size();
  __int128 num = 0, den = 1;
  for (size_t j = 0; j < k; ++j) den *= hi_[j] - lo_[j];
  for (size_t c = 0; c < corners.size(); ++c) {
    __int128 w = corners[c];
    for (size_t j = 0; j < k; ++j) w *= ((c >> j) & 1) != 0 ? point[j] - lo_[j] : hi_[j] - point[j];
    num += w;
  }
  if (num % den != 0) return false;
  const __int128 v = num / den;
  if (v > INT64_MAX || v < INT64_MIN) return false;
  *out = static_cast<int64_t>(v);
  return true;
}

std::unique_ptr<ShapeFamily> ShapeFamily::fit(const std::vector<int64_t>& at, const Builder& build,
                                              Graph* graph_at, std::string* why) {
  std::set<std::string> unfolded;
  for (int attempt = 0;; ++attempt) {
    std::set<std::string> differing;
    auto family = fit_once(at, build, unfolded, graph_at, why, &differing);
    if (family || differing.empty() || attempt == 2) return family;
    unfolded.insert(differing.begin(), differing.end());
  }
}

std::unique_ptr<ShapeFamily> ShapeFamily::fit_once(const std::vector<int64_t>& at,
                                                   const Builder& build,
                                                   const std::set<std::string>& unfolded,
                                                   Graph* graph_at, std::string* why,
                                                   std::set<std::string>* differing) {
  const size_t k = at.size();
  if (k == 0 || k > kMaxSymbols) {
    *why = std::to_string(k) + " symbolic dims (a family takes 1 to 3)";
    return nullptr;
  }
  for (int64_t v : at)
    if (v < 2) {
      *why = "a symbolic dim of size " + std::to_string(v);
      return nullptr;
    }
  std::unique_ptr<ShapeFamily> family(new ShapeFamily());
  family->lo_ = at;
  family->hi_ = at;
  for (size_t j = 0; j < k; ++j) family->hi_[j] = at[j] > 2 ? at[j] - 1 : at[j] + 1;
  *graph_at = build(at, unfolded);
  Reading first;
  read_graph<Reading, Place>(*graph_at, nullptr, true, &first);
  if (!first.mismatch.empty()) {
    *why = first.mismatch + " is not sized";
    return nullptr;
  }
  const size_t corners = size_t{1} << k;
  std::vector<std::vector<int64_t>> numbers(corners);
  numbers[0] = first.numbers;
  // Builds and reads a probe; false (with *why) where it is not the first probe's graph, or where
  // it does not build (then *built is false too).
  bool built = true;
  const auto probe = [&](const std::vector<int64_t>& point, Reading* r) {
    Graph g;
    built = true;
    try {
      g = build(point, unfolded);
    } catch (const Error& e) {
      *why = "the build at " + point_text(point) + " failed: " + e.what();
      built = false;
      return false;
    }
    read_graph<Reading, Place>(g, graph_at, false, r);
    if (r->structure != first.structure || r->numbers.size() != first.numbers.size()) {
      *why = "the graph at " + point_text(point) + " has other nodes or values than at " +
             point_text(at);
      return false;
    }
    if (!r->mismatch.empty()) {
      differing->insert(r->differing.begin(), r->differing.end());
      *why = r->mismatch + " differs between " + point_text(at) + " and " + point_text(point);
      return false;
    }
    return true;
  };
  for (size_t c = 1; c < corners; ++c) {
    std::vector<int64_t> point = at;
    for (size_t j = 0; j < k; ++j)
      if (((c >> j) & 1) != 0) point[j] = family->hi_[j];
    Reading r;
    if (!probe(point, &r)) return nullptr;
    numbers[c] = std::move(r.numbers);
  }
  for (size_t i = 0; i < first.numbers.size(); ++i) {
    bool varies = false;
    for (size_t c = 1; c < corners; ++c) varies |= numbers[c][i] != numbers[0][i];
    if (!varies) continue;
    Varying v{first.places[i], std::vector<int64_t>(corners), i};
    for (size_t c = 0; c < corners; ++c) v.corners[c] = numbers[c][i];
    family->varying_.push_back(std::move(v));
  }
  // A probe off the grid checks every number: the first candidate point that builds (one past the
  // sizes the model takes does not). One that builds into another graph refuses the family: the
  // graph depends on the sizes in a way the numbers do not say.
  std::string last_failure;
  for (int t = 0; t < 3; ++t) {
    std::vector<int64_t> point(k);
    for (size_t j = 0; j < k; ++j) {
      const int64_t a = at[j];
      point[j] = t == 0 ? 2 * a + 1 : t == 1 ? a + 2 : std::max<int64_t>(a / 2, 2);
      if (point[j] == family->lo_[j] || point[j] == family->hi_[j]) point[j] = a + 3;
    }
    Reading r;
    if (!probe(point, &r)) {
      if (built) return nullptr;
      last_failure = *why;
      continue;
    }
    size_t next = 0;
    for (size_t i = 0; i < first.numbers.size(); ++i) {
      int64_t want = first.numbers[i];
      const bool varies = next < family->varying_.size() && family->varying_[next].number == i;
      if (varies && !family->evaluate(family->varying_[next++].corners, point, &want)) want = -1;
      if (want != r.numbers[i]) {
        *why = "a number of the graph (" + std::to_string(r.numbers[i]) + " at " +
               point_text(point) + ", predicted " + std::to_string(want) +
               ") is not multilinear in the sizes";
        return nullptr;
      }
    }
    family->keep_live(*graph_at);
    return family;
  }
  *why = "no check build: " + last_failure;
  return nullptr;
}

void ShapeFamily::keep_live(const Graph& graph) {
  std::vector<int> value_map, node_map;
  graph_ = graph.compacted(&value_map, &node_map);
  std::vector<Varying> kept;
  for (Varying& v : varying_) {
    const bool on_value =
        v.place.kind == Place::Kind::kDim || v.place.kind == Place::Kind::kConstant;
    const int id = on_value ? value_map[v.place.id] : node_map[v.place.id];
    if (id < 0) continue;  // a removed node or a dead value: no plan reads it
    v.place.id = id;
    kept.push_back(std::move(v));
  }
  varying_ = std::move(kept);
}

Graph ShapeFamily::instantiate(const std::vector<int64_t>& point) const {
  if (point.size() != lo_.size())
    throw InvalidArgument("ShapeFamily::instantiate: " + std::to_string(point.size()) +
                          " sizes for " + std::to_string(lo_.size()) + " symbols");
  Graph g = graph_.clone();
  std::vector<bool> copied(static_cast<size_t>(g.num_values()), false);
  for (const Varying& v : varying_) {
    int64_t x = 0;
    if (!evaluate(v.corners, point, &x))
      throw ShapeError("sizes " + point_text(point) + " give a fractional size");
    const Place& p = v.place;
    switch (p.kind) {
      case Place::Kind::kDim:
        if (x < 0) throw ShapeError("sizes " + point_text(point) + " give a negative dim");
        g.value(p.id).type.shape.dims()[p.index] = x;
        break;
      case Place::Kind::kConstant: {
        Value& val = g.value(p.id);
        if (!copied[p.id]) {
          val.data = val.data->clone();
          copied[p.id] = true;
        }
        if (val.data->dtype() == DType::kInt64)
          val.data->data<int64_t>()[p.index] = x;
        else
          val.data->data<int32_t>()[p.index] = static_cast<int32_t>(x);
        break;
      }
      case Place::Kind::kAttrInt:
        g.node(p.id).attrs[p.attr] = Attribute(x);
        break;
      case Place::Kind::kAttrInts: {
        std::vector<int64_t> list = g.node(p.id).attrs.at(p.attr).as_ints();
        list[p.index] = x;
        g.node(p.id).attrs[p.attr] = Attribute(std::move(list));
        break;
      }
    }
  }
  // Shape inference over the instance checks the evaluated numbers against each other.
  std::vector<TensorType> given(static_cast<size_t>(g.num_values()));
  for (int id = 0; id < g.num_values(); ++id) given[id] = g.value(id).type;
  g.infer_all();
  for (int id = 0; id < g.num_values(); ++id)
    if (!(g.value(id).type == given[id]))
      throw ShapeError("sizes " + point_text(point) + ": value '" + g.value(id).name +
                       "' is inferred as " + g.value(id).type.to_string() + ", not " +
                       given[id].to_string());
  return g;
}

}  // namespace lumen
