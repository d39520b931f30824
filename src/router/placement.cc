// Placement by exact dynamic programming over the topological order, by greedy + local search,
// and by brute force (for tests). The three agree on the objective through evaluate().
#include "router/placement.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "lumen/error.h"

namespace lumen::router {
namespace {

using Mask = unsigned;

// Each value's distinct readers in increasing node order.
std::vector<std::vector<int>> readers_of(const PlacementProblem& p) {
  std::vector<std::vector<int>> readers(p.values.size());
  for (size_t i = 0; i < p.nodes.size(); ++i)
    for (int v : p.nodes[i].inputs)
      if (readers[v].empty() || readers[v].back() != static_cast<int>(i))
        readers[v].push_back(static_cast<int>(i));
  return readers;
}

// A node's inputs without repeats.
std::vector<int> unique_inputs(const PlacementProblem::Node& node) {
  std::vector<int> out = node.inputs;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// What placing node i on device d costs given where its inputs already are (holders: a mask of
// devices per value, and each value's producer device): its kernel, the copies of its inputs to d,
// and the copy of its graph outputs to the host. Updates the holders when `apply` is set.
double step_cost(const PlacementProblem& p, const std::vector<std::vector<int>>& outputs_of, int i,
                 int d, std::vector<Mask>& holders, const std::vector<int>& home, bool apply) {
  double cost = p.nodes[i].cost_us[d];
  for (int v : unique_inputs(p.nodes[i]))
    if (!(holders[v] >> d & 1u)) {
      cost += p.transfer_us(v, home[v], d);
      if (apply) holders[v] |= 1u << d;
    }
  for (int v : outputs_of[i]) {
    if (p.values[v].output && d != 0) cost += p.transfer_us(v, d, 0);
    if (apply) holders[v] = 1u << d;
  }
  return cost;
}

std::vector<std::vector<int>> outputs_of(const PlacementProblem& p) {
  std::vector<std::vector<int>> out(p.nodes.size());
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].producer >= 0) out[p.values[v].producer].push_back(static_cast<int>(v));
  return out;
}

// Moves runs of nodes (contiguous in the topological order) to another device while the total
// drops, within an evaluation budget.
void local_search(const PlacementProblem& p, Placement& best) {
  const int n = static_cast<int>(p.nodes.size());
  size_t edges = 0;
  for (const auto& node : p.nodes) edges += node.inputs.size();
  long budget = std::max<long>(2000, static_cast<long>(2e8 / static_cast<double>(n + edges + 1)));
  std::vector<int> lengths;
  for (int len = 1; len <= n; len = len < 4 ? len + 1 : len * 2) lengths.push_back(len);
  bool improved = true;
  while (improved && budget > 0) {
    improved = false;
    for (int len : lengths)
      for (int start = 0; start + len <= n && budget > 0; ++start)
        for (int d = 0; d < p.num_devices && budget > 0; ++d) {
          std::vector<int> trial = best.device;
          bool changed = false;
          for (int i = start; i < start + len; ++i)
            if (trial[i] != d && std::isfinite(p.nodes[i].cost_us[d])) {
              trial[i] = d;
              changed = true;
            }
          if (!changed) continue;
          --budget;
          double cost = evaluate(p, trial);
          if (cost < best.cost_us * (1 - 1e-12)) {
            best.device = std::move(trial);
            best.cost_us = cost;
            improved = true;
          }
        }
  }
}

}  // namespace

double PlacementProblem::transfer_us(int value, int from, int to) const {
  if (from == to) return 0;
  if (!value_transfer_us.empty()) return value_transfer_us[value][from * num_devices + to];
  return latency_us[from][to] + values[value].bytes * us_per_byte[from][to];
}

void PlacementProblem::check() const {
  const int num_values = static_cast<int>(values.size());
  if (num_devices < 1 || static_cast<int>(latency_us.size()) != num_devices ||
      static_cast<int>(us_per_byte.size()) != num_devices)
    throw InvalidArgument("placement: the link tables must be num_devices x num_devices");
  for (int d = 0; d < num_devices; ++d)
    if (static_cast<int>(latency_us[d].size()) != num_devices ||
        static_cast<int>(us_per_byte[d].size()) != num_devices)
      throw InvalidArgument("placement: the link tables must be num_devices x num_devices");
  if (!value_transfer_us.empty()) {
    if (value_transfer_us.size() != values.size())
      throw InvalidArgument("placement: value_transfer_us must have one row per value");
    for (const std::vector<double>& row : value_transfer_us)
      if (static_cast<int>(row.size()) != num_devices * num_devices)
        throw InvalidArgument("placement: a value_transfer_us row must hold num_devices^2 times");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (static_cast<int>(nodes[i].cost_us.size()) != num_devices)
      throw InvalidArgument("placement: node " + std::to_string(i) + " has " +
                            std::to_string(nodes[i].cost_us.size()) + " costs for " +
                            std::to_string(num_devices) + " devices");
    bool runnable = false;
    for (double c : nodes[i].cost_us) runnable = runnable || std::isfinite(c);
    if (!runnable) throw InvalidArgument("placement: no device can run node " + std::to_string(i));
    for (int v : nodes[i].inputs)
      if (v < 0 || v >= num_values || values[v].producer >= static_cast<int>(i))
        throw InvalidArgument("placement: node " + std::to_string(i) + " reads value " +
                              std::to_string(v) + ", which is not made before it");
  }
  for (const Value& v : values)
    if (v.producer >= static_cast<int>(nodes.size()))
      throw InvalidArgument("placement: a value's producer is out of range");
}

double evaluate(const PlacementProblem& p, const std::vector<int>& device) {
  double total = 0;
  for (size_t i = 0; i < p.nodes.size(); ++i) total += p.nodes[i].cost_us[device[i]];
  std::vector<Mask> copied(p.values.size(), 0);
  for (size_t i = 0; i < p.nodes.size(); ++i)
    for (int v : p.nodes[i].inputs) copied[v] |= 1u << device[i];
  for (size_t v = 0; v < p.values.size(); ++v) {
    const PlacementProblem::Value& val = p.values[v];
    int home = val.producer < 0 ? 0 : device[val.producer];
    for (int d = 0; d < p.num_devices; ++d)
      if (d != home && (copied[v] >> d & 1u)) total += p.transfer_us(static_cast<int>(v), home, d);
    if (val.output && home != 0) total += p.transfer_us(static_cast<int>(v), home, 0);
  }
  return total;
}

std::optional<Placement> place_exact(const PlacementProblem& p, size_t max_states) {
  p.check();
  const int n = static_cast<int>(p.nodes.size());
  const int num_devices = p.num_devices;
  if (num_devices > 4) return std::nullopt;  // a value's code holds a producer and a 4-bit mask
  std::vector<std::vector<int>> readers = readers_of(p);
  std::vector<std::vector<int>> outs = outputs_of(p);
  // live[i]: values alive before node i (made before it, read at or after it), by id.
  std::vector<std::vector<int>> live(n + 1);
  for (size_t v = 0; v < p.values.size(); ++v) {
    if (readers[v].empty()) continue;
    int from = p.values[v].producer < 0 ? 0 : p.values[v].producer + 1;
    for (int i = from; i <= readers[v].back(); ++i) live[i].push_back(static_cast<int>(v));
  }
  // A state holds, per live value, (producer device << 4) | mask of devices holding it.
  struct Entry {
    double cost;
    int parent;
    int device;
  };
  std::vector<std::vector<Entry>> layers(n + 1);
  std::vector<std::string> keys;                                      // the current layer's states
  keys.push_back(std::string(live[0].size(), static_cast<char>(1)));  // inputs: on the host
  layers[0].push_back({0, -1, -1});
  std::vector<int> position(p.values.size(), -1);
  for (int i = 0; i < n; ++i) {
    for (size_t k = 0; k < live[i].size(); ++k) position[live[i][k]] = static_cast<int>(k);
    std::vector<int> inputs = unique_inputs(p.nodes[i]);
    std::unordered_map<std::string, int> next_index;
    std::vector<std::string> next_keys;
    for (size_t s = 0; s < keys.size(); ++s) {
      const std::string& key = keys[s];
      for (int d = 0; d < num_devices; ++d) {
        double cost = p.nodes[i].cost_us[d];
        if (!std::isfinite(cost)) continue;
        cost += layers[i][s].cost;
        std::string state = key;
        for (int v : inputs) {
          auto code = static_cast<unsigned char>(state[position[v]]);
          if (code >> d & 1u) continue;
          cost += p.transfer_us(v, code >> 4, d);
          state[position[v]] = static_cast<char>(code | (1u << d));
        }
        for (int v : outs[i])
          if (p.values[v].output && d != 0) cost += p.transfer_us(v, d, 0);
        std::string next;
        next.reserve(live[i + 1].size());
        for (int v : live[i + 1])
          next.push_back(p.values[v].producer == i ? static_cast<char>((d << 4) | (1u << d))
                                                   : state[position[v]]);
        auto [it, inserted] = next_index.emplace(next, static_cast<int>(layers[i + 1].size()));
        if (inserted) {
          if (layers[i + 1].size() >= max_states) return std::nullopt;
          layers[i + 1].push_back({cost, static_cast<int>(s), d});
          next_keys.push_back(std::move(next));
        } else if (cost < layers[i + 1][it->second].cost) {
          layers[i + 1][it->second] = {cost, static_cast<int>(s), d};
        }
      }
    }
    keys = std::move(next_keys);
  }
  Placement out;
  out.method = "exact";
  out.device.assign(n, 0);
  if (layers[n].empty()) return out;
  int s = 0;  // the last layer has one state: nothing is alive after the last node
  out.cost_us = layers[n][0].cost;
  for (int i = n; i > 0; --i) {
    out.device[i - 1] = layers[i][s].device;
    s = layers[i][s].parent;
  }
  return out;
}

Placement place_heuristic(const PlacementProblem& p) {
  p.check();
  const int n = static_cast<int>(p.nodes.size());
  std::vector<std::vector<int>> outs = outputs_of(p);
  std::vector<Placement> starts;
  // Greedy: each node on its cheapest device given where its inputs are by then.
  {
    Placement g;
    g.device.assign(n, 0);
    std::vector<Mask> holders(p.values.size(), 1u);  // graph inputs start on the host
    std::vector<int> home(p.values.size(), 0);
    for (int i = 0; i < n; ++i) {
      int best = -1;
      double best_cost = kUnsupported;
      for (int d = 0; d < p.num_devices; ++d) {
        if (!std::isfinite(p.nodes[i].cost_us[d])) continue;
        double c = step_cost(p, outs, i, d, holders, home, false);
        if (best < 0 || c < best_cost) best = d, best_cost = c;
      }
      g.device[i] = best;
      step_cost(p, outs, i, best, holders, home, true);
      for (int v : outs[i]) home[v] = best;
    }
    starts.push_back(std::move(g));
  }
  // Everything on one device, where it can run there (elsewhere on its cheapest device).
  for (int d = 0; d < p.num_devices; ++d) {
    Placement all;
    for (int i = 0; i < n; ++i) {
      const std::vector<double>& c = p.nodes[i].cost_us;
      all.device.push_back(
          std::isfinite(c[d]) ? d
                              : static_cast<int>(std::min_element(c.begin(), c.end()) - c.begin()));
    }
    starts.push_back(std::move(all));
  }
  Placement best;
  for (Placement& start : starts) {
    start.cost_us = evaluate(p, start.device);
    local_search(p, start);
    if (start.cost_us < best.cost_us) best = std::move(start);
  }
  best.method = "heuristic";
  return best;
}

Placement place(const PlacementProblem& p, size_t max_states) {
  if (std::optional<Placement> exact = place_exact(p, max_states)) return *exact;
  return place_heuristic(p);
}

Placement place_brute_force(const PlacementProblem& p) {
  p.check();
  const int n = static_cast<int>(p.nodes.size());
  Placement best;
  best.method = "brute force";
  std::vector<int> device(n, 0);
  while (true) {
    double cost = evaluate(p, device);
    if (cost < best.cost_us) best.cost_us = cost, best.device = device;
    int i = 0;
    while (i < n && ++device[i] == p.num_devices) device[i++] = 0;
    if (i == n) break;
  }
  if (n == 0) best.cost_us = 0;
  return best;
}

}  // namespace lumen::router
