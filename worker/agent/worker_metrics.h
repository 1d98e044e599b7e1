// The worker agent's Prometheus metrics (docs/metrics.md), fed from what the
// agent already sees of each trial: its lease, the JSON events frontier-trial
// prints (start, progress, eval, result) and how it ended.
//
// Per slot while a trial runs: the trial's number within its experiment, its
// step, throughput, MFU and data-wait fraction (series removed when the trial
// ends). Per experiment: a histogram of sampled step times (after warm-up)
// and of finished trials' MFU, kept for the `kept_experiments` most recent
// experiments. Per slot: the peak device memory of its last trial. Counters
// of trials started and finished by outcome. Thread-safe: every slot reports
// through the same object.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/families.h"

namespace frontier {

class WorkerMetrics {
 public:
  // `slots`, `device` ("cpu"/"cuda") and `device_name` describe the worker (frontier_worker_info).
  WorkerMetrics(int slots, const std::string& device, const std::string& device_name,
                const std::string& version, int kept_experiments = 8);
  ~WorkerMetrics();

  WorkerMetrics(const WorkerMetrics&) = delete;
  WorkerMetrics& operator=(const WorkerMetrics&) = delete;

  // What /metrics serves.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // `slot` starts running `trial_id` ("<experiment>-t<NNNN>") with the
  // leased `spec_json` (its task.batch_size and task.warmup_steps are used;
  // anything unreadable is skipped).
  void TrialStarted(int slot, const std::string& trial_id, const std::string& spec_json);
  // One output line of the trial, parsed (docs/trial-output.md). Unknown
  // trials and events are ignored.
  void TrialEvent(const std::string& trial_id, const nlohmann::json& event);
  // The trial ended: `outcome` is completed, diverged, failed, stopped,
  // lease_lost or interrupted. Its per-slot series are removed.
  void TrialEnded(const std::string& trial_id, const std::string& outcome);

 private:
  struct Running;  // one running trial
  struct ExperimentSeries;

  ExperimentSeries& SeriesFor(const std::string& experiment_id);  // holds mutex_
  void RemoveSlotSeries(Running& trial);                          // holds mutex_

  const int kept_experiments_;
  const std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Gauge>& current_trial_;
  prometheus::Family<prometheus::Gauge>& step_;
  prometheus::Family<prometheus::Gauge>& throughput_;
  prometheus::Family<prometheus::Gauge>& mfu_;
  prometheus::Family<prometheus::Gauge>& data_wait_;
  prometheus::Family<prometheus::Gauge>& memory_;
  prometheus::Family<prometheus::Histogram>& step_time_;
  prometheus::Family<prometheus::Histogram>& finished_mfu_;
  prometheus::Gauge& busy_slots_;
  prometheus::Counter& started_;
  prometheus::Family<prometheus::Counter>& finished_;

  std::mutex mutex_;                                         // guards what follows
  std::map<std::string, std::unique_ptr<Running>> running_;  // by trial id
  std::map<std::string, std::unique_ptr<ExperimentSeries>> experiments_;
  std::deque<std::string> experiment_order_;  // least recently started first
};

}  // namespace frontier
