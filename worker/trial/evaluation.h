// A trial's evaluations (docs/trial-output.md): the validation curve at its
// eval points, the time to the spec's target, and the final evaluation on
// validation and test, whose forward passes at the training batch are timed
// for the latency phase (inference_latency.h).
#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/prepared_model.h"

namespace frontier {

struct EvalResult {
  double loss = 0;
  double quality = 0;  // the task's quality metric
};

// `network` in eval mode over `split` in batches of `batch_size`, in
// runtime.precision (back in training mode afterwards). With `forward_s`,
// each full batch's forward pass (device-synchronized) is timed into it.
EvalResult Evaluate(model::NetworkImpl& network, const PreparedModel& m, const Split& split, int batch_size,
                    const RuntimeSpec& runtime, std::vector<double>* forward_s = nullptr);

// The final evaluation's full-batch forward passes, seconds: the validation
// split's first (`val_passes` of them), then the test split's.
struct FinalPasses {
  std::vector<double> forward_s;
  size_t val_passes = 0;
};

class Evaluations {
 public:
  Evaluations(const TrialSpec& spec, const PreparedModel& m) : spec_(spec), m_(m) {}

  // The validation evaluation after `steps_run` steps and `train_time_s` of
  // training: returns the eval event (docs/trial-output.md) and keeps it in
  // the curve; the first to reach the spec's target sets the time to target.
  nlohmann::json AtStep(int steps_run, double train_time_s);
  // The trained network's final figures into `result`: val_loss, val_<quality>
  // (the last step's evaluation when it ran one), test_loss, test_<quality>.
  void Final(nlohmann::json* result);
  // evals, and with a target: target, time_to_target_s, steps_to_target.
  void CurveInto(nlohmann::json* result) const;

  const FinalPasses& final_passes() const { return final_; }

 private:
  EvalResult On(const Split& split, bool final);

  const TrialSpec& spec_;
  const PreparedModel& m_;
  nlohmann::json curve_ = nlohmann::json::array();
  EvalResult last_;
  bool evaluated_final_ = false;  // the last step's validation evaluation ran (and was timed)
  FinalPasses final_;
  std::optional<double> time_to_target_;
  std::optional<int> steps_to_target_;
};

}  // namespace frontier
