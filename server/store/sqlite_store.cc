// The SQLite store's experiments, trials (insertion, lists, counts, leases,
// finishes, failures, expiry), proposer calls, progress events, profile runs
// and workers. Its schema and opening are in sqlite_schema.cc, the kernel
// lab's op runs in sqlite_op_runs.cc.
#include "server/store/sqlite_store.h"

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include "server/store/sql_store_common.h"
#include "server/store/sqlite_internal.h"

namespace frontier {

using sql_store::kExperimentColumns;
using sql_store::kOutcomeColumns;
using sql_store::kTrialColumns;
using sqlite_internal::Sql;
using sqlite_internal::Statement;

namespace {

TrialRow ReadTrial(const Statement& s) {
  TrialRow t;
  t.id = s.Text(0);
  t.experiment_id = s.Text(1);
  t.config_json = s.Text(2);
  t.is_baseline = s.Int(3) != 0;
  t.seed = s.Int(4);
  t.steps = static_cast<int>(s.Int(5));
  t.state = s.Text(6);
  t.attempt = static_cast<int>(s.Int(7));
  t.max_attempts = static_cast<int>(s.Int(8));
  t.worker_id = s.Text(9);
  t.lease_expires_ms = s.Int(10);
  t.spec_json = s.Text(11);
  t.result_json = s.Text(12);
  t.error = s.Text(13);
  t.created_ms = s.Int(14);
  t.started_ms = s.Int(15);
  t.finished_ms = s.Int(16);
  t.proposer = s.Text(17);
  t.rationale = s.Text(18);
  return t;
}

ExperimentRecord ReadExperiment(const Statement& s) {
  ExperimentRecord e;
  e.id = s.Text(0);
  e.name = s.Text(1);
  e.state = s.Text(2);
  e.space_yaml = s.Text(3);
  e.source_name = s.Text(4);
  e.created_ms = s.Int(5);
  for (const auto& item : nlohmann::json::parse(s.Text(6))) e.skipped.push_back(item.get<std::string>());
  e.goals_json = s.Text(7);
  e.owner = s.Text(8);
  e.paused = s.Text(9);
  e.submit_id = s.Text(10);
  return e;
}

std::optional<TrialRow> SelectTrial(sqlite3* db, const std::string& id) {
  Statement s(db, Sql("SELECT ", kTrialColumns, " FROM trials WHERE id = ?").c_str());
  s.Bind(1, id);
  if (!s.Step()) return std::nullopt;
  return ReadTrial(s);
}

// The experiment's trials in creation order, `columns` (kTrialColumns or kOutcomeColumns) of each.
std::vector<TrialRow> SelectTrials(sqlite3* db, const char* columns, const std::string& experiment_id) {
  Statement s(db,
              Sql("SELECT ", columns, " FROM trials WHERE experiment_id = ? AND profile_of = '' ORDER BY seq")
                  .c_str());
  s.Bind(1, experiment_id);
  std::vector<TrialRow> out;
  while (s.Step()) out.push_back(ReadTrial(s));
  return out;
}

// Extends the lease when `attempt` of the trial is running for `worker_id`; false otherwise.
bool ExtendHeldLease(sqlite3* db, const std::string& trial_id, int attempt, const std::string& worker_id,
                     int64_t expires_ms) {
  Statement s(db,
              "UPDATE trials SET lease_expires_ms = MAX(lease_expires_ms, ?) "
              "WHERE id = ? AND attempt = ? AND worker_id = ? AND state = 'running'");
  s.Bind(1, expires_ms).Bind(2, trial_id).Bind(3, attempt).Bind(4, worker_id).Run();
  return s.Changes() == 1;
}

void InsertProgress(sqlite3* db, const ProgressRow& row) {
  Statement(db, "INSERT INTO progress (trial_id, attempt, step, event_json, at_ms) VALUES (?, ?, ?, ?, ?)")
      .Bind(1, row.trial_id)
      .Bind(2, row.attempt)
      .Bind(3, row.step)
      .Bind(4, row.event_json)
      .Bind(5, row.at_ms)
      .Run();
}

}  // namespace

std::vector<std::string> SqliteStore::InsertTrials(const std::string& experiment_id,
                                                   std::vector<TrialRow>& trials, int64_t now_ms) {
  int64_t next = 0;
  {
    Statement count(db_, "SELECT COUNT(*) FROM trials WHERE experiment_id = ? AND profile_of = ''");
    count.Bind(1, experiment_id);
    count.Step();
    next = count.Int(0);
  }
  std::vector<std::string> ids;
  for (TrialRow& t : trials) {
    NameTrial(experiment_id, ++next, t);
    Statement s(db_, Sql("INSERT INTO trials (", kTrialColumns,
                         ") VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, '', 0, ?, '', '', ?, 0, 0, ?, ?)")
                         .c_str());
    s.Bind(1, t.id).Bind(2, experiment_id).Bind(3, t.config_json).Bind(4, t.is_baseline).Bind(5, t.seed);
    s.Bind(6, t.steps).Bind(7, t.max_attempts).Bind(8, t.spec_json).Bind(9, now_ms);
    s.Bind(10, t.proposer).Bind(11, t.rationale).Run();
    ids.push_back(t.id);
  }
  return ids;
}

std::string SqliteStore::CreateExperiment(ExperimentRecord e, std::vector<TrialRow> trials, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  nlohmann::json skipped = e.skipped;
  Statement(
      db_,
      "INSERT INTO experiments (name, state, space_yaml, source_name, created_ms, skipped_json, goals_json, "
      "owner, submit_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
      .Bind(1, e.name)
      .Bind(2, e.state)
      .Bind(3, e.space_yaml)
      .Bind(4, e.source_name)
      .Bind(5, now_ms)
      .Bind(6, skipped.dump())
      .Bind(7, e.goals_json)
      .Bind(8, e.owner)
      .Bind(9, e.submit_id)
      .Run();
  const int64_t seq = sqlite3_last_insert_rowid(db_);
  const std::string id = ExperimentIdFor(seq);
  Statement(db_, "UPDATE experiments SET id = ? WHERE seq = ?").Bind(1, id).Bind(2, seq).Run();
  InsertTrials(id, trials, now_ms);
  tx.Commit();
  return id;
}

std::vector<std::string> SqliteStore::AddTrials(const std::string& experiment_id,
                                                std::vector<TrialRow> trials, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  auto ids = InsertTrials(experiment_id, trials, now_ms);
  tx.Commit();
  return ids;
}

std::optional<ExperimentRecord> SqliteStore::GetExperiment(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, Sql("SELECT ", kExperimentColumns, " FROM experiments WHERE id = ?").c_str());
  s.Bind(1, id);
  if (!s.Step()) return std::nullopt;
  return ReadExperiment(s);
}

std::optional<ExperimentRecord> SqliteStore::FindSubmittedExperiment(const std::string& owner,
                                                                     const std::string& submit_id) {
  if (submit_id.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(
      db_, Sql("SELECT ", kExperimentColumns, " FROM experiments WHERE owner = ? AND submit_id = ?").c_str());
  s.Bind(1, owner).Bind(2, submit_id);
  if (!s.Step()) return std::nullopt;
  return ReadExperiment(s);
}

std::vector<ExperimentRecord> SqliteStore::ListExperiments(int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, Sql("SELECT ", kExperimentColumns, " FROM experiments ORDER BY seq DESC LIMIT ?").c_str());
  s.Bind(1, limit);
  std::vector<ExperimentRecord> out;
  while (s.Step()) out.push_back(ReadExperiment(s));
  return out;
}

void SqliteStore::SetExperimentState(const std::string& id, const std::string& state) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement(db_, "UPDATE experiments SET state = ? WHERE id = ?").Bind(1, state).Bind(2, id).Run();
}

void SqliteStore::SetExperimentPaused(const std::string& id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement(db_, "UPDATE experiments SET paused = ? WHERE id = ?").Bind(1, reason).Bind(2, id).Run();
}

void SqliteStore::AddProposerCalls(const std::vector<ProposerCallRow>& calls) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  for (const ProposerCallRow& c : calls) {
    Statement s(
        db_,
        "INSERT INTO proposer_calls (experiment_id, at_ms, proposer, latency_ms, asked, accepted, rejected, "
        "prompt_tokens, completion_tokens, model_calls, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    s.Bind(1, c.experiment_id).Bind(2, c.at_ms).Bind(3, c.proposer).Bind(4, c.latency_ms).Bind(5, c.asked);
    s.Bind(6, c.accepted).Bind(7, c.rejected).Bind(8, c.prompt_tokens).Bind(9, c.completion_tokens);
    s.Bind(10, c.model_calls).Bind(11, c.error).Run();
  }
  tx.Commit();
}

std::vector<ProposerCallRow> SqliteStore::ListProposerCalls(const std::string& experiment_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(
      db_,
      "SELECT experiment_id, at_ms, proposer, latency_ms, asked, accepted, rejected, prompt_tokens, "
      "completion_tokens, model_calls, error FROM proposer_calls WHERE experiment_id = ? ORDER BY seq");
  s.Bind(1, experiment_id);
  std::vector<ProposerCallRow> out;
  while (s.Step()) {
    ProposerCallRow c;
    c.experiment_id = s.Text(0);
    c.at_ms = s.Int(1);
    c.proposer = s.Text(2);
    c.latency_ms = s.Int(3);
    c.asked = static_cast<int>(s.Int(4));
    c.accepted = static_cast<int>(s.Int(5));
    c.rejected = static_cast<int>(s.Int(6));
    c.prompt_tokens = s.Int(7);
    c.completion_tokens = s.Int(8);
    c.model_calls = static_cast<int>(s.Int(9));
    c.error = s.Text(10);
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<TrialRow> SqliteStore::ListTrials(const std::string& experiment_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return SelectTrials(db_, kTrialColumns, experiment_id);
}

std::vector<TrialRow> SqliteStore::ListTrialOutcomes(const std::string& experiment_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return SelectTrials(db_, kOutcomeColumns, experiment_id);
}

std::optional<TrialRow> SqliteStore::GetTrial(const std::string& trial_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return SelectTrial(db_, trial_id);
}

TrialCountsRow SqliteStore::CountTrials(const std::string& experiment_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(
      db_, "SELECT state, COUNT(*) FROM trials WHERE experiment_id = ? AND profile_of = '' GROUP BY state");
  s.Bind(1, experiment_id);
  TrialCountsRow c;
  while (s.Step()) {
    AddToCounts(c, s.Text(0), static_cast<int>(s.Int(1)));
  }
  return c;
}

std::vector<std::string> SqliteStore::ExperimentsReadyToComplete() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_,
              "SELECT e.id FROM experiments e WHERE e.state = 'running' AND NOT EXISTS "
              "(SELECT 1 FROM trials t WHERE t.experiment_id = e.id AND t.state IN ('pending', 'running') "
              "AND t.profile_of = '') "
              "ORDER BY e.seq");
  std::vector<std::string> out;
  while (s.Step()) out.push_back(s.Text(0));
  return out;
}

std::optional<TrialRow> SqliteStore::LeaseNextTrial(const std::string& worker_id, int64_t now_ms,
                                                    int64_t lease_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  std::string id;
  {
    // Profile runs first, whatever their experiment's state; then the oldest trial of a running experiment.
    Statement runs(db_,
                   "SELECT id FROM trials WHERE state = 'pending' AND profile_of <> '' ORDER BY seq LIMIT 1");
    if (runs.Step()) {
      id = runs.Text(0);
    } else {
      Statement s(db_,
                  "SELECT t.id FROM trials t JOIN experiments e ON e.id = t.experiment_id "
                  "WHERE t.state = 'pending' AND e.state = 'running' ORDER BY t.seq LIMIT 1");
      if (!s.Step()) return std::nullopt;
      id = s.Text(0);
    }
  }
  Statement update(db_,
                   "UPDATE trials SET state = 'running', attempt = attempt + 1, worker_id = ?, "
                   "lease_expires_ms = ?, started_ms = ? WHERE id = ? AND state = 'pending'");
  update.Bind(1, worker_id).Bind(2, now_ms + lease_ms).Bind(3, now_ms).Bind(4, id).Run();
  if (update.Changes() != 1) return std::nullopt;
  auto row = SelectTrial(db_, id);
  tx.Commit();
  return row;
}

bool SqliteStore::ExtendLease(const std::string& trial_id, int attempt, const std::string& worker_id,
                              int64_t expires_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  return ExtendHeldLease(db_, trial_id, attempt, worker_id, expires_ms);
}

Transition SqliteStore::FinishTrial(const std::string& trial_id, int attempt, const std::string& state,
                                    const std::string& result_json, const std::string& error,
                                    int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  const auto current = SelectTrial(db_, trial_id);
  if (const Transition t = TransitionFor(current, attempt, state, ""); t != Transition::kApplied) return t;
  Statement(db_,
            "UPDATE trials SET state = ?, result_json = ?, error = ?, finished_ms = ?, lease_expires_ms = 0 "
            "WHERE id = ? AND attempt = ? AND state = 'running'")
      .Bind(1, state)
      .Bind(2, result_json)
      .Bind(3, error)
      .Bind(4, now_ms)
      .Bind(5, trial_id)
      .Bind(6, attempt)
      .Run();
  tx.Commit();
  return Transition::kApplied;
}

Transition SqliteStore::FailAttempt(const std::string& trial_id, int attempt, const std::string& error,
                                    bool retryable, const std::string& result_json, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  const auto current = SelectTrial(db_, trial_id);
  if (const Transition t = TransitionFor(current, attempt, "", error); t != Transition::kApplied) return t;
  const bool requeue = retryable && current->attempt < current->max_attempts;
  Statement(db_,
            "UPDATE trials SET state = ?, error = ?, result_json = ?, finished_ms = ?, lease_expires_ms = 0 "
            "WHERE id = ? AND attempt = ? AND state = 'running'")
      .Bind(1, requeue ? trial_state::kPending : trial_state::kFailed)
      .Bind(2, error)
      .Bind(3, result_json)
      .Bind(4, requeue ? 0 : now_ms)
      .Bind(5, trial_id)
      .Bind(6, attempt)
      .Run();
  tx.Commit();
  return Transition::kApplied;
}

std::vector<TrialRow> SqliteStore::ExpireLeases(int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  std::vector<std::string> ids;
  {
    Statement s(db_, "SELECT id FROM trials WHERE state = 'running' AND lease_expires_ms < ? ORDER BY seq");
    s.Bind(1, now_ms);
    while (s.Step()) ids.push_back(s.Text(0));
  }
  std::vector<TrialRow> out;
  for (const std::string& id : ids) {
    Statement(db_,
              "UPDATE trials SET "
              "state = CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'failed' END, "
              "finished_ms = CASE WHEN attempt < max_attempts THEN 0 ELSE ? END, "
              "error = 'lease expired (attempt ' || attempt || ' of ' || max_attempts || ', worker ' || "
              "worker_id || ')', "
              "lease_expires_ms = 0 WHERE id = ? AND state = 'running'")
        .Bind(1, now_ms)
        .Bind(2, id)
        .Run();
    out.push_back(*SelectTrial(db_, id));
  }
  tx.Commit();
  return out;
}

void SqliteStore::ExtendAllLeases(int64_t expires_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement(db_, "UPDATE trials SET lease_expires_ms = MAX(lease_expires_ms, ?) WHERE state = 'running'")
      .Bind(1, expires_ms)
      .Run();
}

void SqliteStore::CancelPendingTrials(const std::string& experiment_id, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement(db_,
            "UPDATE trials SET state = 'cancelled', error = 'experiment cancelled', finished_ms = ? "
            "WHERE experiment_id = ? AND state = 'pending'")
      .Bind(1, now_ms)
      .Bind(2, experiment_id)
      .Run();
}

void SqliteStore::AddProgress(const ProgressRow& row) {
  std::lock_guard<std::mutex> lock(mu_);
  InsertProgress(db_, row);
}

bool SqliteStore::RecordProgress(const ProgressRow& row, const std::string& worker_id,
                                 int64_t lease_expires_ms, int64_t renew_before_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  Statement held(db_,
                 "SELECT lease_expires_ms FROM trials "
                 "WHERE id = ? AND attempt = ? AND worker_id = ? AND state = 'running'");
  held.Bind(1, row.trial_id).Bind(2, row.attempt).Bind(3, worker_id);
  if (!held.Step()) return false;
  if (held.Int(0) < renew_before_ms)
    ExtendHeldLease(db_, row.trial_id, row.attempt, worker_id, lease_expires_ms);
  InsertProgress(db_, row);
  tx.Commit();
  return true;
}

std::vector<ProgressRow> SqliteStore::ListProgress(const std::string& trial_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_,
              "SELECT trial_id, attempt, step, event_json, at_ms FROM progress WHERE trial_id = ? "
              "ORDER BY attempt, step, rowid");
  s.Bind(1, trial_id);
  std::vector<ProgressRow> out;
  while (s.Step()) {
    out.push_back({s.Text(0), static_cast<int>(s.Int(1)), static_cast<int>(s.Int(2)), s.Text(3), s.Int(4)});
  }
  return out;
}

std::string SqliteStore::AddProfileRun(const std::string& trial_id, TrialRow run, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  const std::optional<TrialRow> trial = SelectTrial(db_, trial_id);
  if (!trial) throw StoreError("no trial '" + trial_id + "'");
  int64_t runs = 0;
  {
    Statement count(db_, "SELECT COUNT(*) FROM trials WHERE profile_of = ?");
    count.Bind(1, trial_id);
    count.Step();
    runs = count.Int(0);
  }
  NameProfileRun(trial_id, runs + 1, run);
  Statement s(
      db_, Sql("INSERT INTO trials (", kTrialColumns,
               ", profile_of) VALUES (?, ?, ?, ?, ?, ?, 'pending', 0, ?, '', 0, ?, '', '', ?, 0, 0, ?, ?, ?)")
               .c_str());
  s.Bind(1, run.id).Bind(2, trial->experiment_id).Bind(3, trial->config_json).Bind(4, trial->is_baseline);
  s.Bind(5, trial->seed)
      .Bind(6, trial->steps)
      .Bind(7, run.max_attempts)
      .Bind(8, run.spec_json)
      .Bind(9, now_ms);
  s.Bind(10, run.proposer).Bind(11, run.rationale).Bind(12, trial_id).Run();
  tx.Commit();
  return run.id;
}

std::vector<TrialRow> SqliteStore::ListProfileRuns(const std::string& trial_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, Sql("SELECT ", kTrialColumns, " FROM trials WHERE profile_of = ? ORDER BY seq").c_str());
  s.Bind(1, trial_id);
  std::vector<TrialRow> out;
  while (s.Step()) out.push_back(ReadTrial(s));
  return out;
}

std::string SqliteStore::RegisterWorker(WorkerRecord w, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  Statement(db_,
            "INSERT INTO workers (host, device, device_name, device_count, version, peak_flops_json, "
            "registered_ms, last_heartbeat_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)")
      .Bind(1, w.host)
      .Bind(2, w.device)
      .Bind(3, w.device_name)
      .Bind(4, w.device_count)
      .Bind(5, w.version)
      .Bind(6, w.peak_flops_json)
      .Bind(7, now_ms)
      .Bind(8, now_ms)
      .Run();
  const int64_t seq = sqlite3_last_insert_rowid(db_);
  const std::string id = WorkerIdFor(seq);
  Statement(db_, "UPDATE workers SET id = ? WHERE seq = ?").Bind(1, id).Bind(2, seq).Run();
  tx.Commit();
  return id;
}

bool SqliteStore::TouchWorker(const std::string& worker_id, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, "UPDATE workers SET last_heartbeat_ms = ? WHERE id = ?");
  s.Bind(1, now_ms).Bind(2, worker_id).Run();
  return s.Changes() == 1;
}

std::vector<WorkerRecord> SqliteStore::ListWorkers() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_,
              "SELECT id, host, device, device_name, version, device_count, peak_flops_json, registered_ms, "
              "last_heartbeat_ms FROM workers ORDER BY seq");
  std::vector<WorkerRecord> out;
  while (s.Step()) {
    WorkerRecord w;
    w.id = s.Text(0);
    w.host = s.Text(1);
    w.device = s.Text(2);
    w.device_name = s.Text(3);
    w.version = s.Text(4);
    w.device_count = static_cast<int>(s.Int(5));
    w.peak_flops_json = s.Text(6);
    w.registered_ms = s.Int(7);
    w.last_heartbeat_ms = s.Int(8);
    out.push_back(w);
  }
  return out;
}

}  // namespace frontier
