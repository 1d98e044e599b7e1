// The cluster Store: PostgreSQL through libpqxx. Same contract and
// conformance suite as SqliteStore. Versioned migrations are applied at open
// (under an advisory lock, so several coordinators can start at once).
// Leasing is one UPDATE over a `FOR UPDATE SKIP LOCKED` subquery, so
// concurrent callers never get the same trial.
//
// Connection loss: a call that meets a broken connection throws StoreError
// (the RPC answers UNAVAILABLE) and drops that connection; the next call
// reconnects. Each call is one transaction, so nothing is half-written.
//
// Durability: every write commits synchronously (on disk when the call
// returns, with the server's synchronous_commit = on) except the proofs of
// life: progress events, lease extensions and worker heartbeats
// (RecordProgress, AddProgress, ExtendLease, TouchWorker) commit with
// synchronous_commit off on a pool of their own. A crash of PostgreSQL may
// lose the last of these (a lease then ends a little earlier, a progress
// line is missing); never a lease handed out, a completion, a failure, an
// experiment or its trials. Any later synchronous commit also makes every
// earlier relaxed one durable (the WAL is flushed in order). Concurrent
// RecordProgress calls share one statement (progress_batching()), and so do
// concurrent FinishTrialAndLease calls, with one synchronous commit
// (completion_batching(); a completion is still acknowledged only after the
// commit that holds it). The trials table is kept at fillfactor 50 (its rows
// are rewritten two or three times). docs/deploy.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/store/store.h"

namespace frontier {

class PostgresStore final : public Store {
 public:
  // `url`: a libpq connection string or URI (postgresql://user@host:port/db);
  // the usual PG* environment variables and ~/.pgpass apply. Opens up to
  // `pool_size` connections for synchronous commits (concurrent commits share
  // one WAL flush, so more connections commit more per second on a durable
  // server) and a quarter as many for the relaxed ones, lazily; connects
  // and migrates now. With OpenMode::kReadOnly every session is read-only
  // (default_transaction_read_only), nothing is migrated, and a schema other
  // than this build's is refused (store.h OpenMode); with OpenMode::kServe
  // every connection is opened now. Throws StoreError.
  explicit PostgresStore(const std::string& url, int pool_size = kDefaultPoolSize,
                         OpenMode mode = OpenMode::kMigrate);
  static constexpr int kDefaultPoolSize = 16;  // as many as WorkerServiceImpl has call threads
  ~PostgresStore() override;

  int schema_version();
  // Calls recorded together so far (RecordProgress, FinishTrialAndLease): the statements that
  // recorded more than one, their calls, and those of them that failed and were recorded one by one.
  struct Batching {
    int64_t statements = 0;
    int64_t calls = 0;
    int64_t fallbacks = 0;
  };
  Batching progress_batching();
  Batching completion_batching();

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
  // One statement, one commit (the base class makes two); concurrent calls share them.
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
  class Pool;
  template <typename Tx, typename Body>
  auto Run(Pool& pool, const char* what, Body&& body);
  template <typename Body>
  auto InTransaction(const char* what, Body&& body);  // several statements, atomically
  template <typename Body>
  auto Statement(const char* what, Body&& body);  // one statement, atomic by itself
  template <typename Body>
  auto RelaxedStatement(const char* what,
                        Body&& body);  // one statement, committed without waiting for the disk
  Transition Classify(const std::string& trial_id, int attempt, const std::string& state,
                      const std::string& error);
  void AnalyzeAfterInsert(size_t inserted);
  struct QueuedProgress;
  struct QueuedCompletion;
  template <typename Item>
  struct Batched;
  // Records `events` (RecordProgress's queue) in one statement, or one by one when
  // that statement fails; sets each event's answer. Never throws.
  void RecordQueuedProgress(const std::vector<QueuedProgress*>& events);
  // The same for FinishTrialAndLease's queue: one statement and one synchronous commit.
  void RecordQueuedCompletions(const std::vector<QueuedCompletion*>& completions);

  std::string url_;
  std::unique_ptr<Pool> pool_;               // synchronous commits
  std::unique_ptr<Pool> relaxed_;            // synchronous_commit off
  std::unique_ptr<Batched<QueuedProgress>> progress_;       // concurrent RecordProgress calls
  std::unique_ptr<Batched<QueuedCompletion>> completions_;  // concurrent FinishTrialAndLease calls
};

}  // namespace frontier
