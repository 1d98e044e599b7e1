// The correctness gate (docs/plugins.md#the-correctness-gate): before a trial
// times anything, every non-reference op variant it uses is checked against
// the op's reference at the shapes the model gives it. The kernel lab
// (docs/kernel-lab.md) runs the same gate on candidates from outside, with the
// variant's calls made in a sandboxed process (a CaseRunner of its own).
//
// Per recorded call the gate builds its cases, each one rule's inputs:
//  fresh draws       `draws` sets from the op's input generator;
//  structured inputs constants, small integers, one-hot rows, large and tiny
//                    magnitudes (the op may declare its own: Op::structured_inputs);
//  edge cases        the ones the op declares at the call's shapes;
//  other shapes      the call at sizes beyond the recorded one (odd sizes,
//                    size 1), where the op declares them;
//  repeated call     the first draw once more, last: a variant that hands
//                    back a result it kept from an earlier call returns the
//                    poisoned copy (below);
//  without autograd  a fresh draw's forward under NoGradGuard, and another's
//                    in InferenceMode, as a model's evaluation and its
//                    deployed form call it: a variant that is right only
//                    while gradients are recorded is wrong where they are not.
// The variant's calls (forward, then the gradient of every floating input
// from one random output gradient) are made by a CaseRunner: in this process
// (RunCasesHere) or elsewhere. Every case's results are then compared with
// the reference run in float64 on the same inputs. The error of an element is
// |variant - exact| / (|exact| + mean |exact|); a tensor passes when its
// worst error is at most its tolerance: twice the worst error of the
// reference itself run in the call's dtype (eight times on the structured,
// edge-case and other-shape cases, which are often ill-conditioned), and at
// least the dtype's floor: 1e-4 (fp32, fp64), 5e-3 (fp16), 2e-2 (bf16). Beyond the numbers: the
// inputs must be unchanged after the call (bit for bit), the output must not
// share storage with an input, and the variant's outputs are overwritten with
// NaN after each case (a variant that hands back a buffer it kept returns NaN
// the next time). A gradient the variant leaves undefined counts as zero. Whether the repeated call gave the first draw's output bit
// for bit is stated (`deterministic`), not required.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/trial/ops/op.h"

namespace frontier::ops {

struct Tolerance {
  double rtol = 0;
};
Tolerance ToleranceFor(c10::ScalarType dtype);

// The gate's rules, each of which a test breaks alone (tests/worker/ops_test.cc).
enum class GateRule {
  kNumbers,          // forward and gradients within tolerance of the float64 reference
  kStructured,       // the structured input sets are run at all
  kEdgeCases,        // the op's edge cases are run at all
  kOtherShapes,      // the op's other shapes are run at all
  kRepeatedCall,     // the first draw is run again, last
  kUnchangedInputs,  // the inputs are unchanged after the call
  kNoAliasing,       // the output shares no storage with an input
  kWithoutAutograd,  // the forward under NoGradGuard and in InferenceMode
};
std::string RuleName(GateRule rule);  // "structured inputs", "unchanged inputs", ...

struct GateOptions {
  int draws = 3;
  uint64_t seed = 0;
  // Every rule applies unless left out here (for the tests that show which
  // rule catches a variant; nothing else leaves rules out).
  std::set<GateRule> left_out;
  bool Applies(GateRule rule) const { return left_out.count(rule) == 0; }
};

// One input set of the gate. `call` indexes GateCalls(recorded call).
struct GateCase {
  size_t call = 0;
  GateRule rule = GateRule::kNumbers;  // the rule that made the case
  std::string label;                   // "draw 2", "structured: one-hot rows", "edge case sequence length 1"
  std::vector<torch::Tensor> inputs;   // in the call's dtypes
  uint64_t upstream_seed = 0;          // the output gradient: standard normal (float64) of the output's shape
  torch::Tensor upstream;              // when defined, the output gradient itself (a spot check's, spot_check.h)
  int repeats = -1;                    // the repeated call: the index of the case it repeats
  bool forward_only = false;           // only the output is compared (StructuredInputs::forward_only)
  enum class Mode { kAutograd, kNoGrad, kInference };
  Mode mode = Mode::kAutograd;  // how the variant is called (kWithoutAutograd's cases: forward only)
};

// The recorded call, then its edge cases (`*edges` of them) and other shapes
// (where the options apply them): what GateCase::call indexes. The same list
// in every process that builds it from the same recorded call.
std::vector<OpCall> GateCalls(const OpCall& call, const GateOptions& options, size_t* edges = nullptr);

// The cases of the gate at `calls` (GateCalls of one recorded call, whose
// first `edges` after the call itself are edge cases). The same cases, inputs
// included, for the same calls and options in every process.
std::vector<GateCase> GateCases(const std::vector<OpCall>& calls, size_t edges, const GateOptions& options);

// The output gradient of a case: standard normal float64 of `sizes` from `seed`.
torch::Tensor UpstreamGradient(c10::IntArrayRef sizes, uint64_t seed);

// What one call of the variant gave on a case.
struct CaseRun {
  std::string error;                  // non-empty: the forward threw (or the process running it failed)
  std::string backward_error;         // non-empty: the backward threw
  torch::Tensor output;               // the forward's output (a copy)
  bool output_requires_grad = false;
  std::vector<torch::Tensor> grads;   // per input; undefined where the variant gave none
  std::vector<torch::Tensor> inputs_after;  // the inputs after forward and backward
  bool aliases_input = false;         // the output's storage overlaps an input's
};

// Whether two tensors' storages overlap (the aliasing rule: an output must not share an input's).
bool StorageOverlaps(const torch::Tensor& a, const torch::Tensor& b);

// Runs `variant` on each case in order; returns one CaseRun per case.
using CaseRunner = std::function<std::vector<CaseRun>(const std::string& variant, const std::vector<OpCall>& calls,
                                                      const std::vector<GateCase>& cases)>;

// The CaseRunner of this process: the calls made here, one after another,
// each output and gradient copied and the variant's own poisoned with NaN.
std::vector<CaseRun> RunCasesHere(const std::string& variant, const std::vector<OpCall>& calls,
                                  const std::vector<GateCase>& cases);

// The outcome of checking one variant at one call.
struct VariantCheck {
  std::string op, variant, reference, shapes;
  bool passed = true;
  int checks = 0;         // cases compared
  std::string rule;       // when failed: the rule it broke (RuleName)
  std::string problem;    // empty when passed: what failed, in a sentence
  std::string where;      // "draw 2, gradient of depth at [...]", "structured: one-hot rows, forward at [...]"
  double worst_abs = 0;   // the largest |variant - reference| seen
  double worst_rel = 0;   // the largest |variant - reference| / (|reference| + mean |reference|)
  double tolerance = 0;   // the tolerance of the failing comparison, else the largest applied
  bool deterministic = false;  // the repeated call gave the first draw's output bit for bit
  std::vector<std::string> rules;  // the rules applied

  nlohmann::json ToJson() const;
};

// Checks `call.variant` of `call.op` at the call's shapes, its calls made by
// `runner`. Never throws for a wrong variant (a variant that throws is a
// failed check naming the error); throws std::invalid_argument for an op
// that is not registered.
VariantCheck CheckVariant(const OpCall& call, const GateOptions& options, const CaseRunner& runner = RunCasesHere);
// The comparison CheckVariant makes once the cases ran: `runs[i]` of
// `call.variant` on `cases[i]` (at `calls`) against the reference.
VariantCheck CompareRuns(const OpCall& call, const std::vector<OpCall>& calls, const std::vector<GateCase>& cases,
                         const std::vector<CaseRun>& runs, const GateOptions& options);
// The same with `draws` draws and every rule.
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
