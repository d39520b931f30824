// route(): the cost table of a graph from the cost model, placement over it, and the reasons.
#include "router/router.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "graph/op_kind.h"
#include "lumen/runtime.h"
#include "router/placement.h"
#include "router/schedule.h"
#include "router/tune_cache.h"

namespace lumen::router {
namespace {

// Runs subgraphs (If, Loop, Scan): the runtime hands their tensors over on the host.
bool has_subgraph(const Node& node) {
  for (const auto& [name, attr] : node.attrs)
    if (attr.type() == AttrType::kGraph) return true;
  return false;
}

// Shape arithmetic stays on the host, where its results are read: Shape and Size, and nodes whose
// every output is a small int64 tensor.
bool computes_shape(const Graph& graph, const Node& node) {
  if (node.op == OpKind::kShape || node.op == OpKind::kSize) return true;
  for (int out : node.outputs) {
    const TensorType& t = graph.value(out).type;
    if (t.dtype != DType::kInt64 || !t.shape.is_static() || t.shape.numel() > 64) return false;
  }
  return true;
}

// A value the run moves between devices: not a constant (copied once at compile time).
bool is_run_value(const Value& v) {
  return !(v.data.has_value() && !v.is_input);
}

std::string ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", us / 1000);
  return buf;
}

// Why a node runs on candidate `chosen`: its time there and the copies it causes, against each
// other candidate's time and what moving it there alone would change in the run.
std::string explain(const NodeDecision& n, const std::vector<Backend*>& candidates, int chosen) {
  std::string out = candidates[chosen]->name() + ": " + ms(n.kernel_us[chosen]);
  if (n.launch_us[chosen] > 0) out += " (launch " + ms(n.launch_us[chosen]) + ")";
  if (n.transfer_us > 0) out += " + copies " + ms(n.transfer_us);
  for (size_t d = 0; d < candidates.size(); ++d) {
    if (static_cast<int>(d) == chosen) continue;
    out += " vs " + candidates[d]->name() + " ";
    if (!std::isfinite(n.kernel_us[d])) {
      out += "unsupported";
      continue;
    }
    out += ms(n.kernel_us[d]);
    if (n.launch_us[d] > 0) out += " (launch " + ms(n.launch_us[d]) + ")";
    out += ": run " + std::string(n.moved_us[d] >= 0 ? "+" : "") + ms(n.moved_us[d]);
  }
  return out;
}

}  // namespace

std::vector<bool> nodes_to_run(const Graph& graph) {
  std::vector<bool> needed(graph.num_nodes(), false);
  std::vector<int> stack(graph.outputs().begin(), graph.outputs().end());
  std::vector<bool> seen(graph.num_values(), false);
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (seen[v]) continue;
    seen[v] = true;
    const Value& val = graph.value(v);
    if (val.producer < 0 || (val.data && !val.user_weight)) continue;
    needed[val.producer] = true;
    for (int in : graph.node(val.producer).inputs)
      if (in >= 0) stack.push_back(in);
  }
  return needed;
}

RoutePlan route(const Graph& graph, const std::vector<Backend*>& candidates,
                const RouterOptions& options, bool explain_all) {
  RoutePlan plan;
  for (Backend* b : candidates)
    if (b->device().type == DeviceType::kCPU)
      plan.candidates.insert(plan.candidates.begin(), b);
    else
      plan.candidates.push_back(b);
  if (plan.candidates.empty() || plan.candidates[0]->device().type != DeviceType::kCPU)
    throw InvalidArgument("route: the candidate backends must include the host (cpu)");
  const std::vector<Backend*>& cands = plan.candidates;
  const int num_devices = static_cast<int>(cands.size());

  std::vector<bool> needed = nodes_to_run(graph);
  std::vector<int> order;
  for (int id : graph.topological_order())
    if (needed[id]) order.push_back(id);
  plan.backend_of.assign(graph.num_nodes(), nullptr);

  // Which candidates can run each node; nodes that run subgraphs or compute shapes are pinned to
  // the host.
  std::vector<std::vector<bool>> can(order.size(), std::vector<bool>(num_devices, false));
  std::vector<std::string> pinned(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& node = graph.node(order[i]);
    if (has_subgraph(node)) {
      can[i][0] = true;
      pinned[i] = "runs subgraphs: on the host";
      continue;
    }
    std::string reasons;
    for (int d = 0; d < num_devices; ++d) {
      std::string why;
      can[i][d] = cands[d]->supports(graph, node, &why);
      if (!can[i][d]) reasons += (reasons.empty() ? "" : "; ") + cands[d]->name() + ": " + why;
    }
    if (std::none_of(can[i].begin(), can[i].end(), [](bool b) { return b; }))
      throw UnsupportedOp("node '" + node.name + "' (" + op_name(node.op) + "): " + reasons);
    int supported = static_cast<int>(std::count(can[i].begin(), can[i].end(), true));
    if (can[i][0] && supported > 1 && computes_shape(graph, node)) {
      std::fill(can[i].begin() + 1, can[i].end(), false);
      pinned[i] = "computes shapes: on the host";
    } else if (supported == 1) {
      int only = static_cast<int>(std::find(can[i].begin(), can[i].end(), true) - can[i].begin());
      pinned[i] = "only " + cands[only]->name() + " runs it";
    }
  }

  if (num_devices == 1 && !explain_all) {
    plan.method = "one backend";
    for (int id : order) plan.backend_of[id] = cands[0];
    plan.order = order;
    return plan;
  }

  // Costs: the cache, then what it lacks, measured now.
  CostModel model;
  CacheIdentity identity{version(), device_identity(cands)};
  plan.cache_devices = identity.devices;
  plan.cache_file = options.cache_file.empty() ? default_cache_file() : options.cache_file;
  plan.cache_loaded = load_cache(plan.cache_file, identity, &model);
  if (options.measure) {
    plan.calibration = calibrate(graph, order, cands, options.budget_s, options.progress, &model);
    // An unwritable cache costs the next compile a calibration, not this one its result.
    if (plan.calibration.measured > 0 || plan.calibration.remeasured > 0 || !plan.cache_loaded) {
      try {
        save_cache(plan.cache_file, identity, model);
      } catch (const IoError& e) {
        plan.cache_error = e.what();
      }
    }
  }

  // The cost table: eager costs (a device kernel takes at least its launch).
  PlacementProblem problem;
  problem.num_devices = num_devices;
  problem.latency_us.assign(num_devices, std::vector<double>(num_devices, 0));
  problem.us_per_byte = problem.latency_us;
  for (int d = 0; d < num_devices; ++d)
    problem.launch_us.push_back(model.launch(cands[d]->name()).eager_us);
  for (int a = 0; a < num_devices; ++a)
    for (int b = 0; b < num_devices; ++b) {
      if (a == b) continue;
      Link up = model.to_device(cands[b]->name()), down = model.to_host(cands[a]->name());
      problem.latency_us[a][b] = (a != 0 ? down.latency_us : 0) + (b != 0 ? up.latency_us : 0);
      problem.us_per_byte[a][b] = (a != 0 ? down.us_per_byte : 0) + (b != 0 ? up.us_per_byte : 0);
    }
  std::vector<int> value_index(graph.num_values(), -1);
  std::vector<int> value_id;
  std::vector<int> index_of_node(graph.num_nodes(), -1);
  for (size_t i = 0; i < order.size(); ++i) index_of_node[order[i]] = static_cast<int>(i);
  auto add_value = [&](int id) {
    if (value_index[id] >= 0) return value_index[id];
    const Value& v = graph.value(id);
    PlacementProblem::Value pv;
    pv.bytes = v.type.shape.is_static()
                   ? static_cast<double>(v.type.shape.numel()) * dtype_size(v.type.dtype)
                   : 0;
    pv.producer = v.producer >= 0 ? index_of_node[v.producer] : -1;
    value_index[id] = static_cast<int>(problem.values.size());
    value_id.push_back(id);
    problem.values.push_back(pv);
    return value_index[id];
  };
  std::vector<std::vector<double>> kernel_us(order.size()), launch_us(order.size()),
      graph_us(order.size());
  std::vector<std::vector<std::string>> source(order.size());
  bool all_static = true;
  // Each device's kernels were timed with their constants and inputs as a run finds them.
  std::vector<TimingRegime> regime;
  regime.reserve(num_devices);
  for (int d = 0; d < num_devices; ++d) regime.push_back(timing_regime(graph, order, *cands[d]));
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& node = graph.node(order[i]);
    const NodeSignature sig = signature_of(graph, node);
    PlacementProblem::Node pn;
    for (int d = 0; d < num_devices; ++d) {
      NodeSignature s = sig;
      s.key = timed_key(graph, node, sig, regime[d]);
      Prediction p =
          can[i][d] ? model.kernel(cands[d]->name(), s) : Prediction{kUnsupported, 0, ""};
      LaunchCost launch = model.launch(cands[d]->name());
      double eager = std::max(p.us, launch.eager_us);
      kernel_us[i].push_back(can[i][d] ? eager : kUnsupported);
      launch_us[i].push_back(can[i][d] ? launch.eager_us : 0);
      // Inside a replayed graph: as measured there, else the eager time less the launch saved.
      double in_graph =
          p.graph_us > 0 ? p.graph_us : std::max(0.0, p.us - launch.eager_us) + launch.graph_us;
      graph_us[i].push_back(can[i][d] ? in_graph : kUnsupported);
      source[i].push_back(p.source);
      pn.cost_us.push_back(kernel_us[i][d]);
    }
    for (int in : node.inputs)
      if (in >= 0 && is_run_value(graph.value(in))) pn.inputs.push_back(add_value(in));
    for (int out : node.outputs) {
      add_value(out);
      all_static = all_static && graph.value(out).type.shape.is_static();
    }
    problem.nodes.push_back(std::move(pn));
  }
  for (int out : graph.outputs())
    if (value_index[out] >= 0) problem.values[value_index[out]].output = true;
  // Each value's copy time, read off the links (measured at several sizes, their times are not
  // linear in the bytes).
  std::vector<Link> up, down;
  for (int d = 0; d < num_devices; ++d) {
    up.push_back(model.to_device(cands[d]->name()));
    down.push_back(model.to_host(cands[d]->name()));
  }
  for (const PlacementProblem::Value& v : problem.values) {
    std::vector<double> row(static_cast<size_t>(num_devices) * num_devices, 0);
    for (int a = 0; a < num_devices; ++a)
      for (int b = 0; b < num_devices; ++b)
        if (a != b)
          row[a * num_devices + b] =
              (a != 0 ? down[a].us(v.bytes) : 0) + (b != 0 ? up[b].us(v.bytes) : 0);
    problem.value_transfer_us.push_back(std::move(row));
  }

  // Placed by the sum of kernel and copy times (exact on chains and series-parallel graphs), then
  // predicted with host and device overlapping as the run order lets them.
  Placement best = place(problem);
  plan.method = best.method;
  std::vector<int> run = run_order(problem, best.device);
  double serial_us = best.cost_us;
  best.cost_us = simulate(problem, best.device, run);
  // Every node on one device with static shapes: the run is recorded once and replayed as a
  // CUDA graph, which removes most launch cost. Compare that plan with the best mixed one.
  for (int d = 1; d < num_devices && all_static; ++d) {
    bool everywhere = true;
    double cost = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      everywhere = everywhere && can[i][d];
      cost += graph_us[i][d];
    }
    if (!everywhere) continue;
    std::vector<int> device(order.size(), d);
    for (size_t i = 0; i < order.size(); ++i) problem.nodes[i].cost_us[d] = graph_us[i][d];
    cost = evaluate(problem, device);
    for (size_t i = 0; i < order.size(); ++i) problem.nodes[i].cost_us[d] = kernel_us[i][d];
    if (cost < best.cost_us || best.device == device) {
      best.device = device;
      best.cost_us = cost;
      run = run_order(problem, device);
      plan.method = "one device, replayed as a graph";
      plan.graph_replay = true;
      for (size_t i = 0; i < order.size(); ++i) kernel_us[i][d] = graph_us[i][d];
    }
  }
  // The single-device plans, costed by the same model: every node on the host, and every node on
  // each device that runs it, the rest on the host (as `--device cuda,cpu` compiles it; replayed as
  // a graph where the device runs every node). A mixed plan must predict less than each of them.
  for (int d = 0; d < num_devices; ++d) {
    std::vector<int> device(order.size(), 0);
    bool everywhere = true;
    for (size_t i = 0; i < order.size(); ++i) {
      if (can[i][d] && (pinned[i].empty() || !can[i][0]))
        device[i] = d;
      else if (!can[i][0])
        device[i] = -1;
      everywhere = everywhere && can[i][d];
    }
    if (std::count(device.begin(), device.end(), -1) > 0) {
      plan.single_us.push_back(kUnsupported);
      continue;
    }
    double cost;
    if (d > 0 && everywhere && all_static) {
      for (size_t i = 0; i < order.size(); ++i) problem.nodes[i].cost_us[d] = graph_us[i][d];
      cost = evaluate(problem, std::vector<int>(order.size(), d));
      for (size_t i = 0; i < order.size(); ++i) problem.nodes[i].cost_us[d] = kernel_us[i][d];
    } else {
      cost = simulate(problem, device, run_order(problem, device));
    }
    plan.single_us.push_back(cost);
    if (d == 0 && cost <= best.cost_us && best.device != device) {
      best.device = device;
      best.cost_us = cost;
      run = run_order(problem, device);
      plan.method = "one backend (the host), cheaper than any mixed plan";
      plan.graph_replay = false;
      serial_us = evaluate(problem, device);
    }
  }
  if (plan.graph_replay)
    for (size_t i = 0; i < order.size(); ++i) {
      int d = best.device[i];
      launch_us[i][d] = model.launch(cands[d]->name()).graph_us;
    }

  // Decisions, with the copies each node causes and what moving it alone would change.
  plan.predicted_us = best.cost_us;
  const double serial_base = plan.graph_replay ? best.cost_us : serial_us;
  std::vector<unsigned> holders(problem.values.size(), 1u);
  std::vector<int> home(problem.values.size(), 0);
  for (int i : run) {
    const int id = order[i];
    plan.order.push_back(id);
    const int d = best.device[i];
    plan.backend_of[id] = cands[d];
    NodeDecision n;
    n.node = id;
    n.backend = cands[d]->name();
    n.kernel_us = kernel_us[i];
    n.launch_us = launch_us[i];
    n.source = source[i][d];
    plan.kernel_us += kernel_us[i][d];
    std::vector<int> inputs = problem.nodes[i].inputs;
    std::sort(inputs.begin(), inputs.end());
    inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
    for (int v : inputs)
      if (!(holders[v] >> d & 1u)) {
        holders[v] |= 1u << d;
        double t = problem.transfer_us(v, home[v], d);
        n.transfer_us += t;
        ++plan.transfers;
        n.transfers.push_back(graph.value(value_id[v]).name + " " + cands[home[v]]->name() + "->" +
                              n.backend + " " + ms(t));
      }
    for (int out : graph.node(id).outputs) {
      int v = value_index[out];
      home[v] = d;
      holders[v] = 1u << d;
      if (problem.values[v].output && d != 0) {
        n.transfer_us += problem.transfer_us(v, d, 0);
        ++plan.transfers;
        n.transfers.push_back(graph.value(out).name + " " + n.backend + "->" + cands[0]->name() +
                              " " + ms(problem.transfer_us(v, d, 0)));
      }
    }
    for (int e = 0; e < num_devices; ++e) {
      if (e == d || !can[i][e]) {
        n.moved_us.push_back(0);
        continue;
      }
      std::vector<int> moved = best.device;
      moved[i] = e;
      n.moved_us.push_back(evaluate(problem, moved) - serial_base);  // serially, eager
    }
    n.reason =
        pinned[i].empty() ? explain(n, cands, d) : pinned[i] + " (" + explain(n, cands, d) + ")";
    if (plan.graph_replay) n.reason = "all on " + n.backend + ", replayed as a graph: " + n.reason;
    plan.decisions.push_back(std::move(n));
  }
  plan.transfer_us = serial_base - plan.kernel_us;
  plan.schedule_us = plan.predicted_us - serial_base;
  // What every run pays beyond its steps, whatever the placement.
  plan.overhead_us = model.run_overhead();
  plan.predicted_us += plan.overhead_us;
  for (double& us : plan.single_us)
    if (std::isfinite(us)) us += plan.overhead_us;
  {
    std::vector<int> used(num_devices, 0);
    for (int d : best.device) ++used[d];
    const int devices_used =
        static_cast<int>(std::count_if(used.begin(), used.end(), [](int n) { return n > 0; }));
    plan.choice =
        (devices_used > 1 ? "mixed " : "single-device ") + ms(plan.predicted_us) + " against";
    for (int d = 0; d < num_devices; ++d)
      plan.choice += std::string(d ? ", " : " ") + cands[d]->name() + " only " +
                     (std::isfinite(plan.single_us[d]) ? ms(plan.single_us[d]) : "-");
    plan.choice += " (predicted)";
  }
  return plan;
}

}  // namespace lumen::router
