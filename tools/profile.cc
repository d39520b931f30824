// Profile tables and Chrome traces for `lumen run --profile / --trace`.
#include "tools/profile.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "lumen/error.h"

namespace lumen::cli {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// JSON string body: quotes, backslashes and control characters escaped.
std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

void print_profile(const std::vector<RunProfile>& runs, int top) {
  if (runs.empty() || runs.front().steps.empty()) return;
  std::map<std::string, std::vector<double>> per_kind;  // op@backend -> total per run
  std::map<std::string, int> kind_count;
  std::vector<std::vector<double>> per_step(runs.front().steps.size());
  std::vector<double> totals;
  for (const RunProfile& run : runs) {
    std::map<std::string, double> sums;
    for (size_t i = 0; i < run.steps.size() && i < per_step.size(); ++i) {
      const RunProfile::Step& s = run.steps[i];
      sums[s.op + "@" + s.backend] += s.duration_us;
      per_step[i].push_back(s.duration_us);
    }
    for (const auto& [kind, us] : sums) per_kind[kind].push_back(us);
    totals.push_back(run.total_us);
  }
  for (const RunProfile::Step& s : runs.front().steps) ++kind_count[s.op + "@" + s.backend];
  double total = median(totals);
  std::vector<std::pair<double, std::string>> kinds;
  double in_steps = 0;
  for (const auto& [kind, v] : per_kind) {
    kinds.emplace_back(median(v), kind);
    in_steps += kinds.back().first;
  }
  std::sort(kinds.rbegin(), kinds.rend());
  std::printf("profile: median over %zu runs: %.3f ms per run, %.3f ms in %zu steps\n", runs.size(),
              total / 1e3, in_steps / 1e3, runs.front().steps.size());
  std::printf("  %-32s %6s %10s %7s\n", "op kind", "steps", "ms", "share");
  for (const auto& [us, kind] : kinds)
    std::printf("  %-32s %6d %10.3f %6.1f%%\n", kind.c_str(), kind_count[kind], us / 1e3,
                total > 0 ? 100.0 * us / total : 0.0);
  std::vector<std::pair<double, size_t>> steps;
  for (size_t i = 0; i < per_step.size(); ++i) steps.emplace_back(median(per_step[i]), i);
  std::sort(steps.rbegin(), steps.rend());
  std::printf("  slowest nodes:\n");
  for (size_t k = 0; k < steps.size() && k < static_cast<size_t>(top); ++k) {
    const RunProfile::Step& s = runs.front().steps[steps[k].second];
    std::printf("    %-40s %-18s %10.3f ms\n", s.node.c_str(), (s.op + "@" + s.backend).c_str(),
                steps[k].first / 1e3);
    if (!s.detail.empty()) std::printf("      %s\n", s.detail.c_str());
  }
}

void write_chrome_trace(const std::vector<RunProfile>& runs, const std::string& path) {
  if (runs.empty()) return;
  const RunProfile& run = runs.back();
  std::ofstream out(path);
  out << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  out << "{\"name\": \"run\", \"cat\": \"run\", \"ph\": \"X\", \"ts\": 0, \"dur\": " << run.total_us
      << ", \"pid\": 1, \"tid\": 0}";
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const RunProfile::Step& s = run.steps[i];
    std::vector<double> durations;
    for (const RunProfile& r : runs)
      if (i < r.steps.size()) durations.push_back(r.steps[i].duration_us);
    out << ",\n{\"name\": \"" << json_escape(s.node) << "\", \"cat\": \"" << json_escape(s.op)
        << "\", \"ph\": \"X\", \"ts\": " << s.start_us << ", \"dur\": " << s.duration_us
        << ", \"pid\": 1, \"tid\": 1, \"args\": {\"op\": \"" << json_escape(s.op)
        << "\", \"backend\": \"" << json_escape(s.backend)
        << "\", \"median_us\": " << median(durations) << ", \"runs\": " << durations.size();
    if (!s.detail.empty()) out << ", \"detail\": \"" << json_escape(s.detail) << "\"";
    out << "}}";
  }
  out << "\n]}\n";
  if (!out) throw IoError("lumen run: cannot write the trace '" + path + "'");
}

}  // namespace lumen::cli
