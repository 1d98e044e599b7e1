// The correctness gate (docs/plugins.md#the-correctness-gate): before a trial
// times anything, every non-reference op variant it uses is checked against
// the op's reference at the shapes the model gives it.
//
// Per recorded call: `draws` fresh random input sets plus every edge case the
// op declares. Each check runs the variant in the call's dtype and the
// reference on the same inputs in float64, then compares the forward output
// and the gradient of every input (from one random output gradient). The
// error of an element is |variant - exact| / (|exact| + mean |exact|) (the
// mean term keeps cancellation near zero from counting as a relative error);
// a tensor passes when its worst error is at most its tolerance: twice the
// worst error of the reference itself run in the call's dtype, and at least
// the dtype's floor: 1e-4 (fp32, fp64), 5e-3 (fp16), 2e-2 (bf16). The
// variant's outputs are overwritten with NaN after each check, so a variant
// that hands back a buffer it kept returns NaN the next time; and its outputs
// must change when its inputs do.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/trial/ops/op.h"

namespace frontier::ops {

struct Tolerance {
  double rtol = 0;
};
Tolerance ToleranceFor(c10::ScalarType dtype);

// The outcome of checking one variant at one call.
struct VariantCheck {
  std::string op, variant, reference, shapes;
  bool passed = true;
  int checks = 0;         // input sets compared (draws + edge cases)
  std::string problem;    // empty when passed: what failed, in a sentence
  std::string where;      // "forward" | "gradient of depth", with the draw or edge case and the index
  double worst_abs = 0;   // the largest |variant - reference| seen
  double worst_rel = 0;   // the largest |variant - reference| / (|reference| + mean |reference|)
  double tolerance = 0;   // the tolerance of the failing comparison, else the largest applied

  nlohmann::json ToJson() const;
};

// Checks `call.variant` of `call.op` at the call's shapes. Never throws for
// a wrong variant (a variant that throws is a failed check naming the error);
// throws std::invalid_argument for an op that is not registered.
VariantCheck CheckVariant(const OpCall& call, int draws, uint64_t seed);

// The gate over a forward pass's recorded calls: every call whose variant is
// not its op's reference, in order, stopping at the first failure.
struct GateResult {
  std::vector<VariantCheck> checks;
  double seconds = 0;
  bool passed() const { return checks.empty() || checks.back().passed; }
  const VariantCheck* failure() const { return passed() ? nullptr : &checks.back(); }
  nlohmann::json ToJson() const;
};
GateResult RunGate(const std::vector<OpCall>& calls, int draws, uint64_t seed);

}  // namespace frontier::ops
