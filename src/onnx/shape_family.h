// ShapeFamily: one optimized graph for every size of a model's symbolic dimensions (batch,
// sequence), so a new size is a substitution into it, not an import, optimization and compile.
//
// Lumen's importer and optimizer work on concrete shapes: shape arithmetic (Shape -> Gather ->
// Concat -> Reshape) folds into constants and fused ops carry their views as attributes. Instead
// of carrying symbolic expressions through every converter and pass, the family builds the
// optimized graph at a few sizes (probes) and requires them to be the same graph, node for node,
// but for numbers: dims of values, elements of small integer constants (a Reshape's target) and
// integer attributes. Each such number is then the multilinear function of the symbols that the
// probes on a 2 x ... x 2 grid determine (a product such as batch * sequence included); a further
// probe off the grid checks every one of them. A graph at a new size is the probed graph with
// those numbers evaluated there, checked once more by shape inference over the whole graph.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "lumen/graph.h"

namespace lumen {

class ShapeFamily {
 public:
  // Builds (imports and optimizes) the graph with the symbols at the given values, leaving the
  // nodes named in `unfolded` unfolded (Graph::keep_unfolded).
  using Builder = std::function<Graph(const std::vector<int64_t>& point,
                                      const std::set<std::string>& unfolded)>;

  // The family through `at` (one value per symbol, each at least 2: a dim of 1 broadcasts and
  // passes treat it apart, so sizes of 1 are left out of families), from 2^k + 1 builds for k
  // symbols (at most 3). *graph_at receives the graph built at `at`. Data that differs between
  // probes (a Slice of a weight by the sequence length, folded) is left unfolded and the probes are
  // built again, once. Returns null with *why set when the probes are not one graph up to sizes,
  // when a number is not multilinear in the symbols, or when a probe fails to build; errors of
  // the build at `at` itself propagate.
  static std::unique_ptr<ShapeFamily> fit(const std::vector<int64_t>& at, const Builder& build,
                                          Graph* graph_at, std::string* why);

  // The graph at `point` (one value per symbol, each at least 2): the probed graph with every
  // size-derived number evaluated there, its types checked by shape inference. Throws ShapeError
  // where a number does not come out whole or non-negative, or shape inference disagrees (a size
  // outside the range the model takes: the caller then builds the graph at that size itself).
  Graph instantiate(const std::vector<int64_t>& point) const;

  // How many numbers of the graph depend on the symbols (for reports and tests).
  size_t num_varying() const { return varying_.size(); }

  ~ShapeFamily();

 private:
  // Where a number lives in the graph.
  struct Place {
    enum class Kind { kDim, kConstant, kAttrInt, kAttrInts };
    Kind kind = Kind::kDim;
    int id = 0;     // value id (kDim, kConstant) or node id (attributes)
    int index = 0;  // dim, element or list index
    std::string attr;
  };
  // A number that differs across the probes: where it is, and its value at each grid corner
  // (bit j of the corner set: symbol j at hi_[j], else at lo_[j]).
  struct Varying {
    Place place;
    std::vector<int64_t> corners;
    size_t number = 0;  // its index in a probe's walk of the graph
  };
  struct Reading;  // one probe's numbers and structure (shape_family.cc)

  // One fit with the nodes named in `unfolded` kept unfolded; null where it fails, with *why, and
  // in *differing the names of the nodes whose folded outputs differed between probes.
  static std::unique_ptr<ShapeFamily> fit_once(const std::vector<int64_t>& at, const Builder& build,
                                               const std::set<std::string>& unfolded,
                                               Graph* graph_at, std::string* why,
                                               std::set<std::string>* differing);

  ShapeFamily() = default;
  // Keeps `graph` (the first probe) without its removed nodes and dead values, which every plan
  // would otherwise copy, and renumbers the places of the varying numbers to match.
  void keep_live(const Graph& graph);
  // The value at `point` of a number with the given corner values; false where it is not whole.
  bool evaluate(const std::vector<int64_t>& corners, const std::vector<int64_t>& point,
                int64_t* out) const;

  Graph graph_;  // the first probe's live part (every constant and attribute as built there)
  std::vector<int64_t> lo_, hi_;
  std::vector<Varying> varying_;
};

}  // namespace lumen
