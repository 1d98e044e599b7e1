// The training phase of a trial (docs/worker.md, Measurement): task.steps
// optimizer steps over the spec's batches, each timed between
// device-synchronized points apart from its data wait; the warm-up, profiled
// and spot-checked steps kept out of the step statistics; evaluations at the
// eval points; on several ranks, the gradients all-reduced by
// distributed::DataParallel and each step's time the slowest rank's.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/data/dataset.h"
#include "worker/trial/distributed/trial_ranks.h"
#include "worker/trial/evaluation.h"
#include "worker/trial/measure/phases.h"
#include "worker/trial/measure/profiler.h"
#include "worker/trial/measure/step_stats.h"
#include "worker/trial/ops/spot_check.h"
#include "worker/trial/optimizer.h"
#include "worker/trial/prepared_model.h"
#include "worker/trial/trainer.h"

namespace frontier {

// Learning rate at `step` (0-based): linear warm-up over schedule.warmup steps,
// then constant or cosine decay to min_lr at the last step.
double LearningRateAt(const TaskSpec& task, int step);

class Training {
 public:
  Training(const TrialSpec& spec, const TrialOptions& options, PreparedModel& m, distributed::TrialRanks& ranks,
           PhaseTimes& phases, nlohmann::json& result);
  ~Training();

  // The training steps, with `evaluations` at the eval points. Stops at a
  // non-finite loss (status "diverged", result["error"] says where). With
  // `spot_checks`, runtime.spot_checks of the measured steps compare the
  // model's non-reference op calls with the reference (result["spot_checks"]).
  // Writes the peak memory (peak_memory_mb, peak_memory_kind, process_peak_rss_mb).
  void Run(Evaluations& evaluations, bool spot_checks);

  // status, steps_run, warmup_steps, step_time_ms, ranks, data_wait_ms,
  // data_wait_fraction, throughput, achieved_flops_per_s, mfu, train_time_s,
  // final_train_loss and loss_scale (fp16, when it moved) into the result. Returns the measured steps'
  // statistics (seconds; the slowest rank's), which RanksInto takes.
  SeriesStats StatisticsInto(double train_flops_per_step, double peak_flops_per_s) const;

  // The profile: the default profile's steps after training when the trial
  // completed (a profiling problem is the profile's error, never the
  // trial's), then the profiler's summary as result["profile"].
  void Profile();

  // comms_ms, comms_exposed_ms, comms_exposed_share and, with several ranks,
  // the "distributed" section from every rank's figures (a collective). `steps`: StatisticsInto's.
  void RanksInto(const SeriesStats& steps) const;

  bool completed() const { return status_ == "completed"; }
  int steps_run() const { return steps_run_; }

 private:
  struct StepResult;
  StepResult RunStep(int step);
  void EmitProgress(double lr, double step_s, double wait_s) const;
  void Emit(const nlohmann::json& event) const;
  size_t warmup_skip() const;

  const TrialSpec& spec_;
  const TrialOptions& options_;
  PreparedModel& m_;
  distributed::TrialRanks& ranks_;
  PhaseTimes& phases_;
  nlohmann::json& result_;

  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<distributed::DataParallel> dp_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<BatchSampler> sampler_;
  std::unique_ptr<StepProfiler> profiler_;
  std::unique_ptr<ops::SpotCheck> spot_check_;

  std::vector<double> step_times_, data_waits_;  // seconds, every step outside the profiled ones
  std::vector<double> own_step_times_;           // this rank's step times (step_times_: the slowest rank's)
  std::vector<distributed::CommFigures> comms_;  // per measured step
  std::vector<double> profiled_times_;           // kept out of step_times_: the profiler slows them down
  int steps_run_ = 0;
  double train_time_ = 0;  // summed step time so far, profiled steps left out
  double last_loss_ = 0;
  std::string status_ = "completed";
  std::optional<double> loss_scale_;
};

}  // namespace frontier
