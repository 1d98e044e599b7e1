// Persistent state of the coordinator: experiments, trials, progress,
// results and workers. One interface, one conformance suite
// (tests/server/store_conformance.h); SQLite is the embedded default.
//
// Every state transition of a trial is one conditional update, so that two
// workers can never hold the same trial and a report from a stale attempt
// can never overwrite a newer one. Times are Unix milliseconds from the
// caller's Clock.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace frontier {

// The store could not be reached or a statement failed. Nothing was written
// by the failed call (each call is one transaction).
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// How a store is opened. kMigrate (`frontier-server migrate`, tests): a SQLite
// file is created when missing, and the schema is migrated to this build's.
// kServe (the coordinator, `frontier run`): kMigrate, and a PostgreSQL store
// opens every connection of its pools now, with their prepared statements,
// instead of on first use (the first calls a coordinator serves, 64 workers'
// at once, then do not wait for connections being opened).
// kReadOnly (the read commands' --db/--store): nothing is ever written (a
// SQLite file is opened read-only, PostgreSQL sessions run read-only
// transactions); a store whose schema is not this build's is refused with
// SchemaMismatch's message, a write throws StoreError.
enum class OpenMode { kMigrate, kServe, kReadOnly };

// Why a read-only open of `store` (its URL, for the message) refuses its
// schema `version` when this build's is `latest`: older names the command
// that migrates it, newer says to upgrade. Empty when they are equal.
std::string SchemaMismatch(const std::string& store, int version, int latest);

// Trial states as stored (the names of proto TrialState without the prefix, lower case).
namespace trial_state {
inline constexpr const char* kPending = "pending";
inline constexpr const char* kRunning = "running";
inline constexpr const char* kCompleted = "completed";
inline constexpr const char* kFailed = "failed";
inline constexpr const char* kDiverged = "diverged";
inline constexpr const char* kStopped = "stopped";
inline constexpr const char* kCancelled = "cancelled";
bool IsFinal(const std::string& state);
}  // namespace trial_state

namespace experiment_state {
inline constexpr const char* kRunning = "running";
inline constexpr const char* kCompleted = "completed";
inline constexpr const char* kCancelled = "cancelled";
}  // namespace experiment_state

struct ExperimentRecord {
  std::string id;  // assigned by CreateExperiment
  std::string name;
  std::string state = experiment_state::kRunning;
  std::string space_yaml;
  std::string source_name;
  int64_t created_ms = 0;
  std::vector<std::string> skipped;  // configurations filtered at submission, with reasons
  // The objectives and constraints, for the config_front view (GoalsJson in
  // search_space.h); written at creation only.
  std::string goals_json = "{}";
  // The user who submitted it (proto/auth.h Identity); empty when the
  // coordinator has no tokens. Written at creation only.
  std::string owner;
  // Why the search is paused while the experiment runs ("" when it is not):
  // its external proposer is down, past its deadline or answers only
  // invalid proposals (docs/proposers.md). Shown as its status.
  std::string paused;
  // The client's idempotency key of its submission (SubmitExperimentRequest);
  // "" when it gave none. Unique per owner when not empty. Written at
  // creation only.
  std::string submit_id;
};

struct TrialRow {
  std::string id;  // assigned by CreateExperiment / AddTrials: "<experiment>-t<NNNN>"
  std::string experiment_id;
  std::string config_json;  // {} = baseline
  bool is_baseline = false;
  int64_t seed = 0;
  int steps = 0;
  std::string state = trial_state::kPending;
  int attempt = 0;  // leases so far
  int max_attempts = 3;
  std::string worker_id;
  int64_t lease_expires_ms = 0;
  std::string spec_json;    // the full trial spec, trial_id and seed included
  std::string result_json;  // completed / diverged / failed-with-result
  std::string error;
  int64_t created_ms = 0, started_ms = 0, finished_ms = 0;
  // Who proposed its configuration (an external proposer's name, e.g.
  // "optuna:tpe", or the built-in strategy's) and the rationale it gave.
  std::string proposer;
  std::string rationale;
};

// One call of an experiment's external proposer (docs/proposers.md): how
// long it took, what came of it and the model tokens it reported.
struct ProposerCallRow {
  std::string experiment_id;
  int64_t at_ms = 0;     // when the answer (or the failure) came
  std::string proposer;  // the name it answered with, or its address when it failed
  int64_t latency_ms = 0;
  int asked = 0, accepted = 0, rejected = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int model_calls = 0;
  std::string error;  // why the call failed; "" when it answered
};

// Kernel-lab run states (docs/kernel-lab.md).
namespace op_run_state {
inline constexpr const char* kRunning = "running";
inline constexpr const char* kCompleted = "completed";
inline constexpr const char* kStopped = "stopped";
}  // namespace op_run_state

// A kernel-lab run (docs/kernel-lab.md): one op optimized against its reference.
struct OpRunRecord {
  std::string id;         // assigned by CreateOpRun: "op-000042" (OpRunIdFor)
  std::string name;       // the user's name for it, unique per store (e.g. "attn-lab")
  std::string op;         // "attention_kernel", "bev_pool", or a plugin's op
  std::string spec_json;  // the run's settings (shapes source, flags, rounds, target...), opaque to the store
  std::string state = op_run_state::kRunning;  // "running" | "completed" | "stopped"
  std::string owner;                           // like experiments' owner ("" when no auth)
  int64_t created_ms = 0, updated_ms = 0;
};

// One candidate of a run and its outcome.
struct OpCandidateRow {
  std::string run_id;
  std::string candidate;    // name, unique within the run (file name or "llm-r2-c1")
  std::string source_kind;  // "folder" | "llm"
  int round = 0;            // 0 for folder candidates, 1.. for model rounds
  std::string source_hash;  // sha256 of the source text, hex; unique within the run
  std::string source;       // the source text (bounded by the caller to 256 KiB)
  std::string outcome;      // "timed" | "compile_error" | "incorrect" | "crashed" | "timed_out" | "refused"
  double speedup = 0;       // median speed-up over the reference (timed only; else 0)
  double speedup_low = 0, speedup_high = 0;
  std::string result_json;  // the judge's whole JSON line, opaque to the store
  int64_t created_ms = 0;
};

struct TrialCountsRow {
  int pending = 0, running = 0, completed = 0, failed = 0, diverged = 0, stopped = 0, cancelled = 0,
      total = 0;
};

struct WorkerRecord {
  std::string id;  // assigned by RegisterWorker
  std::string host, device, device_name, version;
  int device_count = 1;
  std::string peak_flops_json = "{}";
  int64_t registered_ms = 0, last_heartbeat_ms = 0;
};

struct ProgressRow {
  std::string trial_id;
  int attempt = 0;
  int step = 0;
  std::string event_json;
  int64_t at_ms = 0;
};

// What a conditional trial update did.
enum class Transition {
  kApplied,    // the state changed as asked
  kDuplicate,  // already in that final state from the same attempt: nothing to do (idempotent)
  kStale,      // the trial is not running this attempt (lease lost, re-queued, or finished otherwise)
  kNotFound,
};

// What a conditional update of the running `attempt` does to `current` (nullopt:
// no such trial): kApplied when the trial is running that attempt. For
// FinishTrial `finish_state` is the final state asked for (a repeat is a
// duplicate); for FailAttempt it is empty and a repeat is recognized by `error`.
Transition TransitionFor(const std::optional<TrialRow>& current, int attempt, const std::string& finish_state,
                         const std::string& error);

// Identifiers and messages every Store implementation shares.
std::string ExperimentIdFor(int64_t seq);  // "exp-000042"
std::string WorkerIdFor(int64_t seq);      // "worker-0007"
std::string OpRunIdFor(int64_t seq);       // "op-000042"
// True when `name` has the form of an op run's id ("op-" and digits), which no run may be named:
// FindOpRun looks ids up first.
bool IsOpRunId(const std::string& name);
// Adds `n` trials in `state` to the counts (and to the total).
void AddToCounts(TrialCountsRow& counts, const std::string& state, int n);
// Sets trial.id to "<experiment>-t<NNNN>" and writes it into the trial's spec.
void NameTrial(const std::string& experiment_id, int64_t number, TrialRow& trial);
// Sets run.id to "<trial_id>-p<number>" and writes it into the run's spec.
void NameProfileRun(const std::string& trial_id, int64_t number, TrialRow& run);
// The experiment a trial id names ("exp-000042-t0007" -> "exp-000042"); empty when it names none.
std::string ExperimentOfTrial(const std::string& trial_id);
// Profile runs (`frontier profile`, Store::AddProfileRun) are named
// "<trial>-p<N>": the trial a run's id names ("exp-000042-t0007-p2" ->
// "exp-000042-t0007"), empty when the id is not a profile run's.
std::string ProfiledTrialOf(const std::string& run_id);
inline bool IsProfileRun(const std::string& trial_id) { return !ProfiledTrialOf(trial_id).empty(); }

class Store {
 public:
  virtual ~Store() = default;

  // Experiments and their first trials, atomically. Assigns and returns the experiment id
  // and the trials' ids. Throws StoreError, and stores nothing, when the
  // experiment's owner already has one with its non-empty submit_id.
  virtual std::string CreateExperiment(ExperimentRecord experiment, std::vector<TrialRow> trials,
                                       int64_t now_ms) = 0;
  // The experiment `owner` submitted with the key `submit_id`; nullopt when
  // there is none or `submit_id` is empty.
  virtual std::optional<ExperimentRecord> FindSubmittedExperiment(const std::string& owner,
                                                                  const std::string& submit_id) = 0;
  // More trials for an existing experiment (adaptive strategies).
  virtual std::vector<std::string> AddTrials(const std::string& experiment_id, std::vector<TrialRow> trials,
                                             int64_t now_ms) = 0;
  virtual std::optional<ExperimentRecord> GetExperiment(const std::string& id) = 0;
  virtual std::vector<ExperimentRecord> ListExperiments(int limit) = 0;  // newest first
  virtual void SetExperimentState(const std::string& id, const std::string& state) = 0;
  // Sets ExperimentRecord::paused ("" resumes).
  virtual void SetExperimentPaused(const std::string& id, const std::string& reason) = 0;
  // The calls of an experiment's external proposer, in the order they were added.
  virtual void AddProposerCalls(const std::vector<ProposerCallRow>& calls) = 0;
  virtual std::vector<ProposerCallRow> ListProposerCalls(const std::string& experiment_id) = 0;

  virtual std::vector<TrialRow> ListTrials(const std::string& experiment_id) = 0;  // creation order
  // As ListTrials without the specs (spec_json empty): what reports read.
  virtual std::vector<TrialRow> ListTrialOutcomes(const std::string& experiment_id) = 0;
  virtual std::optional<TrialRow> GetTrial(const std::string& trial_id) = 0;
  virtual TrialCountsRow CountTrials(const std::string& experiment_id) = 0;
  // Experiments in state running whose trials are all final.
  virtual std::vector<std::string> ExperimentsReadyToComplete() = 0;

  // Leases the oldest pending trial of a running experiment to `worker_id`:
  // state running, attempt + 1, lease until now + lease_ms. Never hands one
  // trial to two callers, also under concurrent calls.
  virtual std::optional<TrialRow> LeaseNextTrial(const std::string& worker_id, int64_t now_ms,
                                                 int64_t lease_ms) = 0;
  // Extends the lease when the trial is running `attempt` for `worker_id`.
  virtual bool ExtendLease(const std::string& trial_id, int attempt, const std::string& worker_id,
                           int64_t expires_ms) = 0;
  // Ends the running `attempt` with a final state (completed, diverged, failed, stopped, cancelled).
  virtual Transition FinishTrial(const std::string& trial_id, int attempt, const std::string& state,
                                 const std::string& result_json, const std::string& error,
                                 int64_t now_ms) = 0;
  // FinishTrial, then LeaseNextTrial for `worker_id` (whatever the finish
  // met), committed together where the store can: a completion that also asks
  // for the worker's next trial (CompleteTrial.lease_next) costs one commit.
  struct FinishedAndLeased {
    Transition finished;
    std::optional<TrialRow> next;
  };
  virtual FinishedAndLeased FinishTrialAndLease(const std::string& trial_id, int attempt,
                                                const std::string& state, const std::string& result_json,
                                                const std::string& error, int64_t now_ms,
                                                const std::string& worker_id, int64_t lease_ms) {
    const Transition finished = FinishTrial(trial_id, attempt, state, result_json, error, now_ms);
    return {finished, LeaseNextTrial(worker_id, now_ms, lease_ms)};
  }
  // The running `attempt` failed: back to pending when attempts remain and
  // `retryable`, otherwise failed for good with `error`.
  virtual Transition FailAttempt(const std::string& trial_id, int attempt, const std::string& error,
                                 bool retryable, const std::string& result_json, int64_t now_ms) = 0;
  // Running trials whose lease expired before now: re-queued, or failed once
  // max_attempts leases were used. Returns them as they are after the change.
  virtual std::vector<TrialRow> ExpireLeases(int64_t now_ms) = 0;
  // Gives every running trial a lease until `expires_ms` (after a coordinator restart).
  virtual void ExtendAllLeases(int64_t expires_ms) = 0;
  // Cancels the experiment's pending trials; running ones keep their lease until they report.
  virtual void CancelPendingTrials(const std::string& experiment_id, int64_t now_ms) = 0;

  virtual void AddProgress(const ProgressRow& row) = 0;
  // A progress event of the running `row.attempt` held by `worker_id`: records
  // it and, when the lease ends before `renew_before_ms`, extends it until
  // `lease_expires_ms`, atomically. False, and nothing recorded, when that
  // attempt does not hold the lease. (A lease still far from its end is left
  // as it is: rewriting the trial's row on every event is most of the cost of
  // a progress record.)
  virtual bool RecordProgress(const ProgressRow& row, const std::string& worker_id, int64_t lease_expires_ms,
                              int64_t renew_before_ms) = 0;
  virtual std::vector<ProgressRow> ListProgress(const std::string& trial_id) = 0;

  // A profile run of the stored trial `trial_id` (`frontier profile`): a
  // pending trial "<trial_id>-p<N>" (N: its runs so far + 1) of the trial's
  // experiment with `run`'s spec (its trial_id set to the run's), config,
  // seed and steps, leased before other trials and whatever the
  // experiment's state, and left out of everything that describes the
  // experiment: ListTrials, ListTrialOutcomes, CountTrials, completion
  // (ExperimentsReadyToComplete), trial numbering and the SQL views. Returns
  // the run's id; throws StoreError.
  virtual std::string AddProfileRun(const std::string& trial_id, TrialRow run, int64_t now_ms) = 0;
  // The profile runs of `trial_id`, oldest first.
  virtual std::vector<TrialRow> ListProfileRuns(const std::string& trial_id) = 0;

  // Kernel-lab runs (docs/kernel-lab.md), each one transaction. CreateOpRun
  // stores `run` (its created_ms as given; updated_ms = created_ms when 0;
  // state "running" when empty) and returns its assigned id; throws
  // StoreError, and stores nothing, when `run.name` is empty, has the form of
  // a run id (IsOpRunId) or is another run's name.
  virtual std::string CreateOpRun(OpRunRecord run) = 0;
  // The run with the id `id_or_name`, else the one with that name; nullopt when neither.
  virtual std::optional<OpRunRecord> FindOpRun(const std::string& id_or_name) = 0;
  virtual std::vector<OpRunRecord> ListOpRuns(int limit) = 0;  // newest first
  // Sets the run's state and updated_ms; a run id that names no run changes nothing.
  virtual void SetOpRunState(const std::string& id, const std::string& state, int64_t now_ms) = 0;
  // Records one candidate of the run `row.run_id`: true when inserted; false,
  // and nothing changed, when the run has a candidate of that name or of that
  // source_hash already (a resumed run recording a candidate again). Committed
  // synchronously. Throws StoreError when run_id names no run.
  virtual bool RecordOpCandidate(const OpCandidateRow& row) = 0;
  // The run's candidates in the order they were recorded.
  virtual std::vector<OpCandidateRow> ListOpCandidates(const std::string& run_id) = 0;

  virtual std::string RegisterWorker(WorkerRecord worker, int64_t now_ms) = 0;
  virtual bool TouchWorker(const std::string& worker_id, int64_t now_ms) = 0;  // false: unknown worker
  virtual std::vector<WorkerRecord> ListWorkers() = 0;
};

}  // namespace frontier
