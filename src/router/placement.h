// Placement: which device runs each node, chosen to minimise the predicted time of one run
// (kernel times plus the transfers they cause) over an abstract cost table, so it can be tested
// without any device.
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace lumen::router {

// The cost of a node on a device that cannot run it.
inline constexpr double kUnsupported = std::numeric_limits<double>::infinity();

// Nodes in topological order, each with its predicted time on every device, and the values they
// read. Device 0 is the host: graph inputs start there and graph outputs must reach it. A value
// read on a device other than its producer's is copied there once, however many nodes read it
// there (as compile's copy steps are shared); a graph output produced elsewhere is copied to the
// host after the run. Constants are absent: they are copied once at compile time, not per run.
struct PlacementProblem {
  struct Node {
    std::vector<double> cost_us;  // per device; kUnsupported where the device cannot run it
    std::vector<int> inputs;      // value ids
  };
  struct Value {
    double bytes = 0;
    int producer = -1;    // node index; -1 for a graph input (on the host)
    bool output = false;  // a graph output (read on the host after the run)
  };
  int num_devices = 1;
  std::vector<Node> nodes;
  std::vector<Value> values;
  // Moving b bytes from device i to device j takes latency_us[i][j] + b * us_per_byte[i][j].
  std::vector<std::vector<double>> latency_us;
  std::vector<std::vector<double>> us_per_byte;
  // Optional: per value, the time to move it from device i to device j at [value][i *
  // num_devices + j] (route() reads them off links measured at several sizes, whose times are not
  // linear in the bytes); empty: the tables above.
  std::vector<std::vector<double>> value_transfer_us;
  // The host time to launch one kernel on each device (included in the node's cost there; only
  // simulate() uses it); empty: none.
  std::vector<double> launch_us;

  // The time to move `value` from device `from` to device `to` (0 when they are the same).
  double transfer_us(int value, int from, int to) const;
  // Throws InvalidArgument when sizes disagree, a value id is out of range or a producer does not
  // come before its readers.
  void check() const;
};

// A device per node and the predicted time of a run placed so.
struct Placement {
  std::vector<int> device;
  double cost_us = kUnsupported;
  std::string method;  // "exact", "heuristic", "brute force"
};

// The predicted time of a run with node i on device[i]: node costs plus every transfer.
double evaluate(const PlacementProblem& problem, const std::vector<int>& device);

// Exact dynamic programming over the topological order, with the devices holding each live value
// as state (its producer's device and where it has been copied). Exact for any graph; returns
// nullopt when a step would hold more than `max_states` states (wide graphs).
std::optional<Placement> place_exact(const PlacementProblem& problem, size_t max_states);

// Greedy by the cheapest device for each node given its inputs' places, and the plans that put
// every node it can on one device, each improved by local search (moving single nodes and
// contiguous runs of the topological order to another device while the total drops); the best.
Placement place_heuristic(const PlacementProblem& problem);

// place_exact where its state stays under `max_states`, place_heuristic otherwise.
Placement place(const PlacementProblem& problem, size_t max_states = 1 << 15);

// Every assignment tried (for tests; num_devices ^ nodes evaluations).
Placement place_brute_force(const PlacementProblem& problem);

}  // namespace lumen::router
