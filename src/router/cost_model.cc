// CostModel: signatures, and predictions from measured kernel times.
#include "router/cost_model.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "graph/op_kind.h"

namespace lumen::router {
namespace {

// FNV-1a: a hash that is the same in every build, since keys are stored in the cache file.
uint64_t fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

double type_bytes(const TensorType& t) {
  return t.shape.is_static() ? static_cast<double>(t.shape.numel()) * dtype_size(t.dtype) : 0;
}

// Multiply-adds times two of convolutions and matrix products (as `lumen inspect` counts them).
double flops_of(const Graph& graph, const Node& n) {
  const std::string op = op_name(n.op);
  const Shape& out = graph.value(n.outputs[0]).type.shape;
  if (!out.is_static()) return 0;
  double numel = static_cast<double>(out.numel());
  if ((op == "Conv" || op == "FusedConv") && n.inputs.size() >= 2) {
    const Shape& w = graph.value(n.inputs[1]).type.shape;  // [Cout, Cin/group, k...]
    if (w.is_static() && w.rank() >= 1 && w[0] > 0)
      return 2 * numel * static_cast<double>(w.numel() / w[0]);
  } else if ((op == "MatMul" || op == "FusedMatMul" || op == "MatMulNBits") &&
             n.inputs.size() >= 2) {
    const Shape& a = graph.value(n.inputs[0]).type.shape;
    if (!a.is_static()) return 0;
    int64_t k = a.rank() >= 2 ? a[a.rank() - 1] : a.numel();
    auto trans_a = n.attrs.find("trans_a");
    if (trans_a != n.attrs.end() && trans_a->second.as_int() != 0 && a.rank() >= 2)
      k = a[a.rank() - 2];
    return 2 * numel * static_cast<double>(k);
  } else if (op == "Gemm" && out.rank() == 2 && out[0] > 0) {
    const Shape& a = graph.value(n.inputs[0]).type.shape;
    if (a.is_static()) return 2 * numel * static_cast<double>(a.numel() / out[0]);
  } else if (op == "GroupedMatMul") {
    const Shape& a = graph.value(n.inputs[0]).type.shape;
    if (!a.is_static() || a.rank() < 2) return 0;
    double flops = 0;
    for (int y : n.outputs) {
      const Shape& s = graph.value(y).type.shape;
      if (s.is_static()) flops += 2 * static_cast<double>(s.numel()) * static_cast<double>(a[-1]);
    }
    return flops;
  }
  return 0;
}

// Time for `work` at a default rate: host 1 GFLOP/s and 2 GB/s, a device 1 TFLOP/s and
// 100 GB/s (deliberately slow: an unmeasured op should not attract work).
double default_us(bool host, const NodeSignature& sig) {
  if (sig.flops > 0) return sig.flops / (host ? 1e3 : 1e6);
  return sig.bytes / (host ? 2e3 : 1e5);
}

}  // namespace

NodeSignature signature_of(const Graph& graph, const Node& node) {
  NodeSignature sig;
  sig.op = op_name(node.op);
  std::string detail = sig.op + "|";
  for (const auto& [name, attr] : node.attrs) detail += name + "=" + attr.to_string() + ";";
  detail += "|";
  std::string first;
  for (int in : node.inputs) {
    if (in < 0) {
      detail += "none,";
      continue;
    }
    const Value& v = graph.value(in);
    std::string t = v.type.to_string();
    if (first.empty()) first = t;
    // Constants and graph inputs are marked: calibration times kernels that read a large graph
    // input with it out of the cache, as a run finds it (calibrate.h).
    detail += (v.data.has_value() ? "const " : v.is_input ? "input " : "") + t + ",";
    sig.bytes += type_bytes(v.type);
  }
  detail += "->";
  for (int out : node.outputs) {
    detail += graph.value(out).type.to_string() + ",";
    sig.bytes += type_bytes(graph.value(out).type);
  }
  sig.flops = flops_of(graph, node);
  char hash[24];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(detail)));
  first.erase(std::remove(first.begin(), first.end(), ' '), first.end());
  sig.key = sig.op + ":" + first + ":" + hash;
  return sig;
}

double constant_bytes(const Graph& graph, const Node& node) {
  double bytes = 0;
  for (int in : node.inputs)
    if (in >= 0 && graph.value(in).data.has_value()) bytes += type_bytes(graph.value(in).type);
  return bytes;
}

double graph_input_bytes(const Graph& graph, const Node& node) {
  double bytes = 0;
  for (int in : node.inputs)
    if (in >= 0 && graph.value(in).is_input && !graph.value(in).data.has_value())
      bytes += type_bytes(graph.value(in).type);
  return bytes;
}

namespace {

// The time at `work` from (work, us) samples of one op: linear between the nearest two, scaled by
// work above the largest, the smallest's time below the smallest. `same` must not be empty.
double interpolate(std::vector<std::pair<double, double>> same, double work) {
  std::sort(same.begin(), same.end());
  if (work <= same.front().first) return same.front().second;
  if (work >= same.back().first) {
    const auto& [w, us] = same.back();
    return w > 0 ? us * work / w : us;
  }
  auto hi = std::lower_bound(same.begin(), same.end(), std::make_pair(work, 0.0));
  auto lo = hi - 1;
  double f = (work - lo->first) / std::max(hi->first - lo->first, 1e-30);
  return lo->second + f * (hi->second - lo->second);
}

}  // namespace

std::vector<std::string> CostModel::outliers(const std::string& backend, double factor) const {
  std::vector<std::string> out;
  auto b = samples_.find(backend);
  if (b == samples_.end()) return out;
  for (const auto& [key, s] : b->second) {
    if (s.us <= 0) continue;
    std::vector<std::pair<double, double>> others;
    for (const auto& [other_key, o] : b->second)
      if (other_key != key && o.op == s.op && o.us > 0)
        others.emplace_back(NodeSignature{o.op, other_key, o.flops, o.bytes}.work(), o.us);
    const double work = NodeSignature{s.op, key, s.flops, s.bytes}.work();
    if (others.size() >= 2) {
      const double expected = interpolate(others, work);
      if (s.us > factor * expected && s.us > expected + kOutlierMinUs) out.push_back(key);
      continue;
    }
    // Too few of its own op: the backend's median rate over the other ops that do arithmetic.
    if (s.flops <= 0) continue;
    std::vector<double> rates;
    for (const auto& [other_key, o] : b->second)
      if (other_key != key && o.flops > 0 && o.us > 0) rates.push_back(o.flops / o.us);
    if (rates.empty()) continue;
    std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
    const double expected = s.flops / rates[rates.size() / 2];
    if (s.us > kLoneOutlierFactor * factor * expected && s.us > expected + kOutlierMinUs)
      out.push_back(key);
  }
  return out;
}

void CostModel::set_choice(const std::string& fingerprint, const std::string& plan,
                           const std::string& reason) {
  choices_[fingerprint] = {plan, reason};
}

const std::pair<std::string, std::string>* CostModel::choice(const std::string& fingerprint) const {
  auto it = choices_.find(fingerprint);
  return it == choices_.end() ? nullptr : &it->second;
}

void CostModel::add_kernel(const std::string& backend, const std::string& key,
                           const KernelSample& sample) {
  samples_[backend][key] = sample;
}

const KernelSample* CostModel::measured(const std::string& backend, const std::string& key) const {
  auto b = samples_.find(backend);
  if (b == samples_.end()) return nullptr;
  auto it = b->second.find(key);
  return it == b->second.end() ? nullptr : &it->second;
}

Prediction CostModel::kernel(const std::string& backend, const NodeSignature& sig) const {
  const KernelSample* m = measured(backend, sig.key);
  Prediction p = m != nullptr && m->run_us > 0 ? Prediction{m->run_us, 0, "measured in a run"}
                                               : predict(backend, sig, &KernelSample::us);
  if (backend != "cpu") {
    Prediction in_graph = predict(backend, sig, &KernelSample::graph_us);
    if (in_graph.source != "estimated") p.graph_us = in_graph.us;
  }
  return p;
}

Prediction CostModel::predict(const std::string& backend, const NodeSignature& sig,
                              double KernelSample::*field) const {
  const KernelSample* m = measured(backend, sig.key);
  if (m != nullptr && m->*field > 0) return {m->*field, 0, "measured"};
  const bool host = backend == "cpu";
  auto b = samples_.find(backend);
  if (b == samples_.end()) return {default_us(host, sig), 0, "estimated"};
  const double work = sig.work();
  // The same op's samples, by work.
  std::vector<std::pair<double, double>> same;  // (work, us)
  std::vector<double> rates;                    // work per us of samples of the same kind of work
  double fastest = 0;
  for (const auto& [key, s] : b->second) {
    const double us = s.*field;
    if (us <= 0) continue;
    NodeSignature other{s.op, key, s.flops, s.bytes};
    if (s.op == sig.op) same.emplace_back(other.work(), us);
    if ((s.flops > 0) == (sig.flops > 0)) rates.push_back(other.work() / us);
    fastest = fastest == 0 ? us : std::min(fastest, us);
  }
  if (!same.empty()) {
    std::string source = "interpolated from " + std::to_string(same.size()) + " " + sig.op +
                         (same.size() == 1 ? " sample" : " samples");
    return {interpolate(same, work), 0, source};
  }
  if (!rates.empty() && work > 0) {
    std::nth_element(rates.begin(), rates.begin() + rates.size() / 2, rates.end());
    double rate = rates[rates.size() / 2];
    return {fastest + work / rate, 0, "estimated from the backend's median rate"};
  }
  return {std::max(fastest, default_us(host, sig)), 0, "estimated"};
}

void CostModel::set_link(const std::string& backend, const Link& to_device, const Link& to_host) {
  links_[backend] = {to_device, to_host};
}

double Link::us(double bytes) const {
  if (points.size() < 2) return latency_us + bytes * us_per_byte;
  if (bytes <= points.front().first) return points.front().second;
  size_t k = 1;
  while (k + 1 < points.size() && bytes > points[k].first) ++k;
  const auto& [b0, t0] = points[k - 1];
  const auto& [b1, t1] = points[k];
  return t0 + (bytes - b0) * (t1 - t0) / (b1 - b0);
}

Link CostModel::to_device(const std::string& backend) const {
  auto it = links_.find(backend);
  return it != links_.end() ? it->second.first : Link{10, 1e-4};
}

Link CostModel::to_host(const std::string& backend) const {
  auto it = links_.find(backend);
  return it != links_.end() ? it->second.second : Link{10, 1e-4};
}

void CostModel::set_launch(const std::string& backend, const LaunchCost& cost) {
  launches_[backend] = cost;
}

LaunchCost CostModel::launch(const std::string& backend) const {
  if (backend == "cpu") return {};
  auto it = launches_.find(backend);
  return it != launches_.end() ? it->second : LaunchCost{5, 1};
}

}  // namespace lumen::router
