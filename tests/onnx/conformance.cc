// ONNX conformance runner: loads each of ONNX's backend node test cases, feeds input_*.pb, compares
// with output_*.pb (rtol 1e-3, atol 1e-7; bfloat16 outputs within one bfloat16 ulp), and reports
// pass / fail / unsupported per case and per op. Each case runs in its own child process, so a
// crash or a hang is a result, not the end.
//
// Models with sequence or optional inputs or outputs run through OnnxSession::run_values, their
// SequenceProto and OptionalProto files read as the model declares them (run_value_case).
//
// Two allowances for the generated data: bfloat16 tensors stored as UINT16 are read as the
// model declares them, and an input whose data contradicts the model's declared shape (CastLike's
// `like`, whose values are never read) has that declaration dropped; such a pass says so.
//
//   lumen_conformance CASES_DIR [--report FILE.md] [--title TEXT] [--min-pass N] [--filter TEXT]
//                     [--backends cuda,cpu | --device cuda] [--list FILE] [--jobs N | --workers N]
//
// --backends (or --device) compiles for those backends in order (default: every available one,
// CUDA first where there is a GPU; a list without cpu gets the host as the fallback, as `lumen run
// --device cuda` does); --list writes one "case<TAB>status<TAB>reason" line per case, for
// comparing two runs (with --backends, a pass's reason counts the steps on the first backend and
// names why a step stayed on the host); the last line gives the share of steps on that backend.
// --jobs runs that many cases at once (default 1), each still in its own process. --workers
// starts that many long-lived processes that run the cases in turn, so a GPU's start-up (a second
// or more per process) is paid once per worker; a crash or timeout costs its case, and the
// worker is replaced.
//
// Exits 1 when fewer than N cases pass (the ratchet in tests/onnx/min_pass.txt).
#include <onnx/onnx_pb.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "lumen/lumen.h"
#include "lumen/onnx.h"

namespace fs = std::filesystem;

namespace {

constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-7;
// bfloat16 outputs: one ulp (2^-7 relative), as ONNX before 1.14 made its expected bfloat16 values
// by truncation while lumen rounds to nearest even.
constexpr double kRtolBFloat16 = 1.0 / 128;
constexpr int kTimeoutSeconds = 60;

// The compile targets (--backends); empty: every available backend.
std::vector<std::string> compile_backends;

struct CaseResult {
  std::string name;
  std::string status;  // pass, fail, unsupported, crash, timeout
  std::string reason;
  std::set<std::string> ops;
  int64_t opset = 0;  // of the default domain; 0 when the model imports none
};

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int k = 0;; ++k) {
    fs::path p = dir / (prefix + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

// ONNX's test generators store bfloat16 tensors as UINT16 (NumPy has no bfloat16): where the
// model declares BFLOAT16, a uint16 tensor holds its bit patterns and is read as bfloat16.
lumen::Tensor as_declared(lumen::Tensor t, int32_t elem_type) {
  if (t.dtype() == lumen::DType::kUInt16 && elem_type == onnx::TensorProto::BFLOAT16)
    return lumen::Tensor(t.buffer(), t.offset(), t.shape(), lumen::DType::kBFloat16);
  return t;
}

// Where the data of graph input `name` does not fit the fixed dims the model declares for it,
// clears that declaration (the data decides) and returns true.
bool drop_contradicted_shape(onnx::ModelProto& model, const std::string& name,
                             const lumen::Shape& shape) {
  for (auto& in : *model.mutable_graph()->mutable_input()) {
    if (in.name() != name || !in.type().tensor_type().has_shape()) continue;
    const auto& dims = in.type().tensor_type().shape().dim();
    bool fits = dims.size() == shape.rank();
    for (int i = 0; fits && i < dims.size(); ++i)
      fits = !dims[i].has_dim_value() || dims[i].dim_value() == shape[i];
    if (fits) return false;
    in.mutable_type()->mutable_tensor_type()->clear_shape();
    return true;
  }
  return false;
}

std::string compare(const lumen::Tensor& got, const lumen::Tensor& want, size_t k) {
  std::string which = "output " + std::to_string(k);
  if (got.dtype() != want.dtype())
    return which + " dtype " + lumen::dtype_name(got.dtype()) + ", expected " +
           lumen::dtype_name(want.dtype());
  if (got.shape() != want.shape())
    return which + " shape " + got.shape().to_string() + ", expected " + want.shape().to_string();
  bool exact = !lumen::is_floating(want.dtype());
  const size_t elem = lumen::dtype_size(want.dtype());
  const char* got_bytes = static_cast<const char*>(got.raw_data());
  const char* want_bytes = static_cast<const char*>(want.raw_data());
  for (int64_t i = 0; i < want.numel(); ++i) {
    double g = got.item_as_double(i), w = want.item_as_double(i);
    bool ok;
    if (exact) {  // bytes, so that 64-bit integers beyond double's precision compare exactly
      // (float8 and float4 too: their bit patterns, though any NaN matches any NaN)
      ok = std::memcmp(got_bytes + i * elem, want_bytes + i * elem, elem) == 0 ||
           (want.dtype() == lumen::DType::kBool && (g != 0) == (w != 0)) ||
           (lumen::is_narrow_float(want.dtype()) && std::isnan(g) && std::isnan(w));
    } else if (std::isnan(w)) {
      ok = std::isnan(g);
    } else if (std::isinf(w)) {
      ok = g == w;
    } else {
      const double rtol = want.dtype() == lumen::DType::kBFloat16 ? kRtolBFloat16 : kRtol;
      ok = std::abs(g - w) <= kAtol + rtol * std::abs(w);
    }
    if (!ok) {
      std::ostringstream os;
      os << which << " element " << i << ": got " << g << ", expected " << w;
      return os.str();
    }
  }
  return "";
}

// What a graph input or output declares: a tensor, a sequence or an optional, and the ONNX
// element type of its tensors.
std::pair<lumen::OnnxValueKind, int32_t> declared_kind(const onnx::TypeProto& type) {
  using K = lumen::OnnxValueKind;
  if (type.has_sequence_type())
    return {K::kSequence, type.sequence_type().elem_type().tensor_type().elem_type()};
  if (type.has_optional_type()) {
    const onnx::TypeProto& elem = type.optional_type().elem_type();
    if (elem.has_sequence_type())
      return {K::kOptionalSequence, elem.sequence_type().elem_type().tensor_type().elem_type()};
    return {K::kOptionalTensor, elem.tensor_type().elem_type()};
  }
  return {K::kTensor, type.tensor_type().elem_type()};
}

// run_case for a model with sequence or optional inputs or outputs: their .pb files hold
// SequenceProto and OptionalProto, read as the model declares them, and the model runs through
// OnnxSession::run_values; each tensor of an output is compared as compare() does.
std::string run_value_case(const fs::path& dir, const onnx::ModelProto& model,
                           const std::set<std::string>& initializers) {
  fs::path data = dir / "test_data_set_0";
  std::vector<fs::path> in_files = numbered(data, "input_");
  std::vector<fs::path> out_files = numbered(data, "output_");
  std::map<std::string, lumen::OnnxValue> inputs;
  size_t k = 0;
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name())) continue;
    if (k >= in_files.size()) return "fail\ttoo few input files";
    auto [kind, elem] = declared_kind(in.type());
    lumen::OnnxValue v = lumen::load_onnx_value(in_files[k++].string(), kind);
    for (lumen::Tensor& t : v.tensors) t = as_declared(t, elem);
    inputs[in.name()] = std::move(v);
  }
  if (k != in_files.size())
    return "fail\t" + std::to_string(in_files.size()) + " input files for " + std::to_string(k) +
           " inputs";
  lumen::CompileOptions compile_options;
  compile_options.backends = compile_backends;
  lumen::OnnxSession session((dir / "model.onnx").string(), {}, compile_options);
  std::vector<lumen::OnnxValue> outputs = session.run_values(inputs);
  if (outputs.size() != out_files.size())
    return "fail\t" + std::to_string(outputs.size()) + " outputs, expected " +
           std::to_string(out_files.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    auto [kind, elem] = declared_kind(model.graph().output(static_cast<int>(o)).type());
    lumen::OnnxValue want = lumen::load_onnx_value(out_files[o].string(), kind);
    const lumen::OnnxValue& got = outputs[o];
    std::string which = "output " + std::to_string(o);
    if (got.present != want.present)
      return "fail\t" + which + (got.present ? " holds a value" : " is empty") + ", expected " +
             (want.present ? "a value" : "none");
    if (got.tensors.size() != want.tensors.size())
      return "fail\t" + which + " holds " + std::to_string(got.tensors.size()) +
             " tensors, expected " + std::to_string(want.tensors.size());
    for (size_t e = 0; e < got.tensors.size(); ++e) {
      std::string diff = compare(got.tensors[e], as_declared(want.tensors[e], elem), o);
      if (!diff.empty())
        return "fail\t" + diff + " (tensor " + std::to_string(e) + " of the " +
               lumen::onnx_value_kind_name(got.kind) + ")";
    }
  }
  return std::string("pass\t") + (session.info().value_inputs.empty()
                                      ? "sequences or optionals"
                                      : "sequences or optionals; shape-deciding inputs read at run "
                                        "time");
}

// Runs in the child: returns "status\treason".
std::string run_case(const fs::path& dir) {
  try {
    onnx::ModelProto model;
    {
      std::ifstream in(dir / "model.onnx", std::ios::binary);
      if (!model.ParseFromIstream(&in)) return "fail\tthe model does not parse";
    }
    std::set<std::string> initializers;
    for (const auto& init : model.graph().initializer()) initializers.insert(init.name());
    for (const auto* infos : {&model.graph().input(), &model.graph().output()})
      for (const auto& v : *infos)
        if (v.type().has_sequence_type() || v.type().has_optional_type())
          return run_value_case(dir, model, initializers);
    std::vector<std::string> input_names;
    std::vector<int32_t> input_types;
    for (const auto& in : model.graph().input()) {
      if (initializers.count(in.name())) continue;
      if (!in.type().has_tensor_type())
        return "unsupported\tinput '" + in.name() + "' is not a tensor (sequence, map or optional)";
      input_names.push_back(in.name());
      input_types.push_back(in.type().tensor_type().elem_type());
    }
    for (const auto& out : model.graph().output())
      if (!out.type().has_tensor_type())
        return "unsupported\toutput '" + out.name() + "' is not a tensor";
    fs::path data = dir / "test_data_set_0";
    std::vector<fs::path> in_files = numbered(data, "input_");
    std::vector<fs::path> out_files = numbered(data, "output_");
    if (in_files.size() != input_names.size())
      return "fail\t" + std::to_string(in_files.size()) + " input files for " +
             std::to_string(input_names.size()) + " inputs";
    std::map<std::string, lumen::Tensor> inputs;
    bool redeclared = false;
    for (size_t k = 0; k < in_files.size(); ++k) {
      lumen::Tensor t = as_declared(lumen::load_onnx_tensor(in_files[k].string()), input_types[k]);
      redeclared |= drop_contradicted_shape(model, input_names[k], t.shape());
      inputs[input_names[k]] = t;
    }
    // Every graph input is fed at run time, as a user would: inputs whose values decide shapes
    // (Reshape's shape, Slice's starts, ...) are read by the session at each run.
    std::string model_path = (dir / "model.onnx").string();
    if (redeclared) {
      model_path =
          (fs::temp_directory_path() / ("lumen_conformance_" + std::to_string(getpid()) + ".onnx"))
              .string();
      std::ofstream out(model_path, std::ios::binary);
      model.SerializeToOstream(&out);
    }
    lumen::CompileOptions compile_options;
    compile_options.backends = compile_backends;
    lumen::OnnxSession session(model_path, {}, compile_options);
    if (redeclared) fs::remove(model_path);
    lumen::Executable* exe = session.plan_for(inputs);
    const bool by_value = !session.info().value_inputs.empty();
    std::vector<lumen::Tensor> outputs = session.run(inputs);
    if (outputs.size() != out_files.size())
      return "fail\t" + std::to_string(outputs.size()) + " outputs, expected " +
             std::to_string(out_files.size());
    for (size_t k = 0; k < outputs.size(); ++k) {
      int32_t declared = model.graph().output(static_cast<int>(k)).type().tensor_type().elem_type();
      std::string diff = compare(
          outputs[k], as_declared(lumen::load_onnx_tensor(out_files[k].string()), declared), k);
      if (!diff.empty()) return "fail\t" + diff;
    }
    std::string notes = by_value ? "shape-deciding inputs read at run time" : "";
    if (redeclared) notes += std::string(notes.empty() ? "" : "; ") + "input shape from the data";
    if (!compile_backends.empty()) {
      // Where the steps ran, when the targets were given: "steps on cuda: 2 of 3".
      const std::string summary = exe->summary();
      int steps = 0, on_first = 0;
      for (size_t p = summary.find(" @"); p != std::string::npos; p = summary.find(" @", p + 2)) {
        ++steps;
        on_first += summary.compare(p + 2, compile_backends[0].size(), compile_backends[0]) == 0;
      }
      notes += std::string(notes.empty() ? "" : "; ") + "steps on " + compile_backends[0] + ": " +
               std::to_string(on_first) + " of " + std::to_string(steps);
      // A device list without the host: why the first node left on the host stayed there.
      const std::string mark = "(on the host: ";
      if (const size_t at = summary.find(mark); at != std::string::npos)
        notes += "; on the host: " +
                 summary.substr(at + mark.size(), summary.find('\n', at) - at - mark.size() - 1);
    }
    return "pass\t" + notes;
  } catch (const lumen::UnsupportedOp& e) {
    return std::string("unsupported\t") + e.what();
  } catch (const std::exception& e) {
    return std::string("fail\t") + e.what();
  }
}

// A case's name, ops and opset, read by the parent (its outcome comes from a child).
CaseResult case_info(const fs::path& dir) {
  CaseResult r;
  r.name = dir.filename().string();
  onnx::ModelProto model;
  std::ifstream in(dir / "model.onnx", std::ios::binary);
  if (model.ParseFromIstream(&in)) {
    for (const auto& n : model.graph().node()) r.ops.insert(n.op_type());
    for (const auto& o : model.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") r.opset = o.version();
  }
  return r;
}

// run_case's line for `dir`, on one line.
std::string case_line(const fs::path& dir) {
  std::string out = run_case(dir);
  for (char& ch : out)
    if (ch == '\n') ch = ' ';
  return out;
}

// Fills r from a child's line ("status<TAB>reason"), naming files relative to the case.
void read_line(CaseResult& r, const fs::path& dir, const std::string& out) {
  auto tab = out.find('\t');
  r.status = out.substr(0, tab);
  r.reason = tab == std::string::npos ? "" : out.substr(tab + 1);
  const std::string prefix = dir.string() + "/";
  for (size_t at; (at = r.reason.find(prefix)) != std::string::npos;)
    r.reason.erase(at, prefix.size());
  if (r.status.empty()) {
    r.status = "crash";
    r.reason = "no result";
  }
}

// Fills r for a child killed by `status`'s signal: a timeout (our alarm) or a crash.
void read_death(CaseResult& r, int status) {
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  r.status = sig == SIGALRM ? "timeout" : "crash";
  r.reason = sig == SIGALRM ? "over " + std::to_string(kTimeoutSeconds) + " s"
             : sig != 0     ? std::string("signal ") + strsignal(sig)
                            : "exited without a result";
}

// A case running in a child process of its own, and the pipe its outcome comes through.
struct RunningCase {
  CaseResult result;
  fs::path dir;
  pid_t pid = -1;
  int fd = -1;
};

RunningCase start_case(const fs::path& dir) {
  RunningCase c;
  c.dir = dir;
  c.result = case_info(dir);
  int fds[2];
  if (pipe(fds) != 0) {
    c.result.status = "fail";
    c.result.reason = "pipe failed";
    return c;
  }
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(kTimeoutSeconds);
    const std::string out = case_line(dir);
    ssize_t written = write(fds[1], out.data(), out.size());
    (void)written;
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  c.pid = pid;
  c.fd = fds[0];
  return c;
}

CaseResult finish_case(RunningCase c) {
  CaseResult r = std::move(c.result);
  if (c.pid < 0) return r;
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(c.fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(c.fd);
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (WIFSIGNALED(status))
    read_death(r, status);
  else
    read_line(r, c.dir, out);
  return r;
}

// Up to `jobs` cases at once, each in a process of its own, finished in order (a child's line is
// short, well within a pipe's buffer, so a child never waits for the parent to read).
std::vector<CaseResult> run_forked(const std::vector<fs::path>& cases, int jobs) {
  std::vector<CaseResult> results;
  std::deque<RunningCase> running;
  size_t next = 0;
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && running.size() < static_cast<size_t>(jobs))
      running.push_back(start_case(cases[next++]));
    results.push_back(finish_case(std::move(running.front())));
    running.pop_front();
  }
  return results;
}

bool read_all(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = read(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// A worker process: runs the cases whose indices it is sent, one after another, answering each
// with its line (length first), until it is sent -1. Its process pays a device's start-up once for
// many cases.
struct Worker {
  pid_t pid = -1;
  int to = -1, from = -1;
  int64_t busy = -1;  // the index of the case it runs, or -1
};

Worker spawn_worker(const std::vector<fs::path>& cases) {
  int down[2], up[2];
  if (pipe(down) != 0 || pipe(up) != 0) throw std::runtime_error("pipe failed");
  fflush(stdout);
  Worker w;
  w.pid = fork();
  if (w.pid == 0) {
    close(down[1]);
    close(up[0]);
    int64_t index = 0;
    while (read_all(down[0], &index, sizeof index) && index >= 0) {
      alarm(kTimeoutSeconds);
      const std::string out = case_line(cases[static_cast<size_t>(index)]);
      alarm(0);
      const uint32_t size = static_cast<uint32_t>(out.size());
      if (write(up[1], &size, sizeof size) != sizeof size ||
          write(up[1], out.data(), out.size()) != static_cast<ssize_t>(out.size()))
        _exit(1);
    }
    _exit(0);
  }
  close(down[0]);
  close(up[1]);
  w.to = down[1];
  w.from = up[0];
  return w;
}

// `workers` worker processes share the cases; a worker that dies (a crash, or the alarm of a case
// over kTimeoutSeconds) costs only the case it was running and is replaced.
std::vector<CaseResult> run_pooled(const std::vector<fs::path>& cases, int workers) {
  std::vector<CaseResult> results(cases.size());
  std::vector<Worker> pool;
  for (int k = 0; k < workers && k < static_cast<int>(cases.size()); ++k)
    pool.push_back(spawn_worker(cases));
  size_t next = 0, done = 0;
  auto dispatch = [&](Worker& w) {
    if (next >= cases.size()) return;
    w.busy = static_cast<int64_t>(next++);
    results[static_cast<size_t>(w.busy)] = case_info(cases[static_cast<size_t>(w.busy)]);
    if (write(w.to, &w.busy, sizeof w.busy) != sizeof w.busy) {
      // The worker is gone; its death is read below.
    }
  };
  for (Worker& w : pool) dispatch(w);
  while (done < cases.size()) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t k = 0; k < pool.size(); ++k)
      if (pool[k].busy >= 0) {
        fds.push_back(pollfd{pool[k].from, POLLIN, 0});
        which.push_back(k);
      }
    if (poll(fds.data(), fds.size(), -1) < 0) continue;
    for (size_t f = 0; f < fds.size(); ++f) {
      if (fds[f].revents == 0) continue;
      Worker& w = pool[which[f]];
      const size_t index = static_cast<size_t>(w.busy);
      uint32_t size = 0;
      std::string out;
      bool ok = read_all(w.from, &size, sizeof size);
      if (ok) {
        out.resize(size);
        ok = read_all(w.from, out.data(), size);
      }
      if (ok) {
        read_line(results[index], cases[index], out);
      } else {
        close(w.to);
        close(w.from);
        int status = 0;
        waitpid(w.pid, &status, 0);
        read_death(results[index], status);
        w = spawn_worker(cases);
      }
      w.busy = -1;
      ++done;
      dispatch(w);
    }
  }
  for (Worker& w : pool) {
    // -1 ends the worker (not EOF: workers started later hold copies of this pipe's write end).
    const int64_t stop = -1;
    if (write(w.to, &stop, sizeof stop) != sizeof stop) {
      // Gone already: waitpid reaps it.
    }
    close(w.to);
    close(w.from);
    waitpid(w.pid, nullptr, 0);
  }
  return results;
}

std::string escape_md(std::string s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else
      out += c;
  }
  if (out.size() > 300) out = out.substr(0, 300) + "...";
  return out;
}

// Writes one suite's section of docs/onnx_coverage.md: totals, a table per opset and per op, and
// the reason of every case that does not pass. `title` names the suite.
// With --backends: the share of the passing cases' node steps on the first backend, from their
// reasons ("steps on cuda: A of B").
std::string placement(const std::vector<CaseResult>& results) {
  const std::string key = "steps on " + compile_backends[0] + ": ";
  long on_first = 0, steps = 0;
  int with_host = 0;
  for (const CaseResult& r : results) {
    const size_t at = r.reason.find(key);
    if (r.status != "pass" || at == std::string::npos) continue;
    long a = 0, b = 0;
    if (std::sscanf(r.reason.c_str() + at + key.size(), "%ld of %ld", &a, &b) != 2) continue;
    on_first += a;
    steps += b;
    with_host += a < b;
  }
  char text[200];
  std::snprintf(text, sizeof text,
                "%ld of %ld node steps of the passing cases on %s (%.1f%%); %d passing cases with "
                "a step elsewhere",
                on_first, steps, compile_backends[0].c_str(),
                steps ? 100.0 * on_first / steps : 0.0, with_host);
  return text;
}

void write_report(const std::string& path, const std::string& title,
                  const std::vector<CaseResult>& results) {
  std::map<std::string, int> counts;
  for (const auto& r : results) ++counts[r.status];
  std::map<std::string, std::pair<int, int>> per_op;  // op -> (pass, total)
  std::map<int64_t, std::pair<int, int>> per_opset;   // opset -> (pass, total)
  for (const auto& r : results) {
    const bool pass = r.status == "pass";
    per_opset[r.opset].second++;
    per_opset[r.opset].first += pass;
    for (const auto& op : r.ops) {
      per_op[op].second++;
      per_op[op].first += pass;
    }
  }
  std::ofstream os(path);
  int total = static_cast<int>(results.size());
  std::string where = "on the CPU backend by `tests/onnx/conformance.sh`";
  if (!compile_backends.empty()) {
    std::string list;
    for (const std::string& b : compile_backends) list += (list.empty() ? "" : ",") + b;
    where = "by `lumen_conformance --device " + list + "` (the host runs what the device does not)";
  }
  os << "## " << title << "\n\n"
     << "Run " << where
     << " with every graph input fed at run time through `OnnxSession` (rtol 1e-3, atol 1e-7; "
        "bfloat16 outputs within one bfloat16 ulp, as ONNX before 1.14 truncated its expected "
        "bfloat16 values).\n\n"
     << "| result | cases |\n| --- | ---: |\n";
  for (const char* s : {"pass", "fail", "unsupported", "crash", "timeout"})
    os << "| " << s << " | " << counts[s] << " |\n";
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.1f%%", total ? 100.0 * counts["pass"] / total : 0.0);
  os << "| **pass rate** | **" << rate << "** of " << total << " |\n\n";
  if (!compile_backends.empty()) os << "Placement: " << placement(results) << ".\n\n";
  int by_value = 0;
  std::string redeclared;
  for (const auto& r : results) {
    if (r.status != "pass") continue;
    by_value += r.reason.find("read at run time") != std::string::npos;
    if (r.reason.find("input shape from the data") != std::string::npos)
      redeclared += (redeclared.empty() ? "" : ", ") + r.name;
  }
  os << by_value
     << " of the passing cases feed a shape-deciding input (Reshape's shape, Slice's starts, "
        "Resize's scales, Reduce axes, ...) as a graph input; the session reads its value at each "
        "run and compiles (and caches) a plan per value.\n\n";
  if (!redeclared.empty())
    os << "In " << redeclared
       << ", an input's data contradicts the shape the model declares for it (CastLike's `like`, "
          "whose values are never read); the runner drops that declaration.\n\n";
  os << "### Per opset\n\n| opset | pass | cases |\n| ---: | ---: | ---: |\n";
  for (const auto& [opset, pt] : per_opset)
    os << "| " << (opset == 0 ? std::string("none (other domains)") : std::to_string(opset))
       << " | " << pt.first << " | " << pt.second << " |\n";
  os << "\n### Per op\n\n| op | pass | cases |\n| --- | ---: | ---: |\n";
  for (const auto& [op, pt] : per_op)
    os << "| " << op << " | " << pt.first << " | " << pt.second << " |\n";
  os << "\n### Cases that do not pass\n\n| case | opset | result | reason |\n"
     << "| --- | ---: | --- | --- |\n";
  for (const auto& r : results)
    if (r.status != "pass")
      os << "| " << r.name << " | " << r.opset << " | " << r.status << " | " << escape_md(r.reason)
         << " |\n";
  os << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: lumen_conformance CASES_DIR [--report FILE] [--title TEXT] [--min-pass N] "
                 "[--filter TEXT] [--backends cuda,cpu | --device cuda] [--list FILE] [--jobs N | "
                 "--workers N]\n");
    return 2;
  }
  fs::path root = argv[1];
  std::string report, filter, list, title = "ONNX node test cases";
  int min_pass = 0, jobs = 1, workers = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--report")
      report = argv[i + 1];
    else if (flag == "--min-pass")
      min_pass = std::stoi(argv[i + 1]);
    else if (flag == "--filter")
      filter = argv[i + 1];
    else if (flag == "--title")
      title = argv[i + 1];
    else if (flag == "--list")
      list = argv[i + 1];
    else if (flag == "--jobs")
      jobs = std::max(1, std::stoi(argv[i + 1]));
    else if (flag == "--workers")
      workers = std::max(1, std::stoi(argv[i + 1]));
    else if (flag == "--backends" || flag == "--device") {
      std::stringstream names(argv[i + 1]);
      for (std::string b; std::getline(names, b, ',');) compile_backends.push_back(b);
    }
  }
  fs::path node_dir = fs::exists(root / "node") ? root / "node" : root;
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(node_dir))
    if (e.is_directory() && e.path().filename().string().find(filter) != std::string::npos)
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  std::vector<CaseResult> results =
      workers > 0 ? run_pooled(cases, workers) : run_forked(cases, jobs);
  int pass = 0;
  for (const CaseResult& r : results) {
    if (r.status == "pass")
      ++pass;
    else if (!filter.empty())
      std::printf("%s: %s %s\n", r.name.c_str(), r.status.c_str(), r.reason.c_str());
  }
  std::printf("conformance: %d of %zu cases pass (%.1f%%); ratchet %d\n", pass, cases.size(),
              cases.empty() ? 0.0 : 100.0 * pass / cases.size(), min_pass);
  if (!compile_backends.empty()) std::printf("placement: %s\n", placement(results).c_str());
  if (!report.empty()) write_report(report, title, results);
  if (!list.empty()) {
    std::ofstream out(list);
    for (const CaseResult& r : results)
      out << r.name << '\t' << r.status << '\t' << r.reason << '\n';
  }
  if (pass < min_pass) {
    std::printf("conformance: FAILED: fewer passing cases than the ratchet\n");
    return 1;
  }
  return 0;
}
