// `lumen generate MODEL --ids 464,3290,318 --max-new-tokens 64`: token ids in, new token ids out,
// with the prefill and decode rates.
#include <unistd.h>

#include <cstdio>
#include <map>

#include "core/device_ops.h"
#include "lumen/generate.h"
#include "lumen/runtime.h"
#include "lumen/threads.h"
#include "tools/bench_util.h"
#include "tools/commands.h"

namespace lumen::cli {
namespace {

// "464,3290,318" -> ids; InvalidArgument naming --ids for anything but comma-separated integers.
std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, comma - start);
    size_t used = 0;
    int64_t id = 0;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw InvalidArgument("--ids: '" + item + "' is not a token id (expected e.g. 464,3290,318)");
    ids.push_back(id);
    start = comma + 1;
  }
  return ids;
}

double parse_number(const std::string& text, const char* what) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size())
    throw InvalidArgument(std::string(what) + ": '" + text + "' is not a number");
  return v;
}

// "resident 812.3 MB, host pool 1.2 MB in use[, cuda:0 pool 3.4 MB in use]"
std::string memory_line(Device cache_device) {
  auto mb = [](size_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f MB", static_cast<double>(bytes) / 1e6);
    return std::string(buf);
  };
  std::string line = "resident " + mb(resident_bytes()) + ", host pool " +
                     mb(cpu_allocator().stats().bytes_in_use) + " in use";
  if (cache_device.type != DeviceType::kCPU)
    line += ", " + cache_device.to_string() + " pool " +
            mb(device_ops(cache_device).allocator().stats().bytes_in_use) + " in use";
  return line;
}

std::string join(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

}  // namespace

int generate(const std::vector<std::string>& args) {
  std::string model;
  std::vector<std::vector<int64_t>> prompts;
  std::string device = "cpu";
  Precision precision = Precision::kFloat32;
  GenerateOptions options;
  int64_t batch = 1;
  int64_t max_length = 0;
  int64_t memory_every = 0;
  bool warmup = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* flag) -> const std::string& {
      if (i + 1 >= args.size())
        throw InvalidArgument(std::string("lumen generate: ") + flag + " needs a value");
      return args[++i];
    };
    if (a == "--ids") {
      prompts.push_back(parse_ids(value("--ids")));
    } else if (a == "--max-new-tokens") {
      options.max_new_tokens = parse_count(value("--max-new-tokens"), "--max-new-tokens");
    } else if (a == "--batch") {
      batch = parse_count(value("--batch"), "--batch");
    } else if (a == "--device") {
      device = value("--device");
    } else if (a == "--precision") {
      precision = parse_precision(value("--precision"));
    } else if (a == "--sample") {
      options.do_sample = true;
    } else if (a == "--temperature") {
      options.temperature = static_cast<float>(parse_number(value("--temperature"), a.c_str()));
    } else if (a == "--top-k") {
      options.top_k = static_cast<int64_t>(parse_number(value("--top-k"), a.c_str()));
    } else if (a == "--top-p") {
      options.top_p = static_cast<float>(parse_number(value("--top-p"), a.c_str()));
    } else if (a == "--seed") {
      options.seed = static_cast<uint64_t>(parse_count(value("--seed"), "--seed"));
    } else if (a == "--eos") {
      options.eos_token_id = static_cast<int64_t>(parse_number(value("--eos"), a.c_str()));
    } else if (a == "--max-length") {
      max_length = parse_count(value("--max-length"), "--max-length");
    } else if (a == "--warmup") {
      warmup = true;
    } else if (a == "--memory-every") {
      memory_every = parse_count(value("--memory-every"), "--memory-every");
    } else if (a == "--threads") {
      set_num_threads(static_cast<int>(parse_count(value("--threads"), "--threads")));
    } else if (!a.empty() && a[0] != '-' && model.empty()) {
      model = a;
    } else {
      throw InvalidArgument("lumen generate: unknown argument '" + a + "'");
    }
  }
  if (model.empty()) throw InvalidArgument("lumen generate: no model given");
  if (prompts.empty())
    throw InvalidArgument("lumen generate: no prompt given (--ids 464,3290,318)");
  // --batch B repeats a single prompt B times; several --ids make a batch of their own.
  if (batch > 1) {
    if (prompts.size() != 1)
      throw InvalidArgument("lumen generate: --batch repeats one --ids prompt; give one, not " +
                            std::to_string(prompts.size()));
    prompts.assign(static_cast<size_t>(batch), prompts[0]);
  }
  Runtime rt;
  CompileOptions compile;
  compile.backends = parse_backends(device, rt);
  compile.precision = precision;
  Generator gen(model, compile);
  if (max_length > 0) gen.set_max_length(max_length);
  std::printf("%s: %s; device %s, %d CPU threads\n", model.c_str(),
              gen.layout().to_string().c_str(), device.c_str(), num_threads());
  const bool tty = isatty(fileno(stderr)) != 0;
  std::vector<int64_t> step;
  if (warmup) {
    // The prompt and three steps at the timed run's sizes, untimed: first-run costs (library
    // handles, pools, recording the step as a CUDA graph) stay out of the rates.
    Generation w = gen.start(prompts, options);
    for (int i = 0; i < 3 && w.next(&step); ++i) {
    }
  }
  Generation g = gen.start(prompts, options);
  int64_t made = 0;
  while (g.next(&step)) {
    ++made;
    if (memory_every > 0 && made % memory_every == 0) {
      if (tty) std::fprintf(stderr, "\r%40s\r", "");
      std::printf("memory after %lld tokens: %s\n", static_cast<long long>(made),
                  memory_line(gen.cache_device()).c_str());
      std::fflush(stdout);
    }
    if (tty)
      std::fprintf(stderr, "\r  %lld / %lld tokens", static_cast<long long>(made),
                   static_cast<long long>(options.max_new_tokens));
  }
  if (tty) std::fprintf(stderr, "\r%40s\r", "");
  const auto& tokens = g.tokens();
  for (size_t b = 0; b < tokens.size(); ++b)
    std::printf("new ids%s: %s\n",
                tokens.size() > 1 ? (" [" + std::to_string(b) + "]").c_str() : "",
                join(tokens[b]).c_str());
  const GenerateStats& s = g.stats();
  std::printf("prefill: %lld tokens x %lld in %.1f ms (%.1f tokens/s)\n",
              static_cast<long long>(s.prompt_tokens), static_cast<long long>(s.batch),
              s.prefill_seconds * 1e3, s.prefill_tokens_per_second());
  std::printf("decode: %lld tokens x %lld in %.1f ms (%.1f tokens/s, %.2f ms per step)\n",
              static_cast<long long>(s.new_tokens), static_cast<long long>(s.batch),
              s.decode_seconds * 1e3, s.decode_tokens_per_second(),
              s.new_tokens > 0 ? s.decode_seconds * 1e3 / static_cast<double>(s.new_tokens) : 0.0);
  // Where the decoding step runs: its steps per backend, and whether it replays as a device graph.
  std::string summary = gen.step_plan(s.batch, s.cache_length)->summary();
  std::map<std::string, int> per_backend;
  for (size_t at = summary.find(") @"); at != std::string::npos; at = summary.find(") @", at + 1))
    ++per_backend[summary.substr(at + 3, summary.find_first_of(" \n", at + 3) - at - 3)];
  std::string where;
  for (const auto& [backend, n] : per_backend)
    where += (where.empty() ? "" : ", ") + std::to_string(n) + " on " + backend;
  std::printf("step plan: %s (%s)\n", summary.substr(0, summary.find('\n')).c_str(), where.c_str());
  std::printf(
      "cache: %lld slots per sequence (static, %s); plans: %zu, compiled in %.1f ms before "
      "the prompt ran\n",
      static_cast<long long>(s.cache_length),
      s.cache_in_place ? "written in place" : "new slots copied in", gen.session().num_plans(),
      s.compile_seconds * 1e3);
  return 0;
}

}  // namespace lumen::cli
