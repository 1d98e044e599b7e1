#include "worker/trial/ops/op.h"

#include <sstream>

#include "worker/trial/ops/attention_kernel.h"
#include "worker/trial/ops/bev_pool.h"

namespace frontier::ops {
namespace {

thread_local CallRecorder* active_recorder = nullptr;

std::string DtypeName(c10::ScalarType t) {
  switch (t) {
    case torch::kFloat: return "fp32";
    case torch::kBFloat16: return "bf16";
    case torch::kHalf: return "fp16";
    case torch::kDouble: return "fp64";
    default: return c10::toString(t);
  }
}

bool SameShapes(const OpCall& a, const OpCall& b) {
  if (a.op != b.op || a.variant != b.variant || a.edge != b.edge || a.inputs.size() != b.inputs.size()) return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    if (a.inputs[i].sizes() != b.inputs[i].sizes() || a.inputs[i].scalar_type() != b.inputs[i].scalar_type() ||
        a.inputs[i].device() != b.inputs[i].device()) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string OpCall::Shapes() const {
  std::ostringstream os;
  for (size_t i = 0; i < inputs.size(); ++i) {
    os << (i ? ", " : "") << (i < input_names.size() ? input_names[i] : "input " + std::to_string(i)) << " (";
    for (int64_t d = 0; d < inputs[i].dim(); ++d) os << (d ? ", " : "") << inputs[i].size(d);
    os << ") " << DtypeName(inputs[i].scalar_type());
  }
  return os.str();
}

Registry<Op>& OpRegistry() {
  static Registry<Op> registry = [] {
    Registry<Op> r("op");
    r.Add("bev_pool", bev::PoolOp());
    r.Add("attention_kernel", attention::KernelOp());
    return r;
  }();
  return registry;
}

CallRecorder::CallRecorder() {
  TORCH_CHECK(active_recorder == nullptr, "op call recorders do not nest");
  active_recorder = this;
}

CallRecorder::~CallRecorder() { active_recorder = nullptr; }

void Record(const std::function<OpCall()>& make) {
  if (active_recorder == nullptr) return;
  OpCall call = make();
  for (const OpCall& kept : active_recorder->calls_) {
    if (SameShapes(kept, call)) return;
  }
  // Only the metadata is kept: the gate and the benchmark draw their own inputs.
  for (torch::Tensor& t : call.inputs) t = torch::empty(t.sizes(), t.options().requires_grad(false));
  active_recorder->calls_.push_back(std::move(call));
}

torch::Tensor OneHotRows(c10::IntArrayRef sizes, at::Generator& generator) {
  if (sizes.empty() || sizes.back() == 0) return torch::zeros(sizes);
  const std::vector<int64_t> rows(sizes.begin(), sizes.end() - 1);
  return torch::one_hot(torch::randint(sizes.back(), rows, generator, torch::kLong), sizes.back()).to(torch::kFloat);
}

std::vector<torch::Tensor> RandomInputs(const Op& op, const OpCall& call, at::Generator& generator) {
  if (op.random_inputs) return op.random_inputs(call, generator);
  std::vector<torch::Tensor> inputs;
  for (const torch::Tensor& like : call.inputs) {
    inputs.push_back(torch::randn(like.sizes(), generator, torch::kFloat).to(like.options()));
  }
  return inputs;
}

}  // namespace frontier::ops
