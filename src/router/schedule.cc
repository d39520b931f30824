// The run order of a placed graph (device work first) and its host/device timeline simulation.
#include "router/schedule.h"

#include <algorithm>
#include <set>
#include <string>

#include "lumen/error.h"

namespace lumen::router {
namespace {

// Per node: the nodes that read its outputs (without repeats).
std::vector<std::vector<int>> consumers_of(const PlacementProblem& p) {
  std::vector<std::vector<int>> readers(p.nodes.size());
  for (size_t i = 0; i < p.nodes.size(); ++i)
    for (int v : p.nodes[i].inputs) {
      int producer = p.values[v].producer;
      if (producer < 0) continue;
      std::vector<int>& r = readers[producer];
      if (r.empty() || r.back() != static_cast<int>(i)) r.push_back(static_cast<int>(i));
    }
  return readers;
}

}  // namespace

std::vector<int> run_order(const PlacementProblem& p, const std::vector<int>& device) {
  const int n = static_cast<int>(p.nodes.size());
  if (static_cast<int>(device.size()) != n)
    throw InvalidArgument("run_order: " + std::to_string(device.size()) + " devices for " +
                          std::to_string(n) + " nodes");
  std::vector<std::vector<int>> consumers = consumers_of(p);
  // Host nodes that lead to device work: readers come later in the problem's order.
  std::vector<bool> feeds_device(n, false);
  for (int i = n - 1; i >= 0; --i)
    for (int c : consumers[i])
      feeds_device[i] = feeds_device[i] || device[c] != 0 || feeds_device[c];
  auto group = [&](int i) { return device[i] != 0 ? 0 : feeds_device[i] ? 1 : 2; };
  std::vector<int> waiting(n, 0);  // producers not yet taken, with repeats as in consumers
  for (int i = 0; i < n; ++i)
    for (int c : consumers[i]) ++waiting[c];
  std::set<std::pair<int, int>> ready;  // (group, node)
  for (int i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.insert({group(i), i});
  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    int i = ready.begin()->second;
    ready.erase(ready.begin());
    order.push_back(i);
    for (int c : consumers[i])
      if (--waiting[c] == 0) ready.insert({group(c), c});
  }
  return order;
}

double simulate(const PlacementProblem& p, const std::vector<int>& device,
                const std::vector<int>& order) {
  const int n = static_cast<int>(p.nodes.size());
  if (static_cast<int>(device.size()) != n || static_cast<int>(order.size()) != n)
    throw InvalidArgument("simulate: the placement and the order must name every node once");
  std::vector<bool> done(n, false);
  std::vector<double> clock(p.num_devices, 0);  // clock[0]: the host
  std::vector<unsigned> holders(p.values.size(), 0);
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].producer < 0) holders[v] = 1u;  // graph inputs: on the host
  std::vector<double> made(p.values.size(), 0);     // when each value is complete where it is made
  // Moves value v from device `from` to `to`, as the executable does (see the header).
  auto copy = [&](int v, int from, int to, bool step) {
    const double t = p.transfer_us(v, from, to);
    const bool async = step && p.values[v].producer >= 0;
    if (async && from == 0) {
      clock[0] += t;
      clock[to] = std::max(clock[to], clock[0]);
    } else if (async && to == 0) {
      clock[0] = std::max(clock[0], made[v]) + t;
    } else {
      const double start = std::max({clock[0], clock[from], clock[to]});
      clock[0] = clock[from] = clock[to] = start + t;
    }
  };
  std::vector<int> home(p.values.size(), 0);
  std::vector<std::vector<int>> outputs(n);
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].producer >= 0) outputs[p.values[v].producer].push_back(static_cast<int>(v));
  for (int i : order) {
    if (i < 0 || i >= n || done[i])
      throw InvalidArgument("simulate: the order must name every node once");
    const int d = device[i];
    for (int v : p.nodes[i].inputs) {
      int producer = p.values[v].producer;
      if (producer >= 0 && !done[producer])
        throw InvalidArgument("simulate: node " + std::to_string(i) + " comes before node " +
                              std::to_string(producer) + ", whose output it reads");
      if (!(holders[v] >> d & 1u)) {
        copy(v, home[v], d, true);
        holders[v] |= 1u << d;
      }
    }
    const double cost = p.nodes[i].cost_us[d];
    if (d == 0) {
      clock[0] += cost;
    } else {
      clock[0] += p.launch_us.empty() ? 0 : p.launch_us[d];
      clock[d] = std::max(clock[d], clock[0]) + cost;
    }
    done[i] = true;
    for (int v : outputs[i]) {
      home[v] = d;
      holders[v] = 1u << d;
      made[v] = clock[d];
    }
  }
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].output && p.values[v].producer >= 0 && home[v] != 0)
      copy(static_cast<int>(v), home[v], 0, false);
  return *std::max_element(clock.begin(), clock.end());
}

}  // namespace lumen::router
