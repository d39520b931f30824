// Executable::execute: bind inputs, run the steps, hand back the outputs.
#include <sstream>

#include "runtime/executable_impl.h"

namespace lumen {

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::~Executable() = default;

const std::vector<TensorInfo>& Executable::inputs() const {
  return impl_->inputs;
}
const std::vector<TensorInfo>& Executable::outputs() const {
  return impl_->outputs;
}

std::vector<Tensor> Executable::execute(const std::vector<Tensor>& inputs) {
  const Impl& impl = *impl_;
  if (inputs.size() != impl.inputs.size())
    throw InvalidArgument("execute: expected " + std::to_string(impl.inputs.size()) +
                          " inputs, got " + std::to_string(inputs.size()));
  std::vector<Tensor> slots = impl.constants;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorInfo& info = impl.inputs[i];
    const Tensor& t = inputs[i];
    if (!t.defined()) throw InvalidArgument("execute: input '" + info.name + "' is undefined");
    if (t.dtype() != info.type.dtype || t.shape() != info.type.shape)
      throw ShapeError("execute: input '" + info.name + "' must be " + info.type.to_string() +
                       ", got " + TensorType{t.dtype(), t.shape()}.to_string());
    if (t.device().type != DeviceType::kCPU)
      throw InvalidArgument("execute: input '" + info.name + "' is on " + t.device().to_string() +
                            "; pass a host tensor");
    slots[impl.input_slots[i]] = t;
  }
  std::vector<Tensor> step_inputs;
  std::vector<Tensor> step_outputs;
  for (const Step& step : impl.steps) {
    step_inputs.clear();
    for (int s : step.inputs) step_inputs.push_back(s < 0 ? Tensor() : slots[s]);
    step_outputs.assign(step.outputs.size(), Tensor());
    if (!step.kernel->makes_outputs())
      for (size_t k = 0; k < step_outputs.size(); ++k)
        step_outputs[k] = Tensor::empty(step.output_types[k].shape, step.output_types[k].dtype,
                                        step.backend->device());
    KernelContext ctx{step_inputs, step_outputs, &step.backend->default_stream()};
    step.kernel->run(ctx);
    for (size_t k = 0; k < step_outputs.size(); ++k) {
      const TensorType& want = step.output_types[k];
      if (step_outputs[k].dtype() != want.dtype || !want.shape.admits(step_outputs[k].shape()))
        throw DeviceError("execute: step " + step.label + " produced " +
                          TensorType{step_outputs[k].dtype(), step_outputs[k].shape()}.to_string() +
                          ", expected " + want.to_string());
      slots[step.outputs[k]] = std::move(step_outputs[k]);
    }
    for (int s : step.release) slots[s] = Tensor();
  }
  std::vector<Tensor> outputs;
  for (int s : impl.output_slots)
    outputs.push_back(impl.constants[s].defined() ? slots[s].clone() : slots[s]);
  return outputs;
}

std::vector<Tensor> Executable::execute(const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> ordered;
  for (const TensorInfo& info : impl_->inputs) {
    auto it = inputs.find(info.name);
    if (it == inputs.end()) throw InvalidArgument("execute: input '" + info.name + "' is missing");
    ordered.push_back(it->second);
  }
  for (const auto& [name, tensor] : inputs) {
    bool known = false;
    for (const TensorInfo& info : impl_->inputs) known = known || info.name == name;
    if (!known) throw InvalidArgument("execute: the graph has no input named '" + name + "'");
  }
  return execute(ordered);
}

std::string Executable::summary() const {
  std::ostringstream os;
  os << impl_->steps.size() << " steps\n";
  for (size_t i = 0; i < impl_->steps.size(); ++i)
    os << "  " << i << ": " << impl_->steps[i].label << "\n";
  return os.str();
}

}  // namespace lumen
