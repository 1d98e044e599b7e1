#include "worker/trial/ops/correctness.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

#include <ATen/CPUGeneratorImpl.h>

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

// The largest |v - r| / (|r| + mean |r|) (0 for empty tensors, NaN-free).
double WorstRelative(const Tensor& v, const Tensor& r) {
  if (r.numel() == 0 || v.sizes() != r.sizes()) return 0;
  const Tensor vd = v.detach().to(torch::kCPU, torch::kDouble), rd = r.detach().to(torch::kCPU, torch::kDouble);
  const Tensor scale = rd.abs() + rd.abs().mean() + std::numeric_limits<double>::min();
  return ((vd - rd).abs() / scale).nan_to_num(0).max().item<double>();
}

// Compares the variant's `v` with the float64 reference `r` at relative
// tolerance `tolerance`; on a failure fills the check's problem and place and
// returns false.
bool Compare(const Tensor& v, const Tensor& r, double tolerance, const std::string& where, VariantCheck& c) {
  c.tolerance = std::max(c.tolerance, tolerance);
  if (v.sizes() != r.sizes()) {
    c.problem = "has shape " + Sizes(v) + ", the reference " + Sizes(r);
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
  const Tensor scale = rd.abs() + rd.abs().mean() + std::numeric_limits<double>::min();
  const Tensor rel = diff / scale;
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

// One comparison of the variant with the reference on `inputs`. `previous`:
// the variant's output of the last draw, for the change check (undefined for
// the first draw and for edge cases).
bool CheckOnce(const OpCall& call, const Op& op, const std::vector<Tensor>& inputs, c10::ScalarType dtype,
               const std::string& label, Tensor* previous, at::Generator& generator, VariantCheck& c) {
  std::vector<Tensor> vin, rin, lin;  // the variant's, the float64 reference's, the reference's in the call's dtype
  for (const Tensor& t : inputs) {
    vin.push_back(Leaf(t));
    rin.push_back(Leaf(t, t.is_floating_point() ? c10::optional<c10::ScalarType>(torch::kDouble) : c10::nullopt));
    lin.push_back(Leaf(t));
  }
  // A variant may be as inexact as the reference itself in the call's dtype,
  // twice over, and never needs to beat the dtype's floor.
  const double floor = ToleranceFor(dtype).rtol;
  const auto tolerance = [floor](const Tensor& reference_in_dtype, const Tensor& exact) {
    return std::max(floor, 2 * WorstRelative(reference_in_dtype, exact));
  };
  Tensor out;
  try {
    out = call.run(call.variant, vin);
  } catch (const std::exception& e) {
    c.problem = std::string("threw: ") + e.what();
    c.where = label;
    return false;
  }
  const Tensor ref = call.run(op.reference, rin);  // the reference's own errors are Frontier's: they propagate
  const Tensor low = call.run(op.reference, lin);
  if (!Compare(out, ref, tolerance(low, ref), label + ", forward", c)) return false;
  if (previous != nullptr) {
    if (previous->defined() && out.numel() > 0 && torch::equal(out.detach(), *previous)) {
      c.problem = "returned the same output for new inputs (a kept buffer or a constant result)";
      c.where = label + ", forward";
      return false;
    }
    *previous = out.detach().clone();
  }
  // Gradients of every floating input, from one random output gradient.
  std::vector<Tensor> vdiff, rdiff, ldiff;
  std::vector<std::string> names;
  for (size_t i = 0; i < vin.size(); ++i) {
    if (!vin[i].requires_grad()) continue;
    vdiff.push_back(vin[i]);
    rdiff.push_back(rin[i]);
    ldiff.push_back(lin[i]);
    names.push_back(i < call.input_names.size() ? call.input_names[i] : "input " + std::to_string(i));
  }
  if (!vdiff.empty() && ref.requires_grad()) {
    const Tensor upstream = torch::randn(ref.sizes(), generator, torch::kDouble).to(ref.device());
    const std::vector<Tensor> rg = torch::autograd::grad({ref}, rdiff, {upstream}, false, false, true);
    std::vector<Tensor> lg(rg.size());
    if (low.requires_grad()) lg = torch::autograd::grad({low}, ldiff, {upstream.to(low.options())}, false, false, true);
    if (!out.requires_grad()) {  // right only where every gradient is zero (e.g. no point in the grid)
      for (const Tensor& g : rg) {
        if (g.defined() && g.ne(0).any().item<bool>()) {
          c.problem = "has no gradient: its output does not require grad (is the backward missing?)";
          c.where = label;
          return false;
        }
      }
      out.detach().fill_(std::numeric_limits<double>::quiet_NaN());
      return true;
    }
    std::vector<Tensor> vg;
    try {
      vg = torch::autograd::grad({out}, vdiff, {upstream.to(out.options())}, false, false, true);
    } catch (const std::exception& e) {
      c.problem = std::string("backward threw: ") + e.what();
      c.where = label;
      return false;
    }
    for (size_t i = 0; i < vg.size(); ++i) {
      if (!rg[i].defined()) continue;
      if (!vg[i].defined()) {
        c.problem = "gives no gradient for " + names[i] + " (the reference does)";
        c.where = label;
        return false;
      }
      const double tol = lg[i].defined() ? tolerance(lg[i], rg[i]) : floor;
      if (!Compare(vg[i], rg[i], tol, label + ", gradient of " + names[i], c)) return false;
      vg[i].detach().fill_(std::numeric_limits<double>::quiet_NaN());
    }
  }
  // A variant that hands back a buffer it kept now returns NaN next time.
  out.detach().fill_(std::numeric_limits<double>::quiet_NaN());
  return true;
}

}  // namespace

Tolerance ToleranceFor(c10::ScalarType dtype) {
  switch (dtype) {
    case torch::kBFloat16: return {2e-2};
    case torch::kHalf: return {5e-3};
    default: return {1e-4};
  }
}

nlohmann::json VariantCheck::ToJson() const {
  nlohmann::json j = {{"op", op},       {"variant", variant},           {"reference", reference},
                      {"shapes", shapes}, {"passed", passed},           {"checks", checks},
                      {"worst_abs_error", worst_abs}, {"worst_rel_error", worst_rel}, {"tolerance", tolerance}};
  if (!passed) {
    j["problem"] = problem;
    j["where"] = where;
  }
  // JSON has no infinity: a NaN/inf output is told by the problem.
  if (!std::isfinite(worst_abs)) j["worst_abs_error"] = nullptr;
  if (!std::isfinite(worst_rel)) j["worst_rel_error"] = nullptr;
  return j;
}

VariantCheck CheckVariant(const OpCall& call, int draws, uint64_t seed) {
  const Op& op = OpRegistry().At(call.op);
  VariantCheck c;
  c.op = call.op;
  c.variant = call.variant;
  c.reference = op.reference;
  c.shapes = call.Shapes();
  c10::ScalarType dtype = torch::kFloat;
  for (const Tensor& t : call.inputs) {
    if (t.is_floating_point()) {
      dtype = t.scalar_type();
      break;
    }
  }
  at::Generator generator = at::detail::createCPUGenerator(seed);
  torch::AutoGradMode grad_mode(true);  // gradients are compared, whatever the caller's mode
  Tensor previous;
  for (int d = 0; d < draws && c.passed; ++d) {
    ++c.checks;
    c.passed = CheckOnce(call, op, RandomInputs(op, call, generator), dtype, "draw " + std::to_string(d + 1),
                         &previous, generator, c);
  }
  if (c.passed && call.edge_cases) {
    for (const OpCall& edge : call.edge_cases()) {
      ++c.checks;
      c.passed = CheckOnce(edge, op, RandomInputs(op, edge, generator), dtype, "edge case " + edge.edge, nullptr,
                           generator, c);
      if (!c.passed) break;
    }
  }
  return c;
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
