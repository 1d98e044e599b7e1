// A Store decorator that times every store call into
// frontier_coordinator_store_operation_duration_seconds{operation} and
// counts what the calls did: leases granted, retries (leases of a later
// attempt), expired leases and ended attempts by outcome. The coordinator
// wraps whichever Store it opened (SQLite or PostgreSQL) in one; the
// scheduler and the services see no difference.
#pragma once

#include <memory>

#include <string>

#include "server/store/store.h"

namespace frontier {

// What a MeasuredStore reports to; the coordinator's metric families
// (server/rpc/coordinator_metrics.h) implement it. Calls may come from any
// thread.
class StoreObserver {
 public:
  virtual ~StoreObserver() = default;
  // A lease of attempt `attempt` was granted.
  virtual void LeaseGranted(int attempt) = 0;
  // A lease expired before its trial finished.
  virtual void LeaseExpired() = 0;
  // An attempt ended as `outcome` (a trial state, or "lease_expired").
  virtual void AttemptEnded(const std::string& outcome) = 0;
  // One store call of `operation` took `seconds`; `failed` when it threw.
  virtual void ObserveStoreOperation(const char* operation, double seconds, bool failed) = 0;
};

class MeasuredStore final : public Store {
 public:
  // `metrics` must outlive this store.
  MeasuredStore(std::unique_ptr<Store> inner, StoreObserver& metrics);

  std::string CreateExperiment(ExperimentRecord experiment, std::vector<TrialRow> trials,
                               int64_t now_ms) override;
  std::vector<std::string> AddTrials(const std::string& experiment_id, std::vector<TrialRow> trials,
                                     int64_t now_ms) override;
  std::optional<ExperimentRecord> GetExperiment(const std::string& id) override;
  std::optional<ExperimentRecord> FindSubmittedExperiment(const std::string& owner,
                                                          const std::string& submit_id) override;
  std::vector<ExperimentRecord> ListExperiments(int limit) override;
  void SetExperimentState(const std::string& id, const std::string& state) override;
  void SetExperimentPaused(const std::string& id, const std::string& reason) override;
  void AddProposerCalls(const std::vector<ProposerCallRow>& calls) override;
  std::vector<ProposerCallRow> ListProposerCalls(const std::string& experiment_id) override;
  std::vector<TrialRow> ListTrials(const std::string& experiment_id) override;
  std::vector<TrialRow> ListTrialOutcomes(const std::string& experiment_id) override;
  std::optional<TrialRow> GetTrial(const std::string& trial_id) override;
  TrialCountsRow CountTrials(const std::string& experiment_id) override;
  std::vector<std::string> ExperimentsReadyToComplete() override;
  std::optional<TrialRow> LeaseNextTrial(const std::string& worker_id, int64_t now_ms,
                                         int64_t lease_ms) override;
  bool ExtendLease(const std::string& trial_id, int attempt, const std::string& worker_id,
                   int64_t expires_ms) override;
  Transition FinishTrial(const std::string& trial_id, int attempt, const std::string& state,
                         const std::string& result_json, const std::string& error, int64_t now_ms) override;
  FinishedAndLeased FinishTrialAndLease(const std::string& trial_id, int attempt, const std::string& state,
                                        const std::string& result_json, const std::string& error,
                                        int64_t now_ms, const std::string& worker_id,
                                        int64_t lease_ms) override;
  Transition FailAttempt(const std::string& trial_id, int attempt, const std::string& error, bool retryable,
                         const std::string& result_json, int64_t now_ms) override;
  std::vector<TrialRow> ExpireLeases(int64_t now_ms) override;
  void ExtendAllLeases(int64_t expires_ms) override;
  void CancelPendingTrials(const std::string& experiment_id, int64_t now_ms) override;
  void AddProgress(const ProgressRow& row) override;
  bool RecordProgress(const ProgressRow& row, const std::string& worker_id, int64_t lease_expires_ms,
                      int64_t renew_before_ms) override;
  std::vector<ProgressRow> ListProgress(const std::string& trial_id) override;
  std::string AddProfileRun(const std::string& trial_id, TrialRow run, int64_t now_ms) override;
  std::vector<TrialRow> ListProfileRuns(const std::string& trial_id) override;
  std::string CreateOpRun(OpRunRecord run) override;
  std::optional<OpRunRecord> FindOpRun(const std::string& id_or_name) override;
  std::vector<OpRunRecord> ListOpRuns(int limit) override;
  void SetOpRunState(const std::string& id, const std::string& state, int64_t now_ms) override;
  bool RecordOpCandidate(const OpCandidateRow& row) override;
  std::vector<OpCandidateRow> ListOpCandidates(const std::string& run_id) override;
  std::string RegisterWorker(WorkerRecord worker, int64_t now_ms) override;
  bool TouchWorker(const std::string& worker_id, int64_t now_ms) override;
  std::vector<WorkerRecord> ListWorkers() override;

 private:
  // Runs `call`, timing it as `operation` (also when it throws).
  template <typename Call>
  auto Timed(const char* operation, Call&& call) -> decltype(call());

  const std::unique_ptr<Store> inner_;
  StoreObserver& metrics_;
};

}  // namespace frontier
