#include "server/store/postgres_store.h"

#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "server/store/result_views.h"
#include "server/store/statement_batch.h"

namespace frontier {
namespace {

// Versioned schema: migration i brings the schema from version i to i + 1.
// The same tables and `results` view as the SQLite store.
const std::string kMigrations[] = {
    R"sql(
CREATE TABLE experiments (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT UNIQUE,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  space_yaml TEXT NOT NULL,
  source_name TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  skipped_json TEXT NOT NULL DEFAULT '[]');
CREATE TABLE trials (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT UNIQUE NOT NULL,
  experiment_id TEXT NOT NULL REFERENCES experiments(id),
  config_json TEXT NOT NULL,
  is_baseline BOOLEAN NOT NULL,
  seed BIGINT NOT NULL,
  steps INTEGER NOT NULL,
  state TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  worker_id TEXT NOT NULL DEFAULT '',
  lease_expires_ms BIGINT NOT NULL DEFAULT 0,
  spec_json TEXT NOT NULL,
  result_json TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  created_ms BIGINT NOT NULL,
  started_ms BIGINT NOT NULL DEFAULT 0,
  finished_ms BIGINT NOT NULL DEFAULT 0);
CREATE INDEX trials_by_experiment ON trials(experiment_id, seq);
CREATE INDEX trials_pending ON trials(seq) WHERE state = 'pending';
CREATE INDEX trials_running ON trials(lease_expires_ms) WHERE state = 'running';
CREATE TABLE progress (
  trial_id TEXT NOT NULL REFERENCES trials(id),
  attempt INTEGER NOT NULL,
  step INTEGER NOT NULL,
  event_json TEXT NOT NULL,
  at_ms BIGINT NOT NULL);
CREATE INDEX progress_by_trial ON progress(trial_id, attempt, step);
CREATE TABLE workers (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT UNIQUE,
  host TEXT NOT NULL,
  device TEXT NOT NULL,
  device_name TEXT NOT NULL,
  device_count INTEGER NOT NULL,
  version TEXT NOT NULL,
  peak_flops_json TEXT NOT NULL,
  registered_ms BIGINT NOT NULL,
  last_heartbeat_ms BIGINT NOT NULL);
CREATE VIEW results AS
SELECT id AS trial_id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, worker_id,
       (result_json::jsonb ->> 'val_accuracy')::float8 AS val_accuracy,
       (result_json::jsonb ->> 'test_accuracy')::float8 AS test_accuracy,
       (result_json::jsonb ->> 'val_loss')::float8 AS val_loss,
       (result_json::jsonb -> 'step_time_ms' ->> 'median')::float8 AS median_step_time_ms,
       (result_json::jsonb -> 'throughput' ->> 'samples_per_s')::float8 AS throughput,
       (result_json::jsonb ->> 'mfu')::float8 AS mfu,
       (result_json::jsonb ->> 'peak_memory_mb')::float8 AS peak_memory_mb,
       (result_json::jsonb ->> 'params')::bigint AS params,
       (result_json::jsonb ->> 'threads')::int AS threads,
       finished_ms
FROM trials WHERE result_json <> '';
)sql",
    // 2: experiment completion checks find open trials without scanning finished ones.
    R"sql(
CREATE INDEX trials_open ON trials(experiment_id) WHERE state IN ('pending', 'running');
)sql",
    // 3: the results view gains the BEV task's IoU and the test loss.
    R"sql(
DROP VIEW results;
CREATE VIEW results AS
SELECT id AS trial_id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, worker_id,
       (result_json::jsonb ->> 'val_accuracy')::float8 AS val_accuracy,
       (result_json::jsonb ->> 'test_accuracy')::float8 AS test_accuracy,
       (result_json::jsonb ->> 'val_loss')::float8 AS val_loss,
       (result_json::jsonb ->> 'val_iou')::float8 AS val_iou,
       (result_json::jsonb ->> 'test_iou')::float8 AS test_iou,
       (result_json::jsonb ->> 'test_loss')::float8 AS test_loss,
       (result_json::jsonb -> 'step_time_ms' ->> 'median')::float8 AS median_step_time_ms,
       (result_json::jsonb -> 'throughput' ->> 'samples_per_s')::float8 AS throughput,
       (result_json::jsonb ->> 'mfu')::float8 AS mfu,
       (result_json::jsonb ->> 'peak_memory_mb')::float8 AS peak_memory_mb,
       (result_json::jsonb ->> 'params')::bigint AS params,
       (result_json::jsonb ->> 'threads')::int AS threads,
       finished_ms
FROM trials WHERE result_json <> '';
)sql",
    // 4: the experiment's objectives and constraints as JSON (goals_json), and
    // per-config views: aggregates over seeds (config_results) and the place
    // on the front (config_front); docs/sql-views.md.
    R"sql(
ALTER TABLE experiments ADD COLUMN goals_json TEXT NOT NULL DEFAULT '{}';
CREATE VIEW config_results AS
SELECT t.experiment_id, t.config_json, bool_or(t.is_baseline) AS is_baseline, COUNT(*) AS trials,
       COUNT(*) FILTER (WHERE t.state = 'completed') AS seeds_completed,
       COUNT(*) FILTER (WHERE t.state IN ('failed', 'diverged')) AS trials_failed,
       AVG(r.val_accuracy) AS val_accuracy, stddev_samp(r.val_accuracy) AS val_accuracy_std,
       AVG(r.test_accuracy) AS test_accuracy, stddev_samp(r.test_accuracy) AS test_accuracy_std,
       AVG(r.val_loss) AS val_loss, stddev_samp(r.val_loss) AS val_loss_std,
       AVG(r.val_iou) AS val_iou, stddev_samp(r.val_iou) AS val_iou_std,
       AVG(r.test_iou) AS test_iou, stddev_samp(r.test_iou) AS test_iou_std,
       AVG(r.test_loss) AS test_loss, stddev_samp(r.test_loss) AS test_loss_std,
       AVG(r.median_step_time_ms) AS median_step_time_ms, stddev_samp(r.median_step_time_ms) AS median_step_time_ms_std,
       AVG(r.throughput) AS throughput, stddev_samp(r.throughput) AS throughput_std,
       AVG(r.mfu) AS mfu, stddev_samp(r.mfu) AS mfu_std,
       AVG(r.peak_memory_mb) AS peak_memory_mb, stddev_samp(r.peak_memory_mb) AS peak_memory_mb_std,
       AVG(r.params) AS params
FROM trials t LEFT JOIN results r ON r.trial_id = t.id AND t.state = 'completed'
GROUP BY t.experiment_id, t.config_json;
)sql" + Migration4ConfigFrontView(SqlDialect::kPostgres),
    // 5: who submitted the experiment (a user name of the token file; '' without tokens).
    "ALTER TABLE experiments ADD COLUMN owner TEXT NOT NULL DEFAULT '';",
    // 6: external proposers (docs/proposers.md): the paused status, who
    // proposed each trial's configuration and why, and every proposer call.
    R"sql(
ALTER TABLE experiments ADD COLUMN paused TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN proposer TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN rationale TEXT NOT NULL DEFAULT '';
CREATE TABLE proposer_calls (
  seq BIGSERIAL PRIMARY KEY,
  experiment_id TEXT NOT NULL REFERENCES experiments(id),
  at_ms BIGINT NOT NULL,
  proposer TEXT NOT NULL,
  latency_ms BIGINT NOT NULL,
  asked INTEGER NOT NULL,
  accepted INTEGER NOT NULL,
  rejected INTEGER NOT NULL,
  prompt_tokens BIGINT NOT NULL,
  completion_tokens BIGINT NOT NULL,
  model_calls INTEGER NOT NULL,
  error TEXT NOT NULL);
CREATE INDEX proposer_calls_by_experiment ON proposer_calls(experiment_id, seq);
)sql",
    // 7: profile runs (`frontier profile`): re-runs of a stored trial, linked
    // to it and left out of the experiment's lists, counts and views.
    R"sql(
ALTER TABLE trials ADD COLUMN profile_of TEXT NOT NULL DEFAULT '';
CREATE INDEX trials_by_profiled ON trials(profile_of) WHERE profile_of <> '';
CREATE INDEX trials_pending_profile_runs ON trials(seq) WHERE state = 'pending' AND profile_of <> '';
)sql",
    // 8: the client's idempotency key of a submission: one experiment per (owner, submit_id).
    R"sql(
ALTER TABLE experiments ADD COLUMN submit_id TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX experiments_by_submit_id ON experiments(owner, submit_id) WHERE submit_id <> '';
)sql",
    // 9: the result views gain the inference-latency columns among their metric columns, before
    // finished_ms and config_front's own columns; CREATE OR REPLACE VIEW cannot move a column, so the
    // three views are dropped here and the current ones (result_views.h) created after the migrations.
    // A view a user built on them stops this migration (docs/sql-views.md).
    R"sql(
DROP VIEW IF EXISTS config_front;
DROP VIEW IF EXISTS config_results;
DROP VIEW IF EXISTS results;
)sql",
    // 10: the kernel lab's runs (`frontier ops optimize`, docs/kernel-lab.md) and their candidates: one
    // per name and one per source text within a run.
    R"sql(
CREATE TABLE op_runs (
  seq BIGSERIAL PRIMARY KEY,
  id TEXT UNIQUE,
  name TEXT NOT NULL UNIQUE,
  op TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL,
  owner TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL);
CREATE TABLE op_candidates (
  seq BIGSERIAL PRIMARY KEY,
  run_id TEXT NOT NULL REFERENCES op_runs(id),
  candidate TEXT NOT NULL,
  source_kind TEXT NOT NULL,
  round INTEGER NOT NULL,
  source_hash TEXT NOT NULL,
  source TEXT NOT NULL,
  outcome TEXT NOT NULL,
  speedup DOUBLE PRECISION NOT NULL,
  speedup_low DOUBLE PRECISION NOT NULL,
  speedup_high DOUBLE PRECISION NOT NULL,
  result_json TEXT NOT NULL,
  created_ms BIGINT NOT NULL);
CREATE UNIQUE INDEX op_candidates_by_name ON op_candidates(run_id, candidate);
CREATE UNIQUE INDEX op_candidates_by_source ON op_candidates(run_id, source_hash);
CREATE INDEX op_candidates_by_run ON op_candidates(run_id, seq);
)sql",
};

constexpr int kLatestSchema = static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));

constexpr const char* kTrialColumns =
    "id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, max_attempts, worker_id, "
    "lease_expires_ms, spec_json, result_json, error, created_ms, started_ms, finished_ms, proposer, "
    "rationale";
// kTrialColumns with an empty spec, for reads that do not need it.
constexpr const char* kOutcomeColumns =
    "id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, max_attempts, worker_id, "
    "lease_expires_ms, '' AS spec_json, result_json, error, created_ms, started_ms, finished_ms, proposer, "
    "rationale";

TrialRow ReadTrial(const pqxx::row& r) {
  TrialRow t;
  t.id = r[0].as<std::string>();
  t.experiment_id = r[1].as<std::string>();
  t.config_json = r[2].as<std::string>();
  t.is_baseline = r[3].as<bool>();
  t.seed = r[4].as<int64_t>();
  t.steps = r[5].as<int>();
  t.state = r[6].as<std::string>();
  t.attempt = r[7].as<int>();
  t.max_attempts = r[8].as<int>();
  t.worker_id = r[9].as<std::string>();
  t.lease_expires_ms = r[10].as<int64_t>();
  t.spec_json = r[11].as<std::string>();
  t.result_json = r[12].as<std::string>();
  t.error = r[13].as<std::string>();
  t.created_ms = r[14].as<int64_t>();
  t.started_ms = r[15].as<int64_t>();
  t.finished_ms = r[16].as<int64_t>();
  t.proposer = r[17].as<std::string>();
  t.rationale = r[18].as<std::string>();
  return t;
}

constexpr const char* kExperimentColumns =
    "id, name, state, space_yaml, source_name, created_ms, skipped_json, goals_json, owner, paused, "
    "submit_id";

ExperimentRecord ReadExperiment(const pqxx::row& r) {
  ExperimentRecord e;
  e.id = r[0].as<std::string>();
  e.name = r[1].as<std::string>();
  e.state = r[2].as<std::string>();
  e.space_yaml = r[3].as<std::string>();
  e.source_name = r[4].as<std::string>();
  e.created_ms = r[5].as<int64_t>();
  for (const auto& item : nlohmann::json::parse(r[6].as<std::string>()))
    e.skipped.push_back(item.get<std::string>());
  e.goals_json = r[7].as<std::string>();
  e.owner = r[8].as<std::string>();
  e.paused = r[9].as<std::string>();
  e.submit_id = r[10].as<std::string>();
  return e;
}

std::string Sql(const char* a, const char* columns, const char* b) { return std::string(a) + columns + b; }

constexpr const char* kOpRunColumns = "id, name, op, spec_json, state, owner, created_ms, updated_ms";

OpRunRecord ReadOpRun(const pqxx::row& r) {
  OpRunRecord run;
  run.id = r[0].as<std::string>();
  run.name = r[1].as<std::string>();
  run.op = r[2].as<std::string>();
  run.spec_json = r[3].as<std::string>();
  run.state = r[4].as<std::string>();
  run.owner = r[5].as<std::string>();
  run.created_ms = r[6].as<int64_t>();
  run.updated_ms = r[7].as<int64_t>();
  return run;
}

// "id, state" as "t.id, t.state".
std::string Qualified(const std::string& table, const std::string& columns) {
  std::string out;
  size_t from = 0;
  while (from < columns.size()) {
    size_t to = columns.find(", ", from);
    if (to == std::string::npos) to = columns.size();
    out += (out.empty() ? "" : ", ") + table + "." + columns.substr(from, to - from);
    from = to + 2;
  }
  return out;
}

std::vector<std::string> InsertTrials(pqxx::work& w, const std::string& experiment_id,
                                      std::vector<TrialRow>& trials, int64_t now_ms) {
  // The experiment row lock serializes trial numbering per experiment.
  w.exec_params("SELECT 1 FROM experiments WHERE id = $1 FOR UPDATE", experiment_id);
  int64_t next = w.exec_params1("SELECT COUNT(*) FROM trials WHERE experiment_id = $1 AND profile_of = ''",
                                experiment_id)[0]
                     .as<int64_t>();
  std::vector<std::string> ids;
  for (TrialRow& t : trials) {
    NameTrial(experiment_id, ++next, t);
    w.exec_params(
        Sql("INSERT INTO trials (", kTrialColumns,
            ") VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, '', 0, $8, '', '', $9, 0, 0, $10, $11)"),
        t.id, experiment_id, t.config_json, t.is_baseline, t.seed, t.steps, t.max_attempts, t.spec_json,
        now_ms, t.proposer, t.rationale);
    ids.push_back(t.id);
  }
  return ids;
}

// The pending trials a lease may take, `limit` of each list, locked (SKIP
// LOCKED: one another lease holds is passed over), in the order a lease takes
// them: the profile runs first, whatever their experiment's state, then the
// other pending trials of running experiments, in trial order. A profile run
// is in the first list only. LeaseSql takes one; finish_trials_and_lease one
// per completion of its batch.
std::string PendingProfileRunsSql(const char* limit) {
  return std::string(
             "SELECT seq FROM trials WHERE state = 'pending' AND profile_of <> '' ORDER BY seq LIMIT ") +
         limit + " FOR UPDATE SKIP LOCKED";
}
std::string PendingTrialsSql(const char* limit) {
  return std::string(
             "SELECT t.seq FROM trials t JOIN experiments e ON e.id = t.experiment_id "
             "WHERE t.state = 'pending' AND t.profile_of = '' AND e.state = 'running' ORDER BY t.seq "
             "LIMIT ") +
         limit + " FOR UPDATE OF t SKIP LOCKED";
}

// Leases the next pending trial to worker `worker` until `until`, started at
// `now` (parameter names), returning it.
std::string LeaseSql(const char* worker, const char* until, const char* now) {
  return std::string("UPDATE trials SET state = 'running', attempt = attempt + 1, worker_id = ") + worker +
         ", lease_expires_ms = " + until + ", started_ms = " + now + " WHERE seq = COALESCE((" +
         PendingProfileRunsSql("1") + "), (" + PendingTrialsSql("1") + ")) RETURNING " + kTrialColumns;
}

// The trials table's fillfactor (percent of each page filled at insert).
constexpr int kTrialsFillfactor = 50;

// Ends trial $5's running attempt $6: state $1, result $2, error $3, at $4.
constexpr const char* kFinishTrial =
    "UPDATE trials SET state = $1, result_json = $2, error = $3, finished_ms = $4, lease_expires_ms = 0 "
    "WHERE id = $5 AND attempt = $6 AND state = 'running'";

// Extends the lease of the trial $2 when its attempt $3 is running for worker $4.
constexpr const char* kExtendHeldLease =
    "UPDATE trials SET lease_expires_ms = GREATEST(lease_expires_ms, $1) "
    "WHERE id = $2 AND attempt = $3 AND worker_id = $4 AND state = 'running'";

// The statements of the hot path (lease, progress, completion), prepared once
// per connection: planned once instead of on every call.
void PrepareStatements(pqxx::connection& c) {
  c.prepare("get_trial", Sql("SELECT ", kTrialColumns, " FROM trials WHERE id = $1"));
  c.prepare("get_experiment", Sql("SELECT ", kExperimentColumns, " FROM experiments WHERE id = $1"));
  c.prepare("lease", LeaseSql("$1", "$2", "$3"));
  c.prepare("extend_lease", kExtendHeldLease);
  c.prepare("add_progress",
            "INSERT INTO progress (trial_id, attempt, step, event_json, at_ms) VALUES ($1, $2, $3, $4, $5)");
  // The held row is share-locked (a concurrent expiry waits, and a row it
  // changed first is read again), rewritten only when the lease needs renewing.
  c.prepare("record_progress",
            "WITH held AS (SELECT id, lease_expires_ms FROM trials "
            "WHERE id = $2 AND attempt = $3 AND worker_id = $4 AND state = 'running' FOR SHARE), "
            "renewed AS (UPDATE trials SET lease_expires_ms = $1 FROM held "
            "WHERE trials.id = held.id AND held.lease_expires_ms < $8 AND trials.lease_expires_ms < $1) "
            "INSERT INTO progress (trial_id, attempt, step, event_json, at_ms) "
            "SELECT id, $3, $5, $6, $7 FROM held");
  // The same for a batch of events, given as a JSON array (RecordProgress): the
  // held rows share-locked in id order (two batches, or a batch and the lease
  // expiry, never wait on each other in opposite orders); answers the indices
  // of the events recorded.
  c.prepare(
      "record_progress_batch",
      "WITH input AS (SELECT * FROM json_to_recordset($1::json) AS i(i INT, trial_id TEXT, attempt INT, "
      "worker_id TEXT, step INT, event_json TEXT, at_ms BIGINT, lease_until BIGINT, renew_before BIGINT)), "
      "held AS (SELECT input.*, t.lease_expires_ms FROM input JOIN trials t ON t.id = input.trial_id "
      "AND t.attempt = input.attempt AND t.worker_id = input.worker_id AND t.state = 'running' "
      "ORDER BY t.id FOR SHARE OF t), "
      "renewed AS (UPDATE trials SET lease_expires_ms = held.lease_until FROM held "
      "WHERE trials.id = held.trial_id AND held.lease_expires_ms < held.renew_before "
      "AND trials.lease_expires_ms < held.lease_until), "
      "recorded AS (INSERT INTO progress (trial_id, attempt, step, event_json, at_ms) "
      "SELECT trial_id, attempt, step, event_json, at_ms FROM held ORDER BY i) "
      "SELECT i FROM held");
  c.prepare("finish_trial", kFinishTrial);
  // Both in one statement (its two updates touch different rows: the leased
  // one was pending): the trial's columns, NULL without a lease, then the
  // number of rows finished.
  c.prepare("finish_trial_and_lease", std::string("WITH finished AS (") + kFinishTrial +
                                          " RETURNING 1), leased AS (" + LeaseSql("$7", "$8", "$9") +
                                          ") SELECT leased.*, (SELECT COUNT(*) FROM finished) "
                                          "FROM (SELECT 1) AS one LEFT JOIN leased ON true");
  // The same for a batch of completions, given as a JSON array ($2 of them): each finish as
  // finish_trial, the rows locked in id order first (as record_progress_batch's, so the two never
  // wait on each other in opposite orders); the next pending trials, in the order LeaseSql takes
  // them, leased to the batch's workers in their order, as many as there are; answers one row per
  // completion (FinishTrialsAndLease).
  c.prepare(
      "finish_trials_and_lease",
      "WITH input AS (SELECT * FROM json_to_recordset($1::json) AS i(i INT, trial_id TEXT, attempt INT, "
      "state TEXT, result_json TEXT, error TEXT, now_ms BIGINT, worker_id TEXT, lease_until BIGINT)), "
      "held AS (SELECT t.id, input.i, input.state, input.result_json, input.error, input.now_ms "
      "FROM trials t JOIN input ON t.id = input.trial_id AND t.attempt = input.attempt "
      "AND t.state = 'running' ORDER BY t.id FOR UPDATE OF t), "
      "finished AS (UPDATE trials SET state = held.state, result_json = held.result_json, "
      "error = held.error, finished_ms = held.now_ms, lease_expires_ms = 0 FROM held "
      "WHERE trials.id = held.id AND trials.state = 'running' RETURNING held.i), "
      "profile_runs AS (" +
          PendingProfileRunsSql("$2") + "), open AS (" + PendingTrialsSql("$2") +
          "), "
          "picked AS (SELECT seq, row_number() OVER (ORDER BY rank, seq) AS k FROM "
          "(SELECT seq, 0 AS rank FROM profile_runs UNION ALL SELECT seq, 1 FROM open) AS c), "
          "wanted AS (SELECT i, worker_id, now_ms, lease_until, row_number() OVER (ORDER BY i) AS k FROM "
          "input), "
          "leased AS (UPDATE trials SET state = 'running', attempt = trials.attempt + 1, "
          "worker_id = wanted.worker_id, lease_expires_ms = wanted.lease_until, started_ms = wanted.now_ms "
          "FROM picked JOIN wanted ON wanted.k = picked.k WHERE trials.seq = picked.seq "
          "RETURNING wanted.i AS leased_for, " +
          Qualified("trials", kTrialColumns) +
          ") "
          "SELECT " +
          Qualified("leased", kTrialColumns) +
          ", input.i, finished.i IS NOT NULL FROM input LEFT JOIN finished ON finished.i = input.i "
          "LEFT JOIN leased ON leased.leased_for = input.i ORDER BY input.i");
  c.prepare("fail_attempt",
            "UPDATE trials SET "
            "state = CASE WHEN $1::boolean AND attempt < max_attempts THEN 'pending' ELSE 'failed' END, "
            "finished_ms = CASE WHEN $1::boolean AND attempt < max_attempts THEN 0 ELSE $2::bigint END, "
            "error = $3, result_json = $4, lease_expires_ms = 0 "
            "WHERE id = $5 AND attempt = $6 AND state = 'running'");
  c.prepare("touch_worker", "UPDATE workers SET last_heartbeat_ms = $1 WHERE id = $2");
}

}  // namespace

// A fixed set of connections, opened on first use and reopened after a break.
// A pool that is not `synchronous` sets synchronous_commit off on its
// connections: their commits return before the WAL reaches the disk.
class PostgresStore::Pool {
 public:
  Pool(std::string url, int size, bool synchronous, bool read_only)
      : url_(std::move(url)),
        synchronous_(synchronous),
        read_only_(read_only),
        slots_(static_cast<size_t>(std::max(1, size))) {
    for (size_t i = 0; i < slots_.size(); ++i) free_.push_back(i);
  }

  // Opens every connection now (OpenMode::kServe), before any other use.
  void OpenAll() {
    for (auto& conn : slots_) {
      if (!conn) Connect(conn);
    }
  }

  // Runs `body(connection)` on a free connection; a broken connection is
  // dropped so that the next use reconnects.
  template <typename Body>
  auto With(Body&& body) {
    size_t slot;
    {
      std::unique_lock<std::mutex> lock(mu_);
      available_.wait(lock, [&] { return !free_.empty(); });
      slot = free_.back();
      free_.pop_back();
    }
    struct Release {
      Pool* pool;
      size_t slot;
      ~Release() {
        {
          std::lock_guard<std::mutex> lock(pool->mu_);
          pool->free_.push_back(slot);
        }
        pool->available_.notify_one();
      }
    } release{this, slot};
    auto& conn = slots_[slot];
    try {
      if (!conn || !conn->is_open()) Connect(conn);
      return body(*conn);
    } catch (const pqxx::broken_connection&) {
      conn.reset();
      throw;
    }
  }

 private:
  void Connect(std::unique_ptr<pqxx::connection>& conn) {
    conn = std::make_unique<pqxx::connection>(url_);
    if (!synchronous_) conn->set_variable("synchronous_commit", "off");
    if (read_only_) conn->set_variable("default_transaction_read_only", "on");
    PrepareStatements(*conn);
  }

  std::string url_;
  bool synchronous_;
  bool read_only_;  // every transaction read-only
  std::vector<std::unique_ptr<pqxx::connection>> slots_;
  std::vector<size_t> free_;
  std::mutex mu_;
  std::condition_variable available_;
};

template <typename Tx, typename Body>
auto PostgresStore::Run(Pool& pool, const char* what, Body&& body) {
  try {
    return pool.With([&](pqxx::connection& c) {
      Tx w(c);
      auto result = body(w);
      w.commit();
      return result;
    });
  } catch (const pqxx::broken_connection& e) {
    throw StoreError(std::string("PostgreSQL connection lost during ") + what + ": " + e.what());
  } catch (const pqxx::in_doubt_error& e) {
    throw StoreError(std::string("PostgreSQL commit in doubt during ") + what + ": " + e.what());
  } catch (const pqxx::failure& e) {
    throw StoreError(std::string("PostgreSQL error during ") + what + ": " + e.what());
  }
}

template <typename Body>
auto PostgresStore::InTransaction(const char* what, Body&& body) {
  return Run<pqxx::work>(*pool_, what, std::forward<Body>(body));
}

template <typename Body>
auto PostgresStore::Statement(const char* what, Body&& body) {
  return Run<pqxx::nontransaction>(*pool_, what, std::forward<Body>(body));
}

template <typename Body>
auto PostgresStore::RelaxedStatement(const char* what, Body&& body) {
  return Run<pqxx::nontransaction>(*relaxed_, what, std::forward<Body>(body));
}

// Concurrent progress events share a statement, and so do concurrent
// completions (StatementBatch): under load one statement, round trip and
// commit record many calls instead of one each (docs/deploy.md).
struct PostgresStore::QueuedProgress {
  const ProgressRow& row;
  const std::string& worker_id;
  int64_t lease_expires_ms;
  int64_t renew_before_ms;
  bool held = false;  // the answer: this attempt holds the lease, the event is recorded
  std::exception_ptr failure;
};

// A FinishTrialAndLease call's inputs and its answer.
struct PostgresStore::QueuedCompletion {
  const std::string& trial_id;
  int attempt;
  const std::string& state;
  const std::string& result_json;
  const std::string& error;
  int64_t now_ms;
  const std::string& worker_id;
  int64_t lease_until_ms;
  bool finished = false;         // the finish applied (else the caller reads why not)
  std::optional<TrialRow> next;  // the trial leased to worker_id, if any
  std::exception_ptr failure;
};

template <typename Item>
struct PostgresStore::Batched {
  StatementBatch<Item> batch;
  std::mutex mu;  // guards counts
  Batching counts;
  void Count(size_t calls) {
    std::lock_guard<std::mutex> lock(mu);
    ++counts.statements;
    counts.calls += static_cast<int64_t>(calls);
  }
  void CountFallback() {
    std::lock_guard<std::mutex> lock(mu);
    ++counts.fallbacks;
  }
  Batching Counts() {
    std::lock_guard<std::mutex> lock(mu);
    return counts;
  }
};

PostgresStore::PostgresStore(const std::string& url, int pool_size, OpenMode mode)
    : url_(url),
      pool_(std::make_unique<Pool>(url, pool_size, /*synchronous=*/true, mode == OpenMode::kReadOnly)),
      relaxed_(std::make_unique<Pool>(url, std::max(1, pool_size / 4), /*synchronous=*/false,
                                      mode == OpenMode::kReadOnly)),
      progress_(std::make_unique<Batched<QueuedProgress>>()),
      completions_(std::make_unique<Batched<QueuedCompletion>>()) {
  if (mode == OpenMode::kReadOnly) {
    const int version = InTransaction("schema check", [&](pqxx::work& w) {
      if (w.exec1("SELECT to_regclass('schema_version') IS NULL")[0].as<bool>()) return -1;
      const pqxx::result r = w.exec("SELECT version FROM schema_version");
      return r.empty() ? 0 : r[0][0].as<int>();
    });
    if (version < 0) throw StoreError("'" + url + "' is not a Frontier store (no schema_version table)");
    const std::string mismatch = SchemaMismatch(url, version, kLatestSchema);
    if (!mismatch.empty()) throw StoreError(mismatch);
    return;
  }
  InTransaction("migration", [&](pqxx::work& w) {
    w.exec("SELECT pg_advisory_xact_lock(727274)");  // one migrating coordinator at a time
    w.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
    pqxx::result r = w.exec("SELECT version FROM schema_version");
    int version = r.empty() ? 0 : r[0][0].as<int>();
    if (r.empty()) w.exec("INSERT INTO schema_version (version) VALUES (0)");
    constexpr int kLatest = kLatestSchema;
    if (version > kLatest) {
      throw StoreError("the store has schema version " + std::to_string(version) +
                       ", newer than this build's " + std::to_string(kLatest) + "; upgrade frontier");
    }
    for (; version < kLatest; ++version) w.exec(kMigrations[version]);
    w.exec_params("UPDATE schema_version SET version = $1", version);
    // The current result views (result_views.h), unless they carry its stamp already.
    const pqxx::result stamp = w.exec("SELECT obj_description(to_regclass('config_front'), 'pg_class')");
    if (stamp.empty() || stamp[0][0].is_null() ||
        stamp[0][0].as<std::string>() != ResultViewsStamp(SqlDialect::kPostgres)) {
      w.exec(ResultViewsSql(SqlDialect::kPostgres));
    }
    // A trial's row is rewritten two or three times (leased, finished, a lease renewed): half of each
    // page stays free at insert, so that the new versions land on their own page instead of extending
    // the table, which a backend does under the table's extension lock (docs/deploy.md). Pages written
    // from now on; unless set already.
    if (!w.exec1("SELECT COALESCE('fillfactor=" + std::to_string(kTrialsFillfactor) +
                 "' = ANY(reloptions), false) FROM pg_class WHERE oid = 'trials'::regclass")[0]
             .as<bool>()) {
      w.exec("ALTER TABLE trials SET (fillfactor = " + std::to_string(kTrialsFillfactor) + ")");
    }
    return 0;
  });
  if (mode == OpenMode::kServe) {
    try {
      pool_->OpenAll();
      relaxed_->OpenAll();
    } catch (const pqxx::failure& e) {
      throw StoreError(std::string("PostgreSQL: opening the coordinator's connections: ") + e.what());
    }
  }
}

PostgresStore::~PostgresStore() {
  const Batching progress = progress_->Counts(), completions = completions_->Counts();
  if (progress.statements + completions.statements > 0) {
    spdlog::info(
        "PostgreSQL store: {} progress events in {} shared statements ({} recorded one by one after a "
        "failure), {} completions in {} shared statements ({})",
        progress.calls, progress.statements, progress.fallbacks, completions.calls, completions.statements,
        completions.fallbacks);
  }
}

int PostgresStore::schema_version() {
  return InTransaction("schema_version", [](pqxx::work& w) {
    return w.exec1("SELECT version FROM schema_version")[0].as<int>();
  });
}

std::string PostgresStore::CreateExperiment(ExperimentRecord e, std::vector<TrialRow> trials,
                                            int64_t now_ms) {
  const std::string id = InTransaction("CreateExperiment", [&](pqxx::work& w) {
    const int64_t seq =
        w.exec_params1(
             "INSERT INTO experiments (name, state, space_yaml, source_name, created_ms, skipped_json, "
             "goals_json, owner, submit_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING seq",
             e.name, e.state, e.space_yaml, e.source_name, now_ms, nlohmann::json(e.skipped).dump(),
             e.goals_json, e.owner, e.submit_id)[0]
            .as<int64_t>();
    const std::string id = ExperimentIdFor(seq);
    w.exec_params("UPDATE experiments SET id = $1 WHERE seq = $2", id, seq);
    InsertTrials(w, id, trials, now_ms);
    return id;
  });
  AnalyzeAfterInsert(trials.size());
  return id;
}

std::vector<std::string> PostgresStore::AddTrials(const std::string& experiment_id,
                                                  std::vector<TrialRow> trials, int64_t now_ms) {
  std::vector<std::string> ids = InTransaction(
      "AddTrials", [&](pqxx::work& w) { return InsertTrials(w, experiment_id, trials, now_ms); });
  AnalyzeAfterInsert(trials.size());
  return ids;
}

// After a large batch of new pending trials the planner needs to know them:
// without statistics it leases by sorting every open trial of the experiment
// (a few ms per lease at 6,000 trials) instead of reading the first entry of
// the pending index. Autovacuum would analyze only a minute later.
void PostgresStore::AnalyzeAfterInsert(size_t inserted) {
  constexpr size_t kLargeBatch = 200;
  if (inserted < kLargeBatch) return;
  try {
    Statement("AnalyzeTrials", [](pqxx::nontransaction& w) { return w.exec("ANALYZE trials").empty(); });
  } catch (const StoreError& e) {
    spdlog::warn("ANALYZE trials after adding {} trials: {}", inserted, e.what());  // the trials are stored
  }
}

std::optional<ExperimentRecord> PostgresStore::GetExperiment(const std::string& id) {
  return Statement("GetExperiment", [&](pqxx::nontransaction& w) -> std::optional<ExperimentRecord> {
    const pqxx::result r = w.exec_prepared("get_experiment", id);
    if (r.empty()) return std::nullopt;
    return ReadExperiment(r[0]);
  });
}

std::optional<ExperimentRecord> PostgresStore::FindSubmittedExperiment(const std::string& owner,
                                                                       const std::string& submit_id) {
  if (submit_id.empty()) return std::nullopt;
  return Statement(
      "FindSubmittedExperiment", [&](pqxx::nontransaction& w) -> std::optional<ExperimentRecord> {
        const pqxx::result r = w.exec_params(
            Sql("SELECT ", kExperimentColumns, " FROM experiments WHERE owner = $1 AND submit_id = $2"),
            owner, submit_id);
        if (r.empty()) return std::nullopt;
        return ReadExperiment(r[0]);
      });
}

std::vector<ExperimentRecord> PostgresStore::ListExperiments(int limit) {
  return InTransaction("ListExperiments", [&](pqxx::work& w) {
    std::vector<ExperimentRecord> out;
    for (const auto& row : w.exec_params(
             Sql("SELECT ", kExperimentColumns, " FROM experiments ORDER BY seq DESC LIMIT $1"), limit)) {
      out.push_back(ReadExperiment(row));
    }
    return out;
  });
}

void PostgresStore::SetExperimentState(const std::string& id, const std::string& state) {
  InTransaction("SetExperimentState", [&](pqxx::work& w) {
    w.exec_params("UPDATE experiments SET state = $1 WHERE id = $2", state, id);
    return 0;
  });
}

void PostgresStore::SetExperimentPaused(const std::string& id, const std::string& reason) {
  InTransaction("SetExperimentPaused", [&](pqxx::work& w) {
    w.exec_params("UPDATE experiments SET paused = $1 WHERE id = $2", reason, id);
    return 0;
  });
}

void PostgresStore::AddProposerCalls(const std::vector<ProposerCallRow>& calls) {
  InTransaction("AddProposerCalls", [&](pqxx::work& w) {
    for (const ProposerCallRow& c : calls) {
      w.exec_params(
          "INSERT INTO proposer_calls (experiment_id, at_ms, proposer, latency_ms, asked, accepted, "
          "rejected, prompt_tokens, completion_tokens, model_calls, error) "
          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
          c.experiment_id, c.at_ms, c.proposer, c.latency_ms, c.asked, c.accepted, c.rejected,
          c.prompt_tokens, c.completion_tokens, c.model_calls, c.error);
    }
    return 0;
  });
}

std::vector<ProposerCallRow> PostgresStore::ListProposerCalls(const std::string& experiment_id) {
  return InTransaction("ListProposerCalls", [&](pqxx::work& w) {
    std::vector<ProposerCallRow> out;
    for (const auto& r : w.exec_params(
             "SELECT experiment_id, at_ms, proposer, latency_ms, asked, accepted, rejected, prompt_tokens, "
             "completion_tokens, model_calls, error FROM proposer_calls "
             "WHERE experiment_id = $1 ORDER BY seq",
             experiment_id)) {
      ProposerCallRow c;
      c.experiment_id = r[0].as<std::string>();
      c.at_ms = r[1].as<int64_t>();
      c.proposer = r[2].as<std::string>();
      c.latency_ms = r[3].as<int64_t>();
      c.asked = r[4].as<int>();
      c.accepted = r[5].as<int>();
      c.rejected = r[6].as<int>();
      c.prompt_tokens = r[7].as<int64_t>();
      c.completion_tokens = r[8].as<int64_t>();
      c.model_calls = r[9].as<int>();
      c.error = r[10].as<std::string>();
      out.push_back(std::move(c));
    }
    return out;
  });
}

std::vector<TrialRow> PostgresStore::ListTrials(const std::string& experiment_id) {
  return InTransaction("ListTrials", [&](pqxx::work& w) {
    std::vector<TrialRow> out;
    for (const auto& row :
         w.exec_params(Sql("SELECT ", kTrialColumns,
                           " FROM trials WHERE experiment_id = $1 AND profile_of = '' ORDER BY seq"),
                       experiment_id)) {
      out.push_back(ReadTrial(row));
    }
    return out;
  });
}

std::vector<TrialRow> PostgresStore::ListTrialOutcomes(const std::string& experiment_id) {
  return Statement("ListTrialOutcomes", [&](pqxx::nontransaction& w) {
    std::vector<TrialRow> out;
    for (const auto& row :
         w.exec_params(Sql("SELECT ", kOutcomeColumns,
                           " FROM trials WHERE experiment_id = $1 AND profile_of = '' ORDER BY seq"),
                       experiment_id)) {
      out.push_back(ReadTrial(row));
    }
    return out;
  });
}

std::optional<TrialRow> PostgresStore::GetTrial(const std::string& trial_id) {
  return Statement("GetTrial", [&](pqxx::nontransaction& w) -> std::optional<TrialRow> {
    const pqxx::result r = w.exec_prepared("get_trial", trial_id);
    if (r.empty()) return std::nullopt;
    return ReadTrial(r[0]);
  });
}

TrialCountsRow PostgresStore::CountTrials(const std::string& experiment_id) {
  return InTransaction("CountTrials", [&](pqxx::work& w) {
    TrialCountsRow c;
    for (const auto& row : w.exec_params(
             "SELECT state, COUNT(*) FROM trials WHERE experiment_id = $1 AND profile_of = '' GROUP BY state",
             experiment_id)) {
      AddToCounts(c, row[0].as<std::string>(), row[1].as<int>());
    }
    return c;
  });
}

std::vector<std::string> PostgresStore::ExperimentsReadyToComplete() {
  return InTransaction("ExperimentsReadyToComplete", [&](pqxx::work& w) {
    std::vector<std::string> out;
    for (const auto& row :
         w.exec("SELECT e.id FROM experiments e WHERE e.state = 'running' AND NOT EXISTS "
                "(SELECT 1 FROM trials t WHERE t.experiment_id = e.id "
                "AND t.state IN ('pending', 'running') AND t.profile_of = '') ORDER BY e.seq")) {
      out.push_back(row[0].as<std::string>());
    }
    return out;
  });
}

std::optional<TrialRow> PostgresStore::LeaseNextTrial(const std::string& worker_id, int64_t now_ms,
                                                      int64_t lease_ms) {
  // One statement: the row lock with SKIP LOCKED hands each pending trial to one caller.
  return Statement("LeaseNextTrial", [&](pqxx::nontransaction& w) -> std::optional<TrialRow> {
    const pqxx::result r = w.exec_prepared("lease", worker_id, now_ms + lease_ms, now_ms);
    if (r.empty()) return std::nullopt;
    return ReadTrial(r[0]);
  });
}

bool PostgresStore::ExtendLease(const std::string& trial_id, int attempt, const std::string& worker_id,
                                int64_t expires_ms) {
  return RelaxedStatement("ExtendLease", [&](pqxx::nontransaction& w) {
    return w.exec_prepared("extend_lease", expires_ms, trial_id, attempt, worker_id).affected_rows() == 1;
  });
}

// Why a conditional update of `attempt` did not apply (read after it: a trial
// found running that attempt again cannot be, attempts only grow; stale then).
Transition PostgresStore::Classify(const std::string& trial_id, int attempt, const std::string& state,
                                   const std::string& error) {
  const Transition t = TransitionFor(GetTrial(trial_id), attempt, state, error);
  return t == Transition::kApplied ? Transition::kStale : t;
}

Transition PostgresStore::FinishTrial(const std::string& trial_id, int attempt, const std::string& state,
                                      const std::string& result_json, const std::string& error,
                                      int64_t now_ms) {
  // One conditional statement; only when it does not apply is the trial read to say why.
  const bool applied = Statement("FinishTrial", [&](pqxx::nontransaction& w) {
    return w.exec_prepared("finish_trial", state, result_json, error, now_ms, trial_id, attempt)
               .affected_rows() == 1;
  });
  return applied ? Transition::kApplied : Classify(trial_id, attempt, state, "");
}

Store::FinishedAndLeased PostgresStore::FinishTrialAndLease(const std::string& trial_id, int attempt,
                                                            const std::string& state,
                                                            const std::string& result_json,
                                                            const std::string& error, int64_t now_ms,
                                                            const std::string& worker_id, int64_t lease_ms) {
  QueuedCompletion c{trial_id,  attempt,           state, result_json,  error,  now_ms,
                     worker_id, now_ms + lease_ms, false, std::nullopt, nullptr};
  completions_->batch.Add(
      c, [this](const std::vector<QueuedCompletion*>& completions) { RecordQueuedCompletions(completions); });
  if (c.failure) std::rethrow_exception(c.failure);
  FinishedAndLeased r{c.finished ? Transition::kApplied : Transition::kStale, std::move(c.next)};
  // Only when the finish did not apply is the trial read to say why.
  if (!c.finished) r.finished = Classify(trial_id, attempt, state, "");
  return r;
}

void PostgresStore::RecordQueuedCompletions(const std::vector<QueuedCompletion*>& completions) {
  // One completion: its finish and its lease in one statement, as ever.
  const auto one = [this](QueuedCompletion& c) {
    try {
      Statement("FinishTrialAndLease", [&](pqxx::nontransaction& w) {
        const pqxx::row row =
            w.exec_prepared1("finish_trial_and_lease", c.state, c.result_json, c.error, c.now_ms, c.trial_id,
                             c.attempt, c.worker_id, c.lease_until_ms, c.now_ms);
        c.finished = row[row.size() - 1].as<int64_t>() == 1;
        if (!row[0].is_null()) c.next = ReadTrial(row);
        return 0;
      });
    } catch (...) {
      c.failure = std::current_exception();
    }
  };
  if (completions.size() == 1) return one(*completions[0]);
  pqxx::result rows;
  try {
    nlohmann::json input = nlohmann::json::array();
    for (size_t i = 0; i < completions.size(); ++i) {
      const QueuedCompletion& c = *completions[i];
      input.push_back({{"i", i},
                       {"trial_id", c.trial_id},
                       {"attempt", c.attempt},
                       {"state", c.state},
                       {"result_json", c.result_json},
                       {"error", c.error},
                       {"now_ms", c.now_ms},
                       {"worker_id", c.worker_id},
                       {"lease_until", c.lease_until_ms}});
    }
    const std::string text = input.dump();  // throws on bytes that are not UTF-8
    completions_->Count(completions.size());
    rows = Statement("FinishTrialsAndLease", [&](pqxx::nontransaction& w) {
      return w.exec_prepared("finish_trials_and_lease", text, static_cast<int64_t>(completions.size()));
    });
  } catch (const std::exception& e) {
    completions_->CountFallback();
    // The statement recorded nothing, unless its commit was in doubt (the connection broke during it):
    // then a finish it applied reads as a duplicate below, and the trials it leased are never
    // answered and run again once their leases expire (an attempt each), as when a single
    // completion's commit is in doubt. Each completion on its own, so that one completion's problem
    // is its own.
    spdlog::warn("recording {} completions together failed ({}); recording them one by one",
                 completions.size(), e.what());
    for (QueuedCompletion* c : completions) one(*c);
    return;
  }
  // Committed: each row is the leased trial's columns (NULL without a lease), the completion's index,
  // whether its finish applied. (A row that cannot be read fails every completion of the batch, through
  // StatementBatch, and is not recorded again.)
  const auto columns = static_cast<pqxx::row::size_type>(rows.columns());
  for (const auto& row : rows) {
    QueuedCompletion& c = *completions.at(row[columns - 2].as<size_t>());
    c.finished = row[columns - 1].as<bool>();
    if (!row[0].is_null()) c.next = ReadTrial(row);
  }
}

Transition PostgresStore::FailAttempt(const std::string& trial_id, int attempt, const std::string& error,
                                      bool retryable, const std::string& result_json, int64_t now_ms) {
  const bool applied = Statement("FailAttempt", [&](pqxx::nontransaction& w) {
    return w.exec_prepared("fail_attempt", retryable, now_ms, error, result_json, trial_id, attempt)
               .affected_rows() == 1;
  });
  return applied ? Transition::kApplied : Classify(trial_id, attempt, "", error);
}

std::vector<TrialRow> PostgresStore::ExpireLeases(int64_t now_ms) {
  return InTransaction("ExpireLeases", [&](pqxx::work& w) {
    std::vector<TrialRow> out;
    for (const auto& row : w.exec_params(
             Sql("UPDATE trials SET "
                 "state = CASE WHEN attempt < max_attempts THEN 'pending' ELSE 'failed' END, "
                 "finished_ms = CASE WHEN attempt < max_attempts THEN 0 ELSE $1 END, "
                 "error = 'lease expired (attempt ' || attempt || ' of ' || max_attempts || ', worker ' || "
                 "worker_id || ')', lease_expires_ms = 0 "
                 "WHERE state = 'running' AND lease_expires_ms < $1 RETURNING ",
                 kTrialColumns, ""),
             now_ms)) {
      out.push_back(ReadTrial(row));
    }
    return out;
  });
}

void PostgresStore::ExtendAllLeases(int64_t expires_ms) {
  InTransaction("ExtendAllLeases", [&](pqxx::work& w) {
    w.exec_params(
        "UPDATE trials SET lease_expires_ms = GREATEST(lease_expires_ms, $1) WHERE state = 'running'",
        expires_ms);
    return 0;
  });
}

void PostgresStore::CancelPendingTrials(const std::string& experiment_id, int64_t now_ms) {
  InTransaction("CancelPendingTrials", [&](pqxx::work& w) {
    w.exec_params(
        "UPDATE trials SET state = 'cancelled', error = 'experiment cancelled', finished_ms = $1 "
        "WHERE experiment_id = $2 AND state = 'pending'",
        now_ms, experiment_id);
    return 0;
  });
}

void PostgresStore::AddProgress(const ProgressRow& row) {
  RelaxedStatement("AddProgress", [&](pqxx::nontransaction& w) {
    w.exec_prepared("add_progress", row.trial_id, row.attempt, row.step, row.event_json, row.at_ms);
    return 0;
  });
}

bool PostgresStore::RecordProgress(const ProgressRow& row, const std::string& worker_id,
                                   int64_t lease_expires_ms, int64_t renew_before_ms) {
  QueuedProgress event{row, worker_id, lease_expires_ms, renew_before_ms, false, nullptr};
  progress_->batch.Add(event,
                       [this](const std::vector<QueuedProgress*>& events) { RecordQueuedProgress(events); });
  if (event.failure) std::rethrow_exception(event.failure);
  return event.held;
}

void PostgresStore::RecordQueuedProgress(const std::vector<QueuedProgress*>& events) {
  // One event: the lease update and the insert commit together or not at all.
  const auto one = [this](QueuedProgress& e) {
    try {
      e.held = RelaxedStatement("RecordProgress", [&](pqxx::nontransaction& w) {
        return w.exec_prepared("record_progress", e.lease_expires_ms, e.row.trial_id, e.row.attempt,
                               e.worker_id, e.row.step, e.row.event_json, e.row.at_ms, e.renew_before_ms)
                   .affected_rows() == 1;
      });
    } catch (...) {
      e.failure = std::current_exception();
    }
  };
  if (events.size() == 1) return one(*events[0]);
  nlohmann::json input = nlohmann::json::array();
  for (size_t i = 0; i < events.size(); ++i) {
    const QueuedProgress& e = *events[i];
    input.push_back({{"i", i},
                     {"trial_id", e.row.trial_id},
                     {"attempt", e.row.attempt},
                     {"worker_id", e.worker_id},
                     {"step", e.row.step},
                     {"event_json", e.row.event_json},
                     {"at_ms", e.row.at_ms},
                     {"lease_until", e.lease_expires_ms},
                     {"renew_before", e.renew_before_ms}});
  }
  progress_->Count(events.size());
  try {
    const pqxx::result held = RelaxedStatement("RecordProgress", [&](pqxx::nontransaction& w) {
      return w.exec_prepared("record_progress_batch", input.dump());
    });
    for (const auto& r : held) events.at(r[0].as<size_t>())->held = true;
  } catch (const std::exception& e) {  // a StoreError, or bytes that are not UTF-8 (json's dump)
    progress_->CountFallback();
    // The statement recorded nothing (unless its commit was in doubt, when an event may be recorded
    // twice, as when a worker retries): each event on its own, so that one event's problem is its own.
    spdlog::warn("recording {} progress events together failed ({}); recording them one by one",
                 events.size(), e.what());
    for (QueuedProgress* event : events) one(*event);
  }
}

PostgresStore::Batching PostgresStore::progress_batching() { return progress_->Counts(); }

PostgresStore::Batching PostgresStore::completion_batching() { return completions_->Counts(); }

std::vector<ProgressRow> PostgresStore::ListProgress(const std::string& trial_id) {
  return InTransaction("ListProgress", [&](pqxx::work& w) {
    std::vector<ProgressRow> out;
    for (const auto& r : w.exec_params("SELECT trial_id, attempt, step, event_json, at_ms FROM progress "
                                       "WHERE trial_id = $1 ORDER BY attempt, step, ctid",
                                       trial_id)) {
      out.push_back({r[0].as<std::string>(), r[1].as<int>(), r[2].as<int>(), r[3].as<std::string>(),
                     r[4].as<int64_t>()});
    }
    return out;
  });
}

std::string PostgresStore::AddProfileRun(const std::string& trial_id, TrialRow run, int64_t now_ms) {
  return InTransaction("AddProfileRun", [&](pqxx::work& w) {
    // The trial's row lock serializes the numbering of its runs.
    const pqxx::result r =
        w.exec_params(Sql("SELECT ", kTrialColumns, " FROM trials WHERE id = $1 FOR UPDATE"), trial_id);
    if (r.empty()) throw StoreError("no trial '" + trial_id + "'");
    const TrialRow trial = ReadTrial(r[0]);
    const int64_t runs =
        w.exec_params1("SELECT COUNT(*) FROM trials WHERE profile_of = $1", trial_id)[0].as<int64_t>();
    NameProfileRun(trial_id, runs + 1, run);
    w.exec_params(
        Sql("INSERT INTO trials (", kTrialColumns,
            ", profile_of) VALUES ($1, $2, $3, $4, $5, $6, 'pending', 0, $7, '', 0, $8, '', '', $9, 0, 0, "
            "$10, $11, $12)"),
        run.id, trial.experiment_id, trial.config_json, trial.is_baseline, trial.seed, trial.steps,
        run.max_attempts, run.spec_json, now_ms, run.proposer, run.rationale, trial_id);
    return run.id;
  });
}

std::vector<TrialRow> PostgresStore::ListProfileRuns(const std::string& trial_id) {
  return Statement("ListProfileRuns", [&](pqxx::nontransaction& w) {
    std::vector<TrialRow> out;
    for (const auto& row : w.exec_params(
             Sql("SELECT ", kTrialColumns, " FROM trials WHERE profile_of = $1 ORDER BY seq"), trial_id)) {
      out.push_back(ReadTrial(row));
    }
    return out;
  });
}

std::string PostgresStore::CreateOpRun(OpRunRecord run) {
  if (run.name.empty() || IsOpRunId(run.name)) {
    throw StoreError("op run name '" + run.name + "' refused: a name must be non-empty and not an op run id");
  }
  if (run.state.empty()) run.state = op_run_state::kRunning;
  if (run.updated_ms == 0) run.updated_ms = run.created_ms;
  return InTransaction("CreateOpRun", [&](pqxx::work& w) {
    // A clear message for the usual case; the unique index refuses a concurrent twin.
    const pqxx::result taken = w.exec_params("SELECT id FROM op_runs WHERE name = $1", run.name);
    if (!taken.empty()) {
      throw StoreError("an op run named '" + run.name + "' exists already (" + taken[0][0].as<std::string>() +
                       ")");
    }
    const int64_t seq =
        w.exec_params1(
             "INSERT INTO op_runs (name, op, spec_json, state, owner, created_ms, updated_ms) "
             "VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq",
             run.name, run.op, run.spec_json, run.state, run.owner, run.created_ms, run.updated_ms)[0]
            .as<int64_t>();
    const std::string id = OpRunIdFor(seq);
    w.exec_params("UPDATE op_runs SET id = $1 WHERE seq = $2", id, seq);
    return id;
  });
}

std::optional<OpRunRecord> PostgresStore::FindOpRun(const std::string& id_or_name) {
  return Statement("FindOpRun", [&](pqxx::nontransaction& w) -> std::optional<OpRunRecord> {
    const pqxx::result r =
        w.exec_params(Sql("SELECT ", kOpRunColumns,
                          " FROM op_runs WHERE id = $1 OR name = $1 ORDER BY id = $1 DESC LIMIT 1"),
                      id_or_name);
    if (r.empty()) return std::nullopt;
    return ReadOpRun(r[0]);
  });
}

std::vector<OpRunRecord> PostgresStore::ListOpRuns(int limit) {
  return Statement("ListOpRuns", [&](pqxx::nontransaction& w) {
    std::vector<OpRunRecord> out;
    for (const auto& row :
         w.exec_params(Sql("SELECT ", kOpRunColumns, " FROM op_runs ORDER BY seq DESC LIMIT $1"), limit)) {
      out.push_back(ReadOpRun(row));
    }
    return out;
  });
}

void PostgresStore::SetOpRunState(const std::string& id, const std::string& state, int64_t now_ms) {
  Statement("SetOpRunState", [&](pqxx::nontransaction& w) {
    w.exec_params("UPDATE op_runs SET state = $1, updated_ms = $2 WHERE id = $3", state, now_ms, id);
    return 0;
  });
}

bool PostgresStore::RecordOpCandidate(const OpCandidateRow& c) {
  // One statement on the synchronous pool: durable when it returns.
  return Statement("RecordOpCandidate", [&](pqxx::nontransaction& w) {
    return w.exec_params(
                "INSERT INTO op_candidates (run_id, candidate, source_kind, round, source_hash, source, "
                "outcome, speedup, speedup_low, speedup_high, result_json, created_ms) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT DO NOTHING",
                c.run_id, c.candidate, c.source_kind, c.round, c.source_hash, c.source, c.outcome, c.speedup,
                c.speedup_low, c.speedup_high, c.result_json, c.created_ms)
               .affected_rows() == 1;
  });
}

std::vector<OpCandidateRow> PostgresStore::ListOpCandidates(const std::string& run_id) {
  return Statement("ListOpCandidates", [&](pqxx::nontransaction& w) {
    std::vector<OpCandidateRow> out;
    for (const auto& r :
         w.exec_params("SELECT run_id, candidate, source_kind, round, source_hash, source, outcome, speedup, "
                       "speedup_low, speedup_high, result_json, created_ms FROM op_candidates "
                       "WHERE run_id = $1 ORDER BY seq",
                       run_id)) {
      OpCandidateRow c;
      c.run_id = r[0].as<std::string>();
      c.candidate = r[1].as<std::string>();
      c.source_kind = r[2].as<std::string>();
      c.round = r[3].as<int>();
      c.source_hash = r[4].as<std::string>();
      c.source = r[5].as<std::string>();
      c.outcome = r[6].as<std::string>();
      c.speedup = r[7].as<double>();
      c.speedup_low = r[8].as<double>();
      c.speedup_high = r[9].as<double>();
      c.result_json = r[10].as<std::string>();
      c.created_ms = r[11].as<int64_t>();
      out.push_back(std::move(c));
    }
    return out;
  });
}

std::string PostgresStore::RegisterWorker(WorkerRecord wr, int64_t now_ms) {
  return InTransaction("RegisterWorker", [&](pqxx::work& w) {
    const int64_t seq =
        w.exec_params1(
             "INSERT INTO workers (host, device, device_name, device_count, version, peak_flops_json, "
             "registered_ms, "
             "last_heartbeat_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING seq",
             wr.host, wr.device, wr.device_name, wr.device_count, wr.version, wr.peak_flops_json, now_ms)[0]
            .as<int64_t>();
    const std::string id = WorkerIdFor(seq);
    w.exec_params("UPDATE workers SET id = $1 WHERE seq = $2", id, seq);
    return id;
  });
}

bool PostgresStore::TouchWorker(const std::string& worker_id, int64_t now_ms) {
  return RelaxedStatement("TouchWorker", [&](pqxx::nontransaction& w) {
    return w.exec_prepared("touch_worker", now_ms, worker_id).affected_rows() == 1;
  });
}

std::vector<WorkerRecord> PostgresStore::ListWorkers() {
  return InTransaction("ListWorkers", [&](pqxx::work& w) {
    std::vector<WorkerRecord> out;
    for (const auto& r :
         w.exec("SELECT id, host, device, device_name, version, device_count, peak_flops_json, "
                "registered_ms, last_heartbeat_ms FROM workers ORDER BY seq")) {
      WorkerRecord wr;
      wr.id = r[0].as<std::string>();
      wr.host = r[1].as<std::string>();
      wr.device = r[2].as<std::string>();
      wr.device_name = r[3].as<std::string>();
      wr.version = r[4].as<std::string>();
      wr.device_count = r[5].as<int>();
      wr.peak_flops_json = r[6].as<std::string>();
      wr.registered_ms = r[7].as<int64_t>();
      wr.last_heartbeat_ms = r[8].as<int64_t>();
      out.push_back(wr);
    }
    return out;
  });
}

}  // namespace frontier
