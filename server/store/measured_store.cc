#include "server/store/measured_store.h"

#include <chrono>
#include <exception>

namespace frontier {

MeasuredStore::MeasuredStore(std::unique_ptr<Store> inner, StoreObserver& metrics)
    : inner_(std::move(inner)), metrics_(metrics) {}

template <typename Call>
auto MeasuredStore::Timed(const char* operation, Call&& call) -> decltype(call()) {
  struct Timer {
    StoreObserver& metrics;
    const char* operation;
    const int exceptions = std::uncaught_exceptions();
    const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
    ~Timer() {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      metrics.ObserveStoreOperation(operation, seconds, std::uncaught_exceptions() > exceptions);
    }
  } timer{metrics_, operation};
  return call();
}

std::string MeasuredStore::CreateExperiment(ExperimentRecord experiment, std::vector<TrialRow> trials,
                                            int64_t now_ms) {
  return Timed("create_experiment",
               [&] { return inner_->CreateExperiment(std::move(experiment), std::move(trials), now_ms); });
}

std::vector<std::string> MeasuredStore::AddTrials(const std::string& experiment_id,
                                                  std::vector<TrialRow> trials, int64_t now_ms) {
  return Timed("add_trials", [&] { return inner_->AddTrials(experiment_id, std::move(trials), now_ms); });
}

std::optional<ExperimentRecord> MeasuredStore::GetExperiment(const std::string& id) {
  return Timed("get_experiment", [&] { return inner_->GetExperiment(id); });
}

std::optional<ExperimentRecord> MeasuredStore::FindSubmittedExperiment(const std::string& owner,
                                                                       const std::string& submit_id) {
  return Timed("find_submitted_experiment",
               [&] { return inner_->FindSubmittedExperiment(owner, submit_id); });
}

std::vector<ExperimentRecord> MeasuredStore::ListExperiments(int limit) {
  return Timed("list_experiments", [&] { return inner_->ListExperiments(limit); });
}

void MeasuredStore::SetExperimentPaused(const std::string& id, const std::string& reason) {
  Timed("set_experiment_paused", [&] { inner_->SetExperimentPaused(id, reason); });
}

void MeasuredStore::AddProposerCalls(const std::vector<ProposerCallRow>& calls) {
  Timed("add_proposer_calls", [&] { inner_->AddProposerCalls(calls); });
}

std::vector<ProposerCallRow> MeasuredStore::ListProposerCalls(const std::string& experiment_id) {
  return Timed("list_proposer_calls", [&] { return inner_->ListProposerCalls(experiment_id); });
}

void MeasuredStore::SetExperimentState(const std::string& id, const std::string& state) {
  Timed("set_experiment_state", [&] { inner_->SetExperimentState(id, state); });
}

std::vector<TrialRow> MeasuredStore::ListTrials(const std::string& experiment_id) {
  return Timed("list_trials", [&] { return inner_->ListTrials(experiment_id); });
}

std::vector<TrialRow> MeasuredStore::ListTrialOutcomes(const std::string& experiment_id) {
  return Timed("list_trial_outcomes", [&] { return inner_->ListTrialOutcomes(experiment_id); });
}

std::optional<TrialRow> MeasuredStore::GetTrial(const std::string& trial_id) {
  return Timed("get_trial", [&] { return inner_->GetTrial(trial_id); });
}

TrialCountsRow MeasuredStore::CountTrials(const std::string& experiment_id) {
  return Timed("count_trials", [&] { return inner_->CountTrials(experiment_id); });
}

std::vector<std::string> MeasuredStore::ExperimentsReadyToComplete() {
  return Timed("experiments_ready_to_complete", [&] { return inner_->ExperimentsReadyToComplete(); });
}

std::optional<TrialRow> MeasuredStore::LeaseNextTrial(const std::string& worker_id, int64_t now_ms,
                                                      int64_t lease_ms) {
  std::optional<TrialRow> trial =
      Timed("lease_next_trial", [&] { return inner_->LeaseNextTrial(worker_id, now_ms, lease_ms); });
  if (trial) metrics_.LeaseGranted(trial->attempt);
  return trial;
}

bool MeasuredStore::ExtendLease(const std::string& trial_id, int attempt, const std::string& worker_id,
                                int64_t expires_ms) {
  return Timed("extend_lease", [&] { return inner_->ExtendLease(trial_id, attempt, worker_id, expires_ms); });
}

Transition MeasuredStore::FinishTrial(const std::string& trial_id, int attempt, const std::string& state,
                                      const std::string& result_json, const std::string& error,
                                      int64_t now_ms) {
  const Transition t = Timed("finish_trial", [&] {
    return inner_->FinishTrial(trial_id, attempt, state, result_json, error, now_ms);
  });
  if (t == Transition::kApplied) metrics_.AttemptEnded(state);
  return t;
}

Store::FinishedAndLeased MeasuredStore::FinishTrialAndLease(const std::string& trial_id, int attempt,
                                                            const std::string& state,
                                                            const std::string& result_json,
                                                            const std::string& error, int64_t now_ms,
                                                            const std::string& worker_id, int64_t lease_ms) {
  FinishedAndLeased r = Timed("finish_trial_and_lease", [&] {
    return inner_->FinishTrialAndLease(trial_id, attempt, state, result_json, error, now_ms, worker_id,
                                       lease_ms);
  });
  if (r.finished == Transition::kApplied) metrics_.AttemptEnded(state);
  if (r.next) metrics_.LeaseGranted(r.next->attempt);
  return r;
}

Transition MeasuredStore::FailAttempt(const std::string& trial_id, int attempt, const std::string& error,
                                      bool retryable, const std::string& result_json, int64_t now_ms) {
  const Transition t = Timed("fail_attempt", [&] {
    return inner_->FailAttempt(trial_id, attempt, error, retryable, result_json, now_ms);
  });
  if (t == Transition::kApplied) metrics_.AttemptEnded(trial_state::kFailed);
  return t;
}

std::vector<TrialRow> MeasuredStore::ExpireLeases(int64_t now_ms) {
  std::vector<TrialRow> expired = Timed("expire_leases", [&] { return inner_->ExpireLeases(now_ms); });
  for (size_t i = 0; i < expired.size(); ++i) {
    metrics_.LeaseExpired();
    metrics_.AttemptEnded("lease_expired");
  }
  return expired;
}

void MeasuredStore::ExtendAllLeases(int64_t expires_ms) {
  Timed("extend_all_leases", [&] { inner_->ExtendAllLeases(expires_ms); });
}

void MeasuredStore::CancelPendingTrials(const std::string& experiment_id, int64_t now_ms) {
  Timed("cancel_pending_trials", [&] { inner_->CancelPendingTrials(experiment_id, now_ms); });
}

void MeasuredStore::AddProgress(const ProgressRow& row) {
  Timed("add_progress", [&] { inner_->AddProgress(row); });
}

bool MeasuredStore::RecordProgress(const ProgressRow& row, const std::string& worker_id,
                                   int64_t lease_expires_ms, int64_t renew_before_ms) {
  return Timed("record_progress",
               [&] { return inner_->RecordProgress(row, worker_id, lease_expires_ms, renew_before_ms); });
}

std::vector<ProgressRow> MeasuredStore::ListProgress(const std::string& trial_id) {
  return Timed("list_progress", [&] { return inner_->ListProgress(trial_id); });
}

std::string MeasuredStore::AddProfileRun(const std::string& trial_id, TrialRow run, int64_t now_ms) {
  return Timed("add_profile_run", [&] { return inner_->AddProfileRun(trial_id, std::move(run), now_ms); });
}

std::vector<TrialRow> MeasuredStore::ListProfileRuns(const std::string& trial_id) {
  return Timed("list_profile_runs", [&] { return inner_->ListProfileRuns(trial_id); });
}

std::string MeasuredStore::CreateOpRun(OpRunRecord run) {
  return Timed("create_op_run", [&] { return inner_->CreateOpRun(std::move(run)); });
}

std::optional<OpRunRecord> MeasuredStore::FindOpRun(const std::string& id_or_name) {
  return Timed("find_op_run", [&] { return inner_->FindOpRun(id_or_name); });
}

std::vector<OpRunRecord> MeasuredStore::ListOpRuns(int limit) {
  return Timed("list_op_runs", [&] { return inner_->ListOpRuns(limit); });
}

void MeasuredStore::SetOpRunState(const std::string& id, const std::string& state, int64_t now_ms) {
  Timed("set_op_run_state", [&] { inner_->SetOpRunState(id, state, now_ms); });
}

bool MeasuredStore::RecordOpCandidate(const OpCandidateRow& row) {
  return Timed("record_op_candidate", [&] { return inner_->RecordOpCandidate(row); });
}

std::vector<OpCandidateRow> MeasuredStore::ListOpCandidates(const std::string& run_id) {
  return Timed("list_op_candidates", [&] { return inner_->ListOpCandidates(run_id); });
}

std::string MeasuredStore::RegisterWorker(WorkerRecord worker, int64_t now_ms) {
  return Timed("register_worker", [&] { return inner_->RegisterWorker(std::move(worker), now_ms); });
}

bool MeasuredStore::TouchWorker(const std::string& worker_id, int64_t now_ms) {
  return Timed("touch_worker", [&] { return inner_->TouchWorker(worker_id, now_ms); });
}

std::vector<WorkerRecord> MeasuredStore::ListWorkers() {
  return Timed("list_workers", [&] { return inner_->ListWorkers(); });
}

}  // namespace frontier
