// OnnxSession: one ONNX file, one compiled plan per distinct set of input shapes and values of the
// inputs that decide shapes, the least recently used evicted beyond max_plans(). Every plan is
// built from the file with the same weight tensors (onnx/weight_cache.h), and packed or device
// copies of a weight are shared between plans (core/derived_tensors.h): another plan costs its
// kernels and activations, not another copy of the model.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "lumen/onnx.h"
#include "onnx/session_state.h"
#include "onnx/weight_cache.h"

namespace lumen {

namespace {

// The ShapeError the importer gives when a value input's value is needed and not given.
constexpr const char* kValueAtRunTime = "the value comes at run time";

// A value input's value for keys and messages: dtype, shape and every element (a host copy first
// for a device tensor). Value inputs are small (shapes, axes, counts).
std::string value_text(const Tensor& t, bool for_key) {
  Tensor host = t.device() == Device::cpu() ? t : t.to(Device::cpu());
  std::ostringstream os;
  os.precision(17);
  if (for_key) os << dtype_name(host.dtype()) << host.shape().to_string();
  os << "[";
  const int64_t shown = for_key ? host.numel() : std::min<int64_t>(host.numel(), 16);
  for (int64_t i = 0; i < shown; ++i) os << (i ? ", " : "") << host.item_as_double(i);
  if (shown < host.numel()) os << ", ...";
  os << "]";
  return os.str();
}

[[noreturn]] void rethrow_with(const Error& e, const std::string& suffix) {
  std::string msg = e.what();
  auto colon = msg.find(": ");
  std::string detail = (colon == std::string::npos ? msg : msg.substr(colon + 2)) + suffix;
  switch (e.kind()) {
    case ErrorKind::kShapeError:
      throw ShapeError(detail);
    case ErrorKind::kUnsupportedOp:
      throw UnsupportedOp(detail);
    case ErrorKind::kInvalidModel:
      throw InvalidModel(detail);
    case ErrorKind::kInvalidArgument:
      throw InvalidArgument(detail);
    default:
      throw;
  }
}

}  // namespace

// The structure of sequence and optional inputs for one run: element shapes, empty optionals.
struct OnnxSession::Lists {
  std::map<std::string, std::vector<Shape>> sequence_shapes;
  std::set<std::string> empty_optionals;
};

OnnxSession::OnnxSession(const std::string& path, OnnxLoadOptions options, CompileOptions compile)
    : path_(path),
      weights_(std::make_unique<Weights>()),
      options_(std::move(options)),
      compile_(std::move(compile)) {
  if (!std::ifstream(path, std::ios::binary)) throw IoError("cannot open '" + path + "'");
  const std::string dir = std::filesystem::path(path).parent_path().string();
  weights_->base_dir = dir.empty() ? "." : dir;
  options_.input_shapes.clear();
  options_.sequence_shapes.clear();
  options_.empty_optionals.clear();
  // Load once with the default dims: a malformed or unsupported model fails here, not at run. A
  // model with value inputs is built up to the first node that needs their values.
  try {
    onnx_import::load_onnx_cached(path_, options_, weights_->cache, &info_, &weights_->model);
  } catch (const ShapeError& e) {
    // Sequence and optional inputs were read at default lengths, which the model may not fit.
    const bool lists = std::any_of(info_.inputs.begin(), info_.inputs.end(), [](const auto& in) {
      return in.kind != OnnxValueKind::kTensor;
    });
    if (!lists && (info_.value_inputs.empty() ||
                   std::string(e.what()).find(kValueAtRunTime) == std::string::npos))
      throw;
  }
}

OnnxSession::~OnnxSession() = default;

std::shared_ptr<OnnxSession::Plan> OnnxSession::acquire(const std::map<std::string, Tensor>& inputs,
                                                        const std::map<std::string, Shape>& shapes,
                                                        const Lists* lists, const Edit* edit) {
  std::string key = edit != nullptr ? "edit " + edit->key + ":" : "";
  for (const auto& [name, shape] : shapes) key += name + "=" + shape.to_string() + ";";
  if (lists != nullptr) {
    for (const auto& [name, elements] : lists->sequence_shapes) {
      key += name + "=seq(";
      for (const Shape& s : elements) key += s.to_string();
      key += ");";
    }
    for (const std::string& name : lists->empty_optionals) key += name + "=none;";
  }
  for (const std::string& name : info_.value_inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end())
      throw InvalidArgument("OnnxSession: input '" + name +
                            "' decides shapes by its value, which is not given");
    key += name + "#" + value_text(it->second, true) + ";";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    it->second->last_used = ++clock_;
    return it->second;
  }
  if (refused_edits_.count(key)) return std::make_shared<Plan>();
  OnnxLoadOptions options = options_;
  options.input_shapes = shapes;
  if (lists != nullptr) {
    options.sequence_shapes = lists->sequence_shapes;
    options.empty_optionals = lists->empty_optionals;
  }
  std::string values_said;
  for (const std::string& name : info_.value_inputs) {
    const Tensor& t = inputs.at(name);
    options.input_values[name] = t.device() == Device::cpu() ? t : t.to(Device::cpu());
    options.input_shapes.erase(name);
    values_said += std::string(values_said.empty() ? " (run-time value of input '" : ", '") + name +
                   "': " + value_text(t, false);
  }
  if (!values_said.empty()) values_said += ")";
  auto plan = std::make_shared<Plan>();
  if (lists == nullptr && edit == nullptr && info_.value_inputs.empty() &&
      !options_.plan_per_shape && plan_from_family_locked(shapes, options, plan)) {
    plan->last_used = ++clock_;
    plans_.emplace(key, plan);
    evict_locked();
    return plan;
  }
  try {
    OnnxModelInfo built;
    plan->graph = onnx_import::load_onnx_model(weights_->model, weights_->base_dir, options,
                                               weights_->cache, &built);
    plan->forms = std::move(built.output_forms);
    // With "auto" every available backend may run the graph.
    // Outputs that are all empty sequences or optionals leave nothing to compute.
    if (!plan->graph.outputs().empty()) {
      plan->graph.optimize(compile_.is_auto() ? std::vector<std::string>{} : compile_.backends);
      if (edit != nullptr && !(*edit->apply)(plan->graph)) {
        refused_edits_.insert(key);  // not tried again
        return std::make_shared<Plan>();
      }
      plan->executable = plan->graph.compile(&plan->runtime, compile_);
    }
  } catch (const Error& e) {
    if (values_said.empty()) throw;
    rethrow_with(e, values_said);
  }
  ++stats_.compiles;
  plan->fixed.insert(info_.value_inputs.begin(), info_.value_inputs.end());
  plan->last_used = ++clock_;
  plans_.emplace(key, plan);
  evict_locked();
  return plan;
}

void OnnxSession::evict_locked() {
  while (plans_.size() > max_plans_) {
    auto oldest = std::min_element(plans_.begin(), plans_.end(), [](const auto& a, const auto& b) {
      return a.second->last_used < b.second->last_used;
    });
    plans_.erase(oldest);  // a run still holding it keeps it alive until it returns
  }
}

namespace {

// Sequence and optional inputs are fed through run_values, which keys plans by their structure.
void refuse_lists(const OnnxModelInfo& info, const char* what) {
  for (const OnnxInputInfo& in : info.inputs)
    if (in.kind != OnnxValueKind::kTensor)
      throw InvalidArgument(std::string(what) + ": input '" + in.name + "' is a " +
                            onnx_value_kind_name(in.kind) + "; use run_values");
}

}  // namespace

Executable* OnnxSession::plan_for(const std::map<std::string, Tensor>& inputs) {
  refuse_lists(info_, "OnnxSession::plan_for");
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  return acquire(inputs, shapes)->executable;
}

Executable* OnnxSession::plan_for(const std::map<std::string, Shape>& shapes) {
  refuse_lists(info_, "OnnxSession::plan_for");
  if (!info_.value_inputs.empty())
    throw InvalidArgument("OnnxSession::plan_for: input '" + info_.value_inputs.front() +
                          "' decides shapes by its value; pass the input tensors");
  return acquire({}, shapes)->executable;
}

Executable* OnnxSession::plan_edited(const std::map<std::string, Shape>& shapes,
                                     const std::string& edit_key,
                                     const std::function<bool(Graph&)>& edit) {
  refuse_lists(info_, "OnnxSession::plan_edited");
  if (!info_.value_inputs.empty())
    throw InvalidArgument("OnnxSession::plan_edited: input '" + info_.value_inputs.front() +
                          "' decides shapes by its value");
  const Edit e{edit_key, &edit};
  return acquire({}, shapes, nullptr, &e)->executable;
}

std::vector<Tensor> OnnxSession::run(const std::map<std::string, Tensor>& inputs) {
  return run(inputs, OutputPlace::kHost);
}

std::vector<Tensor> OnnxSession::run(const std::map<std::string, Tensor>& inputs,
                                     OutputPlace place) {
  refuse_lists(info_, "OnnxSession::run");
  std::map<std::string, Shape> shapes;
  for (const OnnxInputInfo& declared : info_.inputs) {
    if (options_.input_values.count(declared.name)) continue;
    auto it = inputs.find(declared.name);
    if (it == inputs.end())
      throw InvalidArgument("OnnxSession::run: input '" + declared.name + "' is missing");
    if (!it->second.defined())
      throw InvalidArgument("OnnxSession::run: input '" + declared.name + "' is undefined");
    shapes[declared.name] = it->second.shape();
  }
  for (const auto& [name, tensor] : inputs)
    if (!shapes.count(name))
      throw InvalidArgument("OnnxSession::run: the model has no input named '" + name + "'");
  std::shared_ptr<Plan> plan = acquire(inputs, shapes);
  for (size_t k = 0; k < plan->forms.size(); ++k)
    if (plan->forms[k].kind != OnnxValueKind::kTensor)
      throw InvalidArgument("OnnxSession::run: output '" + info_.outputs.at(k) + "' is a " +
                            onnx_value_kind_name(plan->forms[k].kind) + "; use run_values");
  if (plan->fixed.empty()) return plan->executable->execute(inputs, place);
  std::map<std::string, Tensor> fed;
  for (const auto& [name, tensor] : inputs)
    if (!plan->fixed.count(name)) fed.emplace(name, tensor);
  return plan->executable->execute(fed, place);
}

namespace {

// Whether a value of kind `given` may feed an input declared `declared`: the same kind, or for an
// optional the kind it holds.
bool kind_fits(OnnxValueKind declared, OnnxValueKind given) {
  if (declared == given) return true;
  if (declared == OnnxValueKind::kOptionalTensor) return given == OnnxValueKind::kTensor;
  if (declared == OnnxValueKind::kOptionalSequence) return given == OnnxValueKind::kSequence;
  return false;
}

}  // namespace

std::vector<OnnxValue> OnnxSession::run_values(const std::map<std::string, OnnxValue>& inputs) {
  const std::string where = "OnnxSession::run_values: input '";
  std::map<std::string, Tensor> fed;  // by graph input name: "x", or "x[k]" for sequences
  std::map<std::string, Shape> shapes;
  Lists lists;
  for (const OnnxInputInfo& declared : info_.inputs) {
    if (options_.input_values.count(declared.name)) continue;
    auto it = inputs.find(declared.name);
    if (it == inputs.end()) throw InvalidArgument(where + declared.name + "' is missing");
    const OnnxValue& v = it->second;
    if (!kind_fits(declared.kind, v.kind))
      throw InvalidArgument(where + declared.name + "' is a " +
                            onnx_value_kind_name(declared.kind) + ", given a " +
                            onnx_value_kind_name(v.kind));
    const bool sequence =
        v.kind == OnnxValueKind::kSequence || v.kind == OnnxValueKind::kOptionalSequence;
    if (!v.present && (v.kind == OnnxValueKind::kTensor || v.kind == OnnxValueKind::kSequence))
      throw InvalidArgument(where + declared.name + "': only an optional may be empty");
    const size_t count = !v.present ? 0 : sequence ? v.tensors.size() : 1;
    if (v.tensors.size() != count)
      throw InvalidArgument(where + declared.name + "': a " + onnx_value_kind_name(v.kind) +
                            (v.present ? "" : " that is empty") + " holds " +
                            std::to_string(count) + " tensors, given " +
                            std::to_string(v.tensors.size()));
    for (size_t k = 0; k < v.tensors.size(); ++k)
      if (!v.tensors[k].defined())
        throw InvalidArgument(where + declared.name + "' holds an undefined tensor");
    if (!v.present) {
      lists.empty_optionals.insert(declared.name);
    } else if (!sequence) {
      fed[declared.name] = v.tensors[0];
      shapes[declared.name] = v.tensors[0].shape();
    } else {
      std::vector<Shape>& element_shapes = lists.sequence_shapes[declared.name];
      for (size_t k = 0; k < v.tensors.size(); ++k) {
        const Tensor& t = v.tensors[k];
        if (t.dtype() != declared.dtype)
          throw InvalidArgument(where + declared.name + "': element " + std::to_string(k) + " is " +
                                dtype_name(t.dtype()) + ", the model declares " +
                                dtype_name(declared.dtype));
        fed[onnx_element_name(declared.name, k)] = t;
        element_shapes.push_back(t.shape());
      }
    }
  }
  for (const auto& [name, value] : inputs) {
    bool known = false;
    for (const OnnxInputInfo& declared : info_.inputs) known = known || declared.name == name;
    if (!known || options_.input_values.count(name))
      throw InvalidArgument("OnnxSession::run_values: the model has no input named '" + name + "'" +
                            (known ? " left to feed (its value is fixed)" : ""));
  }
  std::shared_ptr<Plan> plan = acquire(fed, shapes, &lists);
  for (const std::string& name : plan->fixed) fed.erase(name);
  std::vector<Tensor> tensors;
  if (plan->executable != nullptr) tensors = plan->executable->execute(fed);
  std::vector<OnnxValue> out;
  for (const OnnxOutputForm& form : plan->forms) {
    OnnxValue v{form.kind, form.present, {}};
    v.tensors.assign(tensors.begin() + form.first, tensors.begin() + form.first + form.count);
    out.push_back(std::move(v));
  }
  return out;
}

size_t OnnxSession::num_plans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

OnnxSession::Stats OnnxSession::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

size_t OnnxSession::max_plans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_plans_;
}

void OnnxSession::set_max_plans(size_t n) {
  if (n == 0) throw InvalidArgument("OnnxSession::set_max_plans: at least one plan must be kept");
  std::lock_guard<std::mutex> lock(mutex_);
  max_plans_ = n;
  evict_locked();
}

}  // namespace lumen
