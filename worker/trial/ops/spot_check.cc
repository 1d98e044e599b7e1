#include "worker/trial/ops/spot_check.h"

#include <algorithm>
#include <random>
#include <utility>
#include <ATen/record_function.h>

namespace frontier::ops {

using torch::Tensor;

namespace {
thread_local SpotCheck* active_spot_check = nullptr;
}  // namespace

struct SpotCheck::Watched {
  OpCall call;
  bool autograd = false;        // grad mode was on at the call
  std::vector<Tensor> before;   // the inputs before the call (copies)
  std::vector<Tensor> passed;   // what the variant was given: the inputs, each floating one through a copy of its own
  Tensor output;                // a copy, taken as it returned
  bool output_requires_grad = false;
  bool aliases_input = false;
  Tensor upstream;              // the gradient its output received
  std::vector<Tensor> grads;    // the gradients its backward gave its inputs (undefined: none came)
};

SpotCheck::SpotCheck() {
  TORCH_CHECK(active_spot_check == nullptr, "spot checks do not nest");
  active_spot_check = this;
}

SpotCheck::~SpotCheck() {
  Release();
  active_spot_check = nullptr;
}

// A watched input's hook holds its Watched, which holds the input: the cycle is broken here.
void SpotCheck::Release() {
  for (const std::shared_ptr<Watched>& w : watched_) w->passed.clear();
  watched_.clear();
}

void SpotCheck::Arm(std::string label) {
  Release();
  armed_ = true;
  label_ = std::move(label);
}

std::vector<VariantCheck> SpotCheck::Check() {
  armed_ = false;
  GateOptions options;  // one case at the call itself: the rules that apply to any single call
  options.draws = 1;
  options.left_out = {GateRule::kStructured, GateRule::kEdgeCases, GateRule::kOtherShapes, GateRule::kRepeatedCall,
                      GateRule::kWithoutAutograd};
  std::vector<VariantCheck> checks;
  for (const std::shared_ptr<Watched>& w : watched_) {
    GateCase gate_case;
    gate_case.label = label_;
    gate_case.inputs = w->before;
    gate_case.upstream = w->upstream;
    // Without autograd, or with no gradient reaching its output, only the forward can be compared; an
    // output that does not require grad where the inputs do is compared as the gate does (a missing backward).
    gate_case.forward_only = !w->autograd || (w->output_requires_grad && !w->upstream.defined());
    CaseRun run;
    run.output = w->output;
    run.output_requires_grad = w->output_requires_grad;
    run.aliases_input = w->aliases_input;
    run.grads = w->grads;
    if (!run.output.defined()) run.error = "returned no tensor";
    for (const Tensor& t : w->passed) run.inputs_after.push_back(t.detach());
    checks.push_back(CompareRuns(w->call, {w->call}, {gate_case}, {run}, options));
  }
  Release();
  return checks;
}

std::set<int> DrawSpotCheckSteps(std::vector<int> steps, int count, int64_t seed) {
  std::mt19937_64 draw(static_cast<uint64_t>(seed) * 0x9e3779b97f4a7c15ULL + 17);
  std::shuffle(steps.begin(), steps.end(), draw);
  steps.resize(std::min<size_t>(steps.size(), static_cast<size_t>(std::max(0, count))));
  return {steps.begin(), steps.end()};
}

Tensor Dispatch(const std::function<OpCall()>& make, const std::vector<Tensor>& inputs,
                const std::function<Tensor(const std::vector<Tensor>&)>& run) {
  // A scope named after the op around whatever its variant runs: the FLOP counter charges it the op's own
  // formula and nothing inside it (measure/flop_counter.cc), so every variant of an op counts the same
  // work, whether it runs on a thread pool, recomputes, or skips what the reference computes.
  at::RecordFunction scope(at::RecordScope::FUNCTION);
  if (scope.isActive()) {
    std::string name = "frontier::op::" + make().op;
    if (scope.needsInputs()) {
      const std::vector<c10::IValue> values(inputs.begin(), inputs.end());
      scope.before(std::move(name), c10::ArrayRef<const c10::IValue>(values.data(), values.size()));
    } else {
      scope.before(std::move(name));
    }
  }
  Record(make);
  SpotCheck* spot = active_spot_check;
  if (spot == nullptr || !spot->armed_) return run(inputs);
  OpCall call = make();
  if (call.variant == OpRegistry().At(call.op).reference) return run(inputs);
  for (const auto& w : spot->watched_) {
    if (w->call.op == call.op) return run(inputs);  // one call of each op per armed step
  }
  auto w = std::make_shared<SpotCheck::Watched>();
  w->autograd = torch::GradMode::is_enabled();
  w->grads.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    w->before.push_back(inputs[i].detach().clone());
    Tensor given = inputs[i];
    if (w->autograd && given.is_floating_point() && given.requires_grad()) {
      // A copy that only the variant uses: the gradient it receives is the one the variant's backward gave.
      given = given.clone();
      given.register_hook([w, i](const Tensor& grad) { w->grads[i] = grad.detach().clone(); });
    }
    w->passed.push_back(given);
  }
  Tensor out = run(w->passed);
  if (out.defined()) {
    w->output = out.detach().clone();
    w->output_requires_grad = out.requires_grad();
    for (const Tensor& given : w->passed) w->aliases_input = w->aliases_input || StorageOverlaps(out, given);
    if (out.requires_grad()) {
      out.register_hook([w](const Tensor& grad) { w->upstream = grad.detach().clone(); });
    }
  }
  w->call = std::move(call);
  spot->watched_.push_back(std::move(w));
  return out;
}

}  // namespace frontier::ops
