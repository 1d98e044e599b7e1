#include "server/scheduler.h"

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/strategy.h"

namespace frontier {

Scheduler::Scheduler(Store& store, Clock& clock, SchedulerOptions options)
    : store_(store), clock_(clock), options_(options) {
  store_.ExtendAllLeases(clock_.NowMs() + options_.restart_grace_ms);
}

void Scheduler::Changed() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++changes_;
  }
  changed_.notify_all();
}

uint64_t Scheduler::change_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return changes_;
}

uint64_t Scheduler::WaitForChange(uint64_t seen, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return changes_ != seen; });
  return changes_;
}

ExperimentRecord Scheduler::Submit(const std::string& space_yaml, const std::string& source_name) {
  const SearchSpace space = ParseSearchSpace(space_yaml, source_name);
  std::vector<Config> candidates;
  ExperimentRecord experiment;
  experiment.name = space.name;
  experiment.space_yaml = space_yaml;
  experiment.source_name = source_name;
  for (Config& config : EnumerateGrid(space)) {
    if (IsBaseline(space, config)) continue;  // the baseline runs once, below
    if (auto why = WhyInvalid(space, config)) {
      experiment.skipped.push_back(ConfigKey(config) + ": " + *why);
      continue;
    }
    candidates.push_back(std::move(config));
  }
  auto strategy = MakeStrategy(space, candidates, {});
  std::vector<TrialRow> trials;
  auto add = [&](const Config& config, int steps) {
    for (int seed = 1; seed <= space.repeats; ++seed) {
      TrialSpec spec = MakeTrialSpec(space, config, seed, "");
      spec.task.steps = steps;
      TrialRow row;
      row.config_json = config.dump();
      row.is_baseline = IsBaseline(space, config);
      row.seed = seed;
      row.steps = steps;
      row.max_attempts = space.max_attempts;
      row.spec_json = ToJson(spec).dump();
      trials.push_back(std::move(row));
    }
  };
  add(Config::object(), MakeTrialSpec(space, Config::object(), 1, "").task.steps);
  for (const Proposal& p : strategy->Ask(SIZE_MAX)) add(p.config, p.steps);
  const std::string id = store_.CreateExperiment(experiment, std::move(trials), clock_.NowMs());
  Changed();
  return *store_.GetExperiment(id);
}

bool Scheduler::Cancel(const std::string& experiment_id) {
  auto experiment = store_.GetExperiment(experiment_id);
  if (!experiment) return false;
  if (experiment->state == experiment_state::kRunning) {
    store_.SetExperimentState(experiment_id, experiment_state::kCancelled);
    store_.CancelPendingTrials(experiment_id, clock_.NowMs());
    Changed();
  }
  return true;
}

std::string Scheduler::RegisterWorker(WorkerRecord worker) {
  std::string id = store_.RegisterWorker(std::move(worker), clock_.NowMs());
  Changed();
  return id;
}

std::optional<TrialRow> Scheduler::Lease(const std::string& worker_id) {
  auto trial = store_.LeaseNextTrial(worker_id, clock_.NowMs(), options_.lease_timeout_ms);
  if (trial) Changed();
  return trial;
}

bool Scheduler::ExperimentCancelled(const std::string& trial_id) {
  auto trial = store_.GetTrial(trial_id);
  if (!trial) return false;
  auto experiment = store_.GetExperiment(trial->experiment_id);
  return experiment && experiment->state == experiment_state::kCancelled;
}

HeartbeatReply Scheduler::Heartbeat(const std::string& worker_id, const std::string& trial_id, int attempt) {
  const int64_t now = clock_.NowMs();
  store_.TouchWorker(worker_id, now);
  HeartbeatReply reply;
  if (trial_id.empty()) return reply;
  reply.lease_valid = store_.ExtendLease(trial_id, attempt, worker_id, now + options_.lease_timeout_ms);
  reply.stop = !reply.lease_valid || ExperimentCancelled(trial_id);
  return reply;
}

ProgressReply Scheduler::Progress(const std::string& worker_id, const std::string& trial_id, int attempt,
                                  const std::string& event_json) {
  const int64_t now = clock_.NowMs();
  ProgressReply reply;
  auto trial = store_.GetTrial(trial_id);
  if (!trial || trial->state != trial_state::kRunning || trial->attempt != attempt || trial->worker_id != worker_id) {
    reply.stop = true;
    reply.reason = "this attempt no longer holds the trial's lease";
    return reply;
  }
  int step = 0;
  try {
    step = nlohmann::json::parse(event_json).value("step", 0);
  } catch (const nlohmann::json::exception&) {
    reply.stop = false;  // a malformed event is dropped; the trial goes on
    return reply;
  }
  store_.AddProgress({trial_id, attempt, step, event_json, now});
  // A progress event is proof of life too.
  store_.ExtendLease(trial_id, attempt, worker_id, now + options_.lease_timeout_ms);
  if (ExperimentCancelled(trial_id)) {
    reply.stop = true;
    reply.reason = "experiment cancelled";
  }
  return reply;
}

Transition Scheduler::Complete(const std::string& worker_id, const std::string& trial_id, int attempt,
                               const std::string& result_json) {
  std::string state = trial_state::kCompleted;
  try {
    if (nlohmann::json::parse(result_json).value("status", "") == "diverged") state = trial_state::kDiverged;
  } catch (const nlohmann::json::exception& e) {
    return Fail(worker_id, trial_id, attempt, std::string("unreadable result: ") + e.what(), true, "");
  }
  const Transition t = store_.FinishTrial(trial_id, attempt, state, result_json, "", clock_.NowMs());
  if (t == Transition::kApplied) {
    CompleteFinishedExperiments();
    Changed();
  }
  return t;
}

Transition Scheduler::Fail(const std::string& worker_id, const std::string& trial_id, int attempt,
                           const std::string& error, bool retryable, const std::string& result_json) {
  // A trial the coordinator asked to stop ends as stopped (or cancelled with
  // its experiment), not as a failure.
  const bool stopped = !retryable && error.rfind("stopped:", 0) == 0;
  const Transition t =
      stopped ? store_.FinishTrial(trial_id, attempt,
                                   ExperimentCancelled(trial_id) ? trial_state::kCancelled : trial_state::kStopped,
                                   result_json, error, clock_.NowMs())
              : store_.FailAttempt(trial_id, attempt, error, retryable, result_json, clock_.NowMs());
  if (t == Transition::kApplied) {
    CompleteFinishedExperiments();
    Changed();
  }
  return t;
}

void Scheduler::CompleteFinishedExperiments() {
  for (const std::string& id : store_.ExperimentsReadyToComplete()) {
    store_.SetExperimentState(id, experiment_state::kCompleted);
  }
}

void Scheduler::Tick() {
  const auto expired = store_.ExpireLeases(clock_.NowMs());
  CompleteFinishedExperiments();
  if (!expired.empty()) Changed();
}

}  // namespace frontier
