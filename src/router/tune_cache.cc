// The tune cache file: one measurement per line, tab-separated, after a header naming the version
// and devices it holds for.
#include "router/tune_cache.h"

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "core/host_info.h"
#include "lumen/error.h"

namespace lumen::router {
namespace {

constexpr const char* kMagic = "lumen-tune\t6";  // 6: links measured at eight sizes

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, '\t')) out.push_back(field);
  return out;
}

// A field as a number; IoError naming the file and line when it is not one.
double number(const std::string& text, const std::string& file, int line) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw IoError("tune cache '" + file + "' line " + std::to_string(line) + ": '" + text +
                  "' is not a number");
  return v;
}

// A link's measured points, "BYTES:US,BYTES:US,...", by strictly ascending bytes; IoError naming
// the file and line otherwise.
std::vector<std::pair<double, double>> link_points(const std::string& text, const std::string& file,
                                                   int line) {
  std::vector<std::pair<double, double>> points;
  std::istringstream in(text);
  std::string point;
  while (std::getline(in, point, ',')) {
    const size_t colon = point.find(':');
    if (colon == std::string::npos)
      throw IoError("tune cache '" + file + "' line " + std::to_string(line) + ": '" + point +
                    "' is not BYTES:US");
    points.emplace_back(number(point.substr(0, colon), file, line),
                        number(point.substr(colon + 1), file, line));
    if (points.size() > 1 && !(points.back().first > points[points.size() - 2].first))
      throw IoError("tune cache '" + file + "' line " + std::to_string(line) +
                    ": link points must have ascending sizes");
  }
  return points;
}

// Tabs and newlines would break the line format; device names never hold them in practice.
std::string clean(std::string text) {
  for (char& c : text)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return text;
}

}  // namespace

std::string default_cache_file() {
  return user_cache_file("tune.tsv");
}

bool load_cache(const std::string& file, const CacheIdentity& identity, CostModel* model) {
  std::ifstream in(file);
  if (!in) return false;
  std::string line;
  if (!std::getline(in, line) || line != kMagic) return false;  // another format: measure again
  std::string version, devices;
  if (!std::getline(in, version) || !std::getline(in, devices)) return false;
  if (version != "version\t" + clean(identity.version) ||
      devices != "devices\t" + clean(identity.devices))
    return false;
  CostModel loaded = *model;
  for (int number_of_line = 4; std::getline(in, line); ++number_of_line) {
    if (line.empty()) continue;
    std::vector<std::string> f = split_tabs(line);
    auto num = [&](size_t k) { return number(f[k], file, number_of_line); };
    if (f[0] == "kernel" && f.size() == 9) {
      loaded.add_kernel(f[1], f[8], {f[2], num(3), num(4), num(5), num(6), num(7)});
    } else if (f[0] == "overhead" && f.size() == 2) {
      loaded.set_run_overhead(num(1));
    } else if (f[0] == "link" && f.size() == 6) {
      loaded.set_link(f[1], {num(2), num(3)}, {num(4), num(5)});
    } else if (f[0] == "link_points" && f.size() == 4 && (f[2] == "up" || f[2] == "down")) {
      Link up = loaded.to_device(f[1]), down = loaded.to_host(f[1]);
      (f[2] == "up" ? up : down).points = link_points(f[3], file, number_of_line);
      loaded.set_link(f[1], up, down);
    } else if (f[0] == "choice" && f.size() == 4) {
      loaded.set_choice(f[1], f[2], f[3]);
    } else if (f[0] == "launch" && f.size() == 4) {
      loaded.set_launch(f[1], {num(2), num(3)});
    } else {
      throw IoError("tune cache '" + file + "' line " + std::to_string(number_of_line) +
                    ": unknown entry '" + line.substr(0, 40) + "'");
    }
  }
  *model = std::move(loaded);
  return true;
}

void save_cache(const std::string& file, const CacheIdentity& identity, const CostModel& model) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path path(file);
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) throw IoError("tune cache '" + file + "': cannot create its folder: " + ec.message());
  const std::string tmp = file + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw IoError("tune cache '" + file + "': cannot write " + tmp);
    out.precision(17);  // round-trips a double
    out << kMagic << "\nversion\t" << clean(identity.version) << "\ndevices\t"
        << clean(identity.devices) << "\n";
    if (model.run_overhead() > 0) out << "overhead\t" << model.run_overhead() << "\n";
    for (const auto& [backend, costs] : model.launches())
      out << "launch\t" << backend << "\t" << costs.eager_us << "\t" << costs.graph_us << "\n";
    for (const auto& [backend, link] : model.links()) {
      out << "link\t" << backend << "\t" << link.first.latency_us << "\t" << link.first.us_per_byte
          << "\t" << link.second.latency_us << "\t" << link.second.us_per_byte << "\n";
      for (const auto& [way, l] : {std::pair{"up", &link.first}, std::pair{"down", &link.second}}) {
        if (l->points.empty()) continue;
        out << "link_points\t" << backend << "\t" << way << "\t";
        for (size_t k = 0; k < l->points.size(); ++k)
          out << (k ? "," : "") << l->points[k].first << ":" << l->points[k].second;
        out << "\n";
      }
    }
    for (const auto& [backend, samples] : model.samples())
      for (const auto& [key, s] : samples)
        out << "kernel\t" << backend << "\t" << s.op << "\t" << s.flops << "\t" << s.bytes << "\t"
            << s.us << "\t" << s.graph_us << "\t" << s.run_us << "\t" << clean(key) << "\n";
    for (const auto& [fingerprint, choice] : model.choices())
      out << "choice\t" << clean(fingerprint) << "\t" << clean(choice.first) << "\t"
          << clean(choice.second) << "\n";
    if (!out.flush()) throw IoError("tune cache '" + file + "': write failed");
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::string why = ec.message();
    fs::remove(tmp, ec);
    throw IoError("tune cache '" + file + "': cannot replace it: " + why);
  }
}

}  // namespace lumen::router
