// The embedded Store: one SQLite file (or ":memory:"), WAL mode, a busy
// timeout, one connection serialized by a mutex (SQLite has one writer).
// Schema changes are versioned migrations applied at open.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "server/store/store.h"

struct sqlite3;

namespace frontier {

class SqliteStore final : public Store {
 public:
  // kMigrate: opens (creating if needed) and migrates. kReadOnly: opens the
  // existing file read-only (SQLITE_OPEN_READONLY; never created, migrated or
  // written) and checks its schema is this build's (store.h OpenMode). Throws
  // StoreError.
  explicit SqliteStore(const std::string& path, OpenMode mode = OpenMode::kMigrate);
  ~SqliteStore() override;

  // The schema version after migration.
  int schema_version();

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
  class Transaction;
  std::vector<std::string> InsertTrials(const std::string& experiment_id, std::vector<TrialRow>& trials,
                                        int64_t now_ms);
  void Migrate();
  void CheckSchema(const std::string& path);  // kReadOnly: this build's schema, or StoreError

  std::mutex mu_;
  sqlite3* db_ = nullptr;
};

}  // namespace frontier
