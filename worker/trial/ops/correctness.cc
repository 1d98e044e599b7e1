#include "worker/trial/ops/correctness.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

namespace frontier::ops {
namespace {

using torch::Tensor;

std::string IndexOf(const Tensor& t, int64_t flat) {
  std::ostringstream os;
  os << "[";
  std::vector<int64_t> index(t.dim());
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    index[d] = flat % t.size(d);
    flat /= t.size(d);
  }
  for (size_t d = 0; d < index.size(); ++d) os << (d ? ", " : "") << index[d];
  os << "]";
  return os.str();
}

std::string Sizes(const Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

std::string InputName(const OpCall& call, size_t i) {
  return i < call.input_names.size() ? call.input_names[i] : "input " + std::to_string(i);
}

// The scale of an element's error: |r| + mean |r|, and where the reference
// vanishes (mean below 1e-9 of `natural`, its mean magnitude on the first
// draw, when known) the natural size instead of nothing.
torch::Tensor ErrorScale(const torch::Tensor& rd, double natural) {
  const double mean = rd.abs().mean().item<double>();
  const double floor_scale = natural > 0 && mean <= 1e-9 * natural ? natural : std::numeric_limits<double>::min();
  return rd.abs() + mean + floor_scale;
}

// The largest error of `v` against `r` by that scale (0 for empty tensors, NaN-free).
double WorstRelative(const Tensor& v, const Tensor& r, double natural) {
  if (r.numel() == 0 || v.sizes() != r.sizes()) return 0;
  const Tensor vd = v.detach().to(torch::kCPU, torch::kDouble), rd = r.detach().to(torch::kCPU, torch::kDouble);
  return ((vd - rd).abs() / ErrorScale(rd, natural)).nan_to_num(0).max().item<double>();
}

// Compares the variant's `v` with the float64 reference `r` at relative
// tolerance `tolerance`; on a failure fills the check's problem and place and
// returns false.
//
// `natural`: the mean magnitude of the same tensor on the first draw (0:
// unknown). Where the reference vanishes (mean below 1e-9 of that, e.g. the
// gradient of q when every row of v is alike), rounding noise is measured
// against the natural size instead of against nothing.
bool Compare(const Tensor& v, const Tensor& r, double tolerance, double natural, const std::string& where,
             VariantCheck& c) {
  c.tolerance = std::max(c.tolerance, tolerance);
  if (!v.defined() || v.sizes() != r.sizes()) {
    c.problem = "has shape " + (v.defined() ? Sizes(v) : std::string("(none)")) + ", the reference " + Sizes(r);
    c.where = where;
    return false;
  }
  if (r.numel() == 0) return true;
  const Tensor vd = v.detach().to(torch::kCPU, torch::kDouble), rd = r.detach().to(torch::kCPU, torch::kDouble);
  const Tensor bad = torch::logical_and(torch::logical_not(torch::isfinite(vd)), torch::isfinite(rd));
  if (bad.any().item<bool>()) {
    const int64_t at = bad.reshape(-1).to(torch::kInt).argmax().item<int64_t>();
    c.problem = "is " + std::to_string(vd.reshape(-1)[at].item<double>()) + " where the reference is " +
                std::to_string(rd.reshape(-1)[at].item<double>());
    c.where = where + " at " + IndexOf(rd, at);
    c.worst_abs = c.worst_rel = std::numeric_limits<double>::infinity();
    return false;
  }
  const Tensor diff = (vd - rd).abs().nan_to_num(0);
  const Tensor rel = diff / ErrorScale(rd, natural);
  const double worst_abs = diff.max().item<double>();
  const int64_t at = rel.reshape(-1).argmax().item<int64_t>();
  const double worst_rel = rel.reshape(-1)[at].item<double>();
  c.worst_abs = std::max(c.worst_abs, worst_abs);
  c.worst_rel = std::max(c.worst_rel, worst_rel);
  if (worst_rel <= tolerance) return true;
  c.tolerance = tolerance;
  std::ostringstream os;
  os << "differs from the reference: " << vd.reshape(-1)[at].item<double>() << " vs "
     << rd.reshape(-1)[at].item<double>() << " (relative error " << worst_rel << ", tolerance " << tolerance
     << ")";
  c.problem = os.str();
  c.where = where + " at " + IndexOf(rd, at);
  return false;
}

Tensor Leaf(const Tensor& t, c10::optional<c10::ScalarType> dtype = c10::nullopt) {
  Tensor leaf = dtype ? t.detach().to(*dtype) : t.detach().clone();
  return leaf.requires_grad_(leaf.is_floating_point());
}

// The reference's forward and input gradients on `inputs` in `dtype`
// (float64: the exact result; the call's dtype: the tolerance's measure).
struct ReferenceRun {
  Tensor output;
  std::vector<Tensor> grads;
};
// The output gradient of a case, in the output's dtype.
Tensor UpstreamOf(const GateCase& gate_case, const Tensor& out) {
  const Tensor upstream =
      gate_case.upstream.defined() ? gate_case.upstream : UpstreamGradient(out.sizes(), gate_case.upstream_seed);
  return upstream.to(out.options());
}

ReferenceRun RunReference(const OpCall& call, const std::string& reference, const GateCase& gate_case, bool exact) {
  std::vector<Tensor> leaves, floating;
  for (const Tensor& t : gate_case.inputs) {
    leaves.push_back(exact && t.is_floating_point() ? Leaf(t, torch::kDouble) : Leaf(t));
    if (leaves.back().requires_grad()) floating.push_back(leaves.back());
  }
  ReferenceRun run;
  run.output = call.run(reference, leaves);  // the reference's own errors are Frontier's: they propagate
  run.grads.resize(gate_case.inputs.size());
  if (!floating.empty() && run.output.requires_grad()) {
    const std::vector<Tensor> g =
        torch::autograd::grad({run.output}, floating, {UpstreamOf(gate_case, run.output)}, false, false, true);
    for (size_t i = 0, f = 0; i < leaves.size(); ++i) {
      if (leaves[i].requires_grad()) run.grads[i] = g[f++];
    }
  }
  run.output = run.output.detach();
  return run;
}

c10::ScalarType CallDtype(const OpCall& call) {
  for (const Tensor& t : call.inputs) {
    if (t.is_floating_point()) return t.scalar_type();
  }
  return torch::kFloat;
}

// The generic structured input sets at a call's shapes: every floating input
// alike (integer inputs from the op's generator).
std::vector<StructuredInputs> StructuredSets(const Op& op, const OpCall& call, at::Generator& generator) {
  if (op.structured_inputs) return op.structured_inputs(call, generator);
  const std::vector<Tensor> base = RandomInputs(op, call, generator);
  const auto make = [&](const std::function<Tensor(const Tensor&)>& fill) {
    std::vector<Tensor> inputs;
    for (const Tensor& t : base) inputs.push_back(t.is_floating_point() ? fill(t).to(t.options()) : t);
    return inputs;
  };
  const auto normal = [&](const Tensor& t) { return torch::randn(t.sizes(), generator, torch::kFloat); };
  std::vector<StructuredInputs> sets;
  sets.push_back({"constant inputs", make([](const Tensor& t) { return torch::full(t.sizes(), 0.5); })});
  sets.push_back({"small integers", make([&](const Tensor& t) { return normal(t).mul(1.5).round().clamp(-2, 2); })});
  sets.push_back({"one-hot rows", make([&](const Tensor& t) { return OneHotRows(t.sizes(), generator); })});
  sets.push_back({"large magnitudes (x1e3)", make([&](const Tensor& t) { return normal(t).mul(1e3); })});
  sets.push_back({"tiny magnitudes (x1e-4)", make([&](const Tensor& t) { return normal(t).mul(1e-4); })});
  return sets;
}

// Compares one case's run with the reference; false (the check filled) on a failure.
// `natural`: the mean magnitudes of the output and of each input's gradient
// on the first draw (filled by the first case compared).
bool CompareCase(const OpCall& call, const Op& op, const GateCase& gate_case, const CaseRun& run,
                 const GateOptions& options, c10::ScalarType dtype, std::vector<double>& natural, VariantCheck& c) {
  const std::string& label = gate_case.label;
  // A wrong number in a case some rule made is that rule's catch.
  const std::string rule = RuleName(gate_case.rule);
  if (!run.error.empty()) {
    c.problem = run.error;
    c.where = label;
    c.rule = rule;
    return false;
  }
  // Inputs chosen to stress a kernel (structured, edge cases, other shapes)
  // are often ill-conditioned (one-hot rows over a thousand keys cancel in
  // the gradient of q), where a right kernel of another summation order
  // rounds several times more than the reference: they allow eight times the
  // reference's own error instead of two, still far below a wrong kernel's.
  const double floor = ToleranceFor(dtype).rtol;
  const double slack = gate_case.rule == GateRule::kNumbers || gate_case.rule == GateRule::kRepeatedCall ||
                               gate_case.rule == GateRule::kWithoutAutograd
                           ? 2
                           : 8;
  const auto tolerance = [floor, slack](const Tensor& reference_in_dtype, const Tensor& exact, double usual) {
    return std::max(floor, slack * WorstRelative(reference_in_dtype, exact, usual));
  };
  const ReferenceRun exact = RunReference(call, op.reference, gate_case, true);
  const ReferenceRun low = RunReference(call, op.reference, gate_case, false);
  if (natural.empty()) {
    const auto mean = [](const Tensor& t) { return t.defined() && t.numel() ? t.abs().mean().item<double>() : 0.0; };
    natural.push_back(mean(exact.output));
    for (const Tensor& g : exact.grads) natural.push_back(mean(g));
  }
  c.rule = rule;
  if (run.output.defined() && run.output.scalar_type() != low.output.scalar_type()) {  // the model's next layer
    c.problem = std::string("returns ") + c10::toString(run.output.scalar_type()) + ", the reference " +
                c10::toString(low.output.scalar_type());
    c.where = label + ", forward";
    return false;
  }
  if (!Compare(run.output, exact.output, tolerance(low.output, exact.output, natural.at(0)), natural.at(0),
               label + ", forward", c)) {
    return false;
  }
  if (options.Applies(GateRule::kNoAliasing) && run.aliases_input) {
    c.rule = RuleName(GateRule::kNoAliasing);
    c.problem = "returned an output that shares storage with an input";
    c.where = label + ", forward";
    return false;
  }
  if (options.Applies(GateRule::kUnchangedInputs)) {
    for (size_t i = 0; i < gate_case.inputs.size(); ++i) {
      const bool same = i < run.inputs_after.size() && run.inputs_after[i].defined() &&
                        run.inputs_after[i].sizes() == gate_case.inputs[i].sizes() &&
                        torch::equal(run.inputs_after[i].to(gate_case.inputs[i].options()), gate_case.inputs[i]);
      if (!same) {
        c.rule = RuleName(GateRule::kUnchangedInputs);
        c.problem = "changed its input " + InputName(call, i) + " (inputs must be unchanged after the call)";
        c.where = label;
        return false;
      }
    }
    c.rule = rule;
  }
  if (gate_case.forward_only) return true;
  bool any_gradient = false;
  for (const Tensor& g : exact.grads) any_gradient = any_gradient || (g.defined() && g.ne(0).any().item<bool>());
  if (!run.output_requires_grad) {  // right only where every gradient is zero (e.g. no point in the grid)
    if (any_gradient) {
      c.problem = "has no gradient: its output does not require grad (is the backward missing?)";
      c.where = label;
      return false;
    }
    return true;
  }
  if (!run.backward_error.empty()) {
    c.problem = "backward threw: " + run.backward_error;
    c.where = label;
    return false;
  }
  for (size_t i = 0; i < exact.grads.size(); ++i) {
    if (!exact.grads[i].defined()) continue;
    Tensor mine = i < run.grads.size() ? run.grads[i] : Tensor();
    if (!mine.defined() && !exact.grads[i].ne(0).any().item<bool>()) continue;  // undefined = zero
    if (!mine.defined()) {
      c.problem = "gives no gradient for " + InputName(call, i) + " (the reference does)";
      c.where = label;
      return false;
    }
    const double usual = i + 1 < natural.size() ? natural[i + 1] : 0;
    const double tol = low.grads[i].defined() ? tolerance(low.grads[i], exact.grads[i], usual) : floor;
    if (!Compare(mine, exact.grads[i], tol, usual, label + ", gradient of " + InputName(call, i), c)) return false;
  }
  return true;
}

}  // namespace

bool StorageOverlaps(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || !a.has_storage() || !b.has_storage()) return false;
  const auto* a0 = static_cast<const char*>(a.storage().data());
  const auto* b0 = static_cast<const char*>(b.storage().data());
  if (a0 == nullptr || b0 == nullptr) return false;
  return a0 < b0 + b.storage().nbytes() && b0 < a0 + a.storage().nbytes();
}

std::string RuleName(GateRule rule) {
  switch (rule) {
    case GateRule::kNumbers: return "numbers";
    case GateRule::kStructured: return "structured inputs";
    case GateRule::kEdgeCases: return "edge cases";
    case GateRule::kOtherShapes: return "other shapes";
    case GateRule::kRepeatedCall: return "repeated call";
    case GateRule::kUnchangedInputs: return "unchanged inputs";
    case GateRule::kNoAliasing: return "no aliasing";
    case GateRule::kWithoutAutograd: return "without autograd";
  }
  return "?";
}

Tolerance ToleranceFor(c10::ScalarType dtype) {
  switch (dtype) {
    case torch::kBFloat16: return {2e-2};
    case torch::kHalf: return {5e-3};
    default: return {1e-4};
  }
}

Tensor UpstreamGradient(c10::IntArrayRef sizes, uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  return torch::randn(sizes, generator, torch::kDouble);
}

std::vector<OpCall> GateCalls(const OpCall& call, const GateOptions& options, size_t* edges) {
  std::vector<OpCall> calls{call};
  if (options.Applies(GateRule::kEdgeCases) && call.edge_cases) {
    for (OpCall& edge : call.edge_cases()) calls.push_back(std::move(edge));
  }
  if (edges != nullptr) *edges = calls.size() - 1;
  if (options.Applies(GateRule::kOtherShapes) && call.other_shapes) {
    for (OpCall& shape : call.other_shapes()) calls.push_back(std::move(shape));
  }
  return calls;
}

std::vector<GateCase> GateCases(const std::vector<OpCall>& calls, size_t edges, const GateOptions& options) {
  const OpCall& call = calls.at(0);
  const Op& op = OpRegistry().At(call.op);
  at::Generator generator = at::detail::createCPUGenerator(options.seed);
  std::vector<GateCase> cases;
  const auto add = [&](size_t index, GateRule rule, std::string label, std::vector<Tensor> inputs) {
    GateCase c;
    c.call = index;
    c.rule = rule;
    c.label = std::move(label);
    c.inputs = std::move(inputs);
    c.upstream_seed = options.seed * 1000003 + cases.size() + 1;
    cases.push_back(std::move(c));
  };
  for (int d = 0; d < options.draws; ++d) {
    add(0, GateRule::kNumbers, "draw " + std::to_string(d + 1), RandomInputs(op, call, generator));
  }
  if (options.Applies(GateRule::kStructured)) {
    for (StructuredInputs& set : StructuredSets(op, call, generator)) {
      add(0, GateRule::kStructured, "structured: " + set.name, std::move(set.inputs));
      cases.back().forward_only = set.forward_only;
    }
  }
  for (size_t i = 1; i < calls.size(); ++i) {
    const bool edge = i <= edges;
    add(i, edge ? GateRule::kEdgeCases : GateRule::kOtherShapes, (edge ? "edge case " : "shape ") + calls[i].edge,
        RandomInputs(op, calls[i], generator));
  }
  if (options.Applies(GateRule::kRepeatedCall) && options.draws > 0) {
    GateCase again = cases.front();
    again.rule = GateRule::kRepeatedCall;
    again.label = "draw 1 repeated after the others";
    again.repeats = 0;
    cases.push_back(std::move(again));
  }
  if (options.Applies(GateRule::kWithoutAutograd)) {  // fresh draws: no other rule's inputs again
    for (const GateCase::Mode mode : {GateCase::Mode::kNoGrad, GateCase::Mode::kInference}) {
      const bool no_grad = mode == GateCase::Mode::kNoGrad;
      add(0, GateRule::kWithoutAutograd, no_grad ? "a draw without autograd" : "a draw in inference mode",
          RandomInputs(op, call, generator));
      cases.back().forward_only = true;
      cases.back().mode = mode;
    }
  }
  return cases;
}

std::vector<CaseRun> RunCasesHere(const std::string& variant, const std::vector<OpCall>& calls,
                                  const std::vector<GateCase>& cases) {
  torch::AutoGradMode grad_mode(true);
  std::vector<CaseRun> runs;
  for (const GateCase& gate_case : cases) {
    const OpCall& call = calls.at(gate_case.call);
    CaseRun run;
    std::vector<Tensor> leaves, floating;
    for (const Tensor& t : gate_case.inputs) {
      leaves.push_back(Leaf(t));
      if (leaves.back().requires_grad()) floating.push_back(leaves.back());
    }
    Tensor out;
    // The modes a model's evaluation (no_grad) and its deployed form (InferenceMode) call it in, from the
    // call through the poisoning of its output (an inference tensor is changed in place only in that mode).
    std::optional<torch::NoGradGuard> no_grad;
    std::optional<c10::InferenceMode> inference;
    if (gate_case.mode == GateCase::Mode::kNoGrad) no_grad.emplace();
    if (gate_case.mode == GateCase::Mode::kInference) inference.emplace();
    try {
      out = call.run(variant, leaves);
    } catch (const c10::Error& e) {
      run.error = std::string("threw: ") + e.what_without_backtrace();
    } catch (const std::exception& e) {
      run.error = std::string("threw: ") + e.what();
    }
    if (run.error.empty() && !out.defined()) run.error = "returned no tensor";
    run.grads.resize(leaves.size());
    if (run.error.empty()) {
      for (const Tensor& leaf : leaves) run.aliases_input = run.aliases_input || StorageOverlaps(out, leaf);
      run.output = out.detach().clone();
      run.output_requires_grad = out.requires_grad();
      if (out.requires_grad() && !floating.empty()) {
        try {
          const std::vector<Tensor> g =
              torch::autograd::grad({out}, floating, {UpstreamOf(gate_case, out)}, false, false, true);
          for (size_t i = 0, f = 0; i < leaves.size(); ++i) {
            if (!leaves[i].requires_grad()) continue;
            const Tensor& grad = g[f++];
            if (!grad.defined()) continue;
            run.grads[i] = grad.detach().clone();
            if (grad.is_floating_point()) grad.detach().fill_(std::numeric_limits<double>::quiet_NaN());
          }
        } catch (const c10::Error& e) {
          run.backward_error = e.what_without_backtrace();
        } catch (const std::exception& e) {
          run.backward_error = e.what();
        }
      }
    }
    for (const Tensor& leaf : leaves) run.inputs_after.push_back(leaf.detach().clone());
    // A variant that hands back a buffer it kept now returns NaN next time
    // (an output that is an input's storage is left alone: the aliasing rule
    // refuses it).
    if (run.error.empty() && out.is_floating_point() && !run.aliases_input) {
      out.detach().fill_(std::numeric_limits<double>::quiet_NaN());
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

nlohmann::json VariantCheck::ToJson() const {
  nlohmann::json j = {{"op", op},
                      {"variant", variant},
                      {"reference", reference},
                      {"shapes", shapes},
                      {"passed", passed},
                      {"checks", checks},
                      {"worst_abs_error", worst_abs},
                      {"worst_rel_error", worst_rel},
                      {"tolerance", tolerance},
                      {"deterministic", deterministic},
                      {"rules", rules}};
  if (!passed) {
    j["rule"] = rule;
    j["problem"] = problem;
    j["where"] = where;
  }
  // JSON has no infinity: a NaN/inf output is told by the problem.
  if (!std::isfinite(worst_abs)) j["worst_abs_error"] = nullptr;
  if (!std::isfinite(worst_rel)) j["worst_rel_error"] = nullptr;
  return j;
}

VariantCheck CheckVariant(const OpCall& call, const GateOptions& options, const CaseRunner& runner) {
  torch::AutoGradMode grad_mode(true);  // gradients are compared, whatever the caller's mode
  size_t edges = 0;
  const std::vector<OpCall> calls = GateCalls(call, options, &edges);
  const std::vector<GateCase> cases = GateCases(calls, edges, options);
  return CompareRuns(call, calls, cases, runner(call.variant, calls, cases), options);
}

VariantCheck CompareRuns(const OpCall& call, const std::vector<OpCall>& calls, const std::vector<GateCase>& cases,
                         const std::vector<CaseRun>& runs, const GateOptions& options) {
  const Op& op = OpRegistry().At(call.op);
  VariantCheck c;
  c.op = call.op;
  c.variant = call.variant;
  c.reference = op.reference;
  c.shapes = call.Shapes();
  for (GateRule rule : {GateRule::kNumbers, GateRule::kStructured, GateRule::kEdgeCases, GateRule::kOtherShapes,
                        GateRule::kRepeatedCall, GateRule::kUnchangedInputs, GateRule::kNoAliasing,
                        GateRule::kWithoutAutograd}) {
    if (options.Applies(rule)) c.rules.push_back(RuleName(rule));
  }
  const c10::ScalarType dtype = CallDtype(call);
  torch::AutoGradMode grad_mode(true);
  if (runs.size() != cases.size()) {
    c.passed = false;
    c.rule = RuleName(GateRule::kNumbers);
    c.problem = "ran " + std::to_string(runs.size()) + " of the gate's " + std::to_string(cases.size()) + " cases";
    return c;
  }
  std::vector<double> natural;
  for (size_t i = 0; i < cases.size() && c.passed; ++i) {
    ++c.checks;
    c.passed = CompareCase(calls.at(cases[i].call), op, cases[i], runs[i], options, dtype, natural, c);
    if (!c.passed) break;
    if (cases[i].repeats >= 0) {
      const Tensor& first = runs[static_cast<size_t>(cases[i].repeats)].output;
      c.deterministic = first.sizes() == runs[i].output.sizes() && torch::equal(first, runs[i].output);
    }
  }
  return c;
}

VariantCheck CheckVariant(const OpCall& call, int draws, uint64_t seed) {
  GateOptions options;
  options.draws = draws;
  options.seed = seed;
  return CheckVariant(call, options);
}

nlohmann::json GateResult::ToJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const VariantCheck& c : checks) list.push_back(c.ToJson());
  return {{"passed", passed()}, {"seconds", seconds}, {"variants", list}};
}

GateResult RunGate(const std::vector<OpCall>& calls, int draws, uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  GateResult gate;
  for (size_t i = 0; i < calls.size() && gate.passed(); ++i) {
    if (calls[i].variant == OpRegistry().At(calls[i].op).reference) continue;
    gate.checks.push_back(CheckVariant(calls[i], draws, seed + i));
  }
  gate.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return gate;
}

}  // namespace frontier::ops
