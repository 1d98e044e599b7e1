// Speed-first screening (`screen: {steps, margin, noise}`, docs/strategies.md#screening):
// before the strategy runs, every runnable configuration of the grid and the
// baseline (the yardstick) is timed for a few steps, one seed, and only the
// configurations that can still reach the front go to the strategy. Here:
// what a screening trial is (its spec, its stored result), the drop rule
// (ScreenOut, a pure function) and the strategy restricted to the kept
// configurations (ScreenedStrategy). The scheduler runs the trials
// (server/scheduler/scheduler.cc), the report shows what was dropped and why
// (server/report/). Torch-free and gRPC-free.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "search_spaces/trial_spec.h"
#include "server/search/strategy.h"

namespace frontier {

// The metrics a screening trial measures: speed, memory, size and latency,
// never quality (the trainer's end-of-trial evaluation of a screening trial
// is dropped from its stored result, ScreenedResult).
const std::vector<std::string>& ScreenedMetrics();
bool IsScreenedMetric(const std::string& metric);

// The spec of `config`'s screening trial: its trial spec at seed 1 with
// task.steps = screen.steps, no evaluation during training (eval_every 0),
// the smallest validation split (val_size 1), warmup_steps at most half the
// steps (so that step-time statistics have steps left), no target, no
// profiled steps, and no latency timing unless an objective or constraint
// names a latency metric.
TrialSpec ScreeningSpec(const SearchSpace& space, const Config& config);

// What is stored of a screening trial's result: everything but quality
// (val_*, test_*, evals, final_train_loss, time to target), plus
// "screen": {"steps": N}. A screening trial never shows a quality figure.
nlohmann::json ScreenedResult(const nlohmann::json& result, int steps);

// One configuration's screening trial, as the drop rule reads it.
struct ScreenMeasurement {
  std::string config_key;  // ConfigKey(config); "{}" for the baseline
  bool failed = false;     // it crashed, ran out of memory or lost its lease for good
  std::string error;       // why, when failed
  std::map<std::string, double> values;  // ScreenedMetrics() found in its result (MetricOf)
};

// `state`, `result` and `error` as stored (TrialRow / TrialOutcome): failed
// when the state is failed or cancelled, or the trial ended with an error.
ScreenMeasurement MeasureScreened(const std::string& config_key, const std::string& state,
                                  const nlohmann::json& result, const std::string& error);

struct ScreenVerdict {
  std::string config_key;
  bool kept = true;
  std::string reason;  // why it was dropped; empty when kept
};

// The drop rule (docs/strategies.md#screening), conservative: a configuration
// is dropped only when
//  - its screening trial failed (the reason: the trial's error);
//  - it breaks a constraint on a screened metric by more than the noise:
//    value > max + noise * |max| or value < min - noise * |min|;
//  - or the space has objectives on screened metrics and on every one of
//    them it is worse than the baseline by more than the margin: its
//    goodness (value / baseline when maximized, baseline / value when
//    minimized) is below (1 - margin) * (1 - noise).
// Quality metrics (every metric not in ScreenedMetrics) never drop a
// configuration, whatever the objectives and constraints say of them. A
// configuration without the value a rule needs, or a baseline without it
// (failed or unmeasured), is kept by that rule. One verdict per entry of
// `configs`, in their order; the baseline is the yardstick, never judged.
std::vector<ScreenVerdict> ScreenOut(const std::vector<Objective>& objectives,
                                     const std::vector<Constraint>& constraints, const ScreenSpec& screen,
                                     const ScreenMeasurement& baseline,
                                     const std::vector<ScreenMeasurement>& configs);

// A strategy that proposes only kept configurations. Until Decide it
// proposes nothing (the screening trials are running). A proposal of the
// inner strategy that was dropped is never returned: it is told to the inner
// strategy at once as failed, with the screening reason as its error (so
// adaptive strategies rank it behind everything and go on), and listed in
// Skipped() as "<ConfigKey>: screened out: <reason>". Deterministic given
// the dropped set, so Replay after a restart gives the same proposals.
class ScreenedStrategy final : public Strategy {
 public:
  explicit ScreenedStrategy(std::unique_ptr<Strategy> inner) : inner_(std::move(inner)) {}
  // The screening's verdicts: config key -> reason of every dropped config.
  void Decide(std::map<std::string, std::string> dropped);
  bool decided() const { return decided_; }

  std::vector<Proposal> Ask() override;
  void Tell(const Evaluation& evaluation) override { inner_->Tell(evaluation); }
  bool Finished() const override { return decided_ && inner_->Finished(); }
  const std::vector<std::string>& Skipped() const override;
  bool Asynchronous() const override { return inner_->Asynchronous(); }
  std::string Paused() const override { return inner_->Paused(); }
  void Attach(const std::string& experiment_id) override { inner_->Attach(experiment_id); }
  std::vector<ProposerCallRecord> TakeCalls() override { return inner_->TakeCalls(); }
  bool Restore(const std::optional<Evaluation>& baseline, const std::vector<StoredProposal>& history) override {
    return decided_ && inner_->Restore(baseline, history);
  }

 private:
  std::unique_ptr<Strategy> inner_;
  bool decided_ = false;
  std::map<std::string, std::string> dropped_;
  std::vector<std::string> screened_out_;  // "<key>: screened out: <reason>", as met
  mutable std::vector<std::string> skipped_;
};

}  // namespace frontier
