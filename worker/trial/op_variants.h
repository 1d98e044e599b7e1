// A trial's op variants (docs/plugins.md): the correctness gate on every
// non-reference variant the model calls, before anything is timed; the first
// such call timed against its reference at the model's shapes (the result's
// `op`); and the spot checks, a training step's watched calls compared with
// the reference.
#pragma once

#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/ops/correctness.h"
#include "worker/trial/ops/spot_check.h"
#include "worker/trial/prepared_model.h"

namespace frontier {

// A non-reference op variant the correctness gate or a spot check found wrong.
class IncorrectVariant : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether one of `calls` (a recorded forward pass's) uses a non-reference variant.
bool UsesNonReferenceVariants(const std::vector<ops::OpCall>& calls);

// The gate: every non-reference variant of a forward pass over `batch` in the
// trial's precision, against its reference (result["correctness"]); throws
// IncorrectVariant (result["incorrect"] set) on the first wrong one; then the
// first non-reference call timed against its reference (result["op"], whose
// speed-up and bandwidth share are metrics).
void GateOpVariants(const TrialSpec& spec, PreparedModel& m, const torch::Tensor& batch, nlohmann::json* result);

// result["op"] of a model whose first recorded op `op` runs its reference: speed-up 1 by definition.
nlohmann::json ReferenceOpResult(const std::string& op);

// A spot-checked step's watched calls against the reference, appended to
// result["spot_checks"]; throws IncorrectVariant on a wrong one.
void RecordSpotChecks(ops::SpotCheck& spot_check, int step, nlohmann::json* result);

}  // namespace frontier
