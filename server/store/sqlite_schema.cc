// The SQLite store's schema and its opening: the versioned migrations, the
// constructor (a file opened read-write and migrated, or read-only with its
// schema checked), Migrate (then the current result views), CheckSchema,
// schema_version.
#include <sqlite3.h>

#include <cstdio>

#include "server/store/result_views.h"
#include "server/store/sql_store_common.h"
#include "server/store/sqlite_internal.h"
#include "server/store/sqlite_store.h"

namespace frontier {

using sqlite_internal::Exec;
using sqlite_internal::Statement;

namespace {

// Versioned schema: migration i brings the schema from version i to i + 1.
const std::string kMigrations[] = {
    R"sql(
CREATE TABLE experiments (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE,
  name TEXT NOT NULL,
  state TEXT NOT NULL,
  space_yaml TEXT NOT NULL,
  source_name TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  skipped_json TEXT NOT NULL DEFAULT '[]');
CREATE TABLE trials (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE,
  experiment_id TEXT NOT NULL REFERENCES experiments(id),
  config_json TEXT NOT NULL,
  is_baseline INTEGER NOT NULL,
  seed INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  state TEXT NOT NULL,
  attempt INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL,
  worker_id TEXT NOT NULL DEFAULT '',
  lease_expires_ms INTEGER NOT NULL DEFAULT 0,
  spec_json TEXT NOT NULL,
  result_json TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL,
  started_ms INTEGER NOT NULL DEFAULT 0,
  finished_ms INTEGER NOT NULL DEFAULT 0);
CREATE INDEX trials_by_experiment ON trials(experiment_id, seq);
CREATE INDEX trials_by_state ON trials(state, seq);
CREATE TABLE progress (
  trial_id TEXT NOT NULL REFERENCES trials(id),
  attempt INTEGER NOT NULL,
  step INTEGER NOT NULL,
  event_json TEXT NOT NULL,
  at_ms INTEGER NOT NULL);
CREATE INDEX progress_by_trial ON progress(trial_id, attempt, step);
CREATE TABLE workers (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE,
  host TEXT NOT NULL,
  device TEXT NOT NULL,
  device_name TEXT NOT NULL,
  device_count INTEGER NOT NULL,
  version TEXT NOT NULL,
  peak_flops_json TEXT NOT NULL,
  registered_ms INTEGER NOT NULL,
  last_heartbeat_ms INTEGER NOT NULL);
-- Final metrics, one row per trial with a result, for SQL users and dashboards.
CREATE VIEW results AS
SELECT id AS trial_id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, worker_id,
       json_extract(result_json, '$.val_accuracy') AS val_accuracy,
       json_extract(result_json, '$.test_accuracy') AS test_accuracy,
       json_extract(result_json, '$.val_loss') AS val_loss,
       json_extract(result_json, '$.step_time_ms.median') AS median_step_time_ms,
       json_extract(result_json, '$.throughput.samples_per_s') AS throughput,
       json_extract(result_json, '$.mfu') AS mfu,
       json_extract(result_json, '$.peak_memory_mb') AS peak_memory_mb,
       json_extract(result_json, '$.params') AS params,
       json_extract(result_json, '$.threads') AS threads,
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
       json_extract(result_json, '$.val_accuracy') AS val_accuracy,
       json_extract(result_json, '$.test_accuracy') AS test_accuracy,
       json_extract(result_json, '$.val_loss') AS val_loss,
       json_extract(result_json, '$.val_iou') AS val_iou,
       json_extract(result_json, '$.test_iou') AS test_iou,
       json_extract(result_json, '$.test_loss') AS test_loss,
       json_extract(result_json, '$.step_time_ms.median') AS median_step_time_ms,
       json_extract(result_json, '$.throughput.samples_per_s') AS throughput,
       json_extract(result_json, '$.mfu') AS mfu,
       json_extract(result_json, '$.peak_memory_mb') AS peak_memory_mb,
       json_extract(result_json, '$.params') AS params,
       json_extract(result_json, '$.threads') AS threads,
       finished_ms
FROM trials WHERE result_json <> '';
)sql",
    // 4: the experiment's objectives and constraints as JSON (goals_json), and
    // per-config views: aggregates over seeds (config_results) and the place
    // on the front (config_front); docs/sql-views.md.
    R"sql(
ALTER TABLE experiments ADD COLUMN goals_json TEXT NOT NULL DEFAULT '{}';
CREATE VIEW config_results AS
SELECT t.experiment_id, t.config_json, MAX(t.is_baseline) AS is_baseline, COUNT(*) AS trials,
       SUM(t.state = 'completed') AS seeds_completed,
       SUM(t.state IN ('failed', 'diverged')) AS trials_failed,
       AVG(r.val_accuracy) AS val_accuracy, sqrt(max(0.0, (SUM(r.val_accuracy * r.val_accuracy) - SUM(r.val_accuracy) * SUM(r.val_accuracy) / COUNT(r.val_accuracy)) / (COUNT(r.val_accuracy) - 1))) AS val_accuracy_std,
       AVG(r.test_accuracy) AS test_accuracy, sqrt(max(0.0, (SUM(r.test_accuracy * r.test_accuracy) - SUM(r.test_accuracy) * SUM(r.test_accuracy) / COUNT(r.test_accuracy)) / (COUNT(r.test_accuracy) - 1))) AS test_accuracy_std,
       AVG(r.val_loss) AS val_loss, sqrt(max(0.0, (SUM(r.val_loss * r.val_loss) - SUM(r.val_loss) * SUM(r.val_loss) / COUNT(r.val_loss)) / (COUNT(r.val_loss) - 1))) AS val_loss_std,
       AVG(r.val_iou) AS val_iou, sqrt(max(0.0, (SUM(r.val_iou * r.val_iou) - SUM(r.val_iou) * SUM(r.val_iou) / COUNT(r.val_iou)) / (COUNT(r.val_iou) - 1))) AS val_iou_std,
       AVG(r.test_iou) AS test_iou, sqrt(max(0.0, (SUM(r.test_iou * r.test_iou) - SUM(r.test_iou) * SUM(r.test_iou) / COUNT(r.test_iou)) / (COUNT(r.test_iou) - 1))) AS test_iou_std,
       AVG(r.test_loss) AS test_loss, sqrt(max(0.0, (SUM(r.test_loss * r.test_loss) - SUM(r.test_loss) * SUM(r.test_loss) / COUNT(r.test_loss)) / (COUNT(r.test_loss) - 1))) AS test_loss_std,
       AVG(r.median_step_time_ms) AS median_step_time_ms, sqrt(max(0.0, (SUM(r.median_step_time_ms * r.median_step_time_ms) - SUM(r.median_step_time_ms) * SUM(r.median_step_time_ms) / COUNT(r.median_step_time_ms)) / (COUNT(r.median_step_time_ms) - 1))) AS median_step_time_ms_std,
       AVG(r.throughput) AS throughput, sqrt(max(0.0, (SUM(r.throughput * r.throughput) - SUM(r.throughput) * SUM(r.throughput) / COUNT(r.throughput)) / (COUNT(r.throughput) - 1))) AS throughput_std,
       AVG(r.mfu) AS mfu, sqrt(max(0.0, (SUM(r.mfu * r.mfu) - SUM(r.mfu) * SUM(r.mfu) / COUNT(r.mfu)) / (COUNT(r.mfu) - 1))) AS mfu_std,
       AVG(r.peak_memory_mb) AS peak_memory_mb, sqrt(max(0.0, (SUM(r.peak_memory_mb * r.peak_memory_mb) - SUM(r.peak_memory_mb) * SUM(r.peak_memory_mb) / COUNT(r.peak_memory_mb)) / (COUNT(r.peak_memory_mb) - 1))) AS peak_memory_mb_std,
       AVG(r.params) AS params
FROM trials t LEFT JOIN results r ON r.trial_id = t.id AND t.state = 'completed'
GROUP BY t.experiment_id, t.config_json;
)sql" + Migration4ConfigFrontView(SqlDialect::kSqlite),
    // 5: who submitted the experiment (a user name of the token file; '' without tokens).
    "ALTER TABLE experiments ADD COLUMN owner TEXT NOT NULL DEFAULT '';",
    // 6: external proposers (docs/proposers.md): the paused status, who
    // proposed each trial's configuration and why, and every proposer call.
    R"sql(
ALTER TABLE experiments ADD COLUMN paused TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN proposer TEXT NOT NULL DEFAULT '';
ALTER TABLE trials ADD COLUMN rationale TEXT NOT NULL DEFAULT '';
CREATE TABLE proposer_calls (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  experiment_id TEXT NOT NULL REFERENCES experiments(id),
  at_ms INTEGER NOT NULL,
  proposer TEXT NOT NULL,
  latency_ms INTEGER NOT NULL,
  asked INTEGER NOT NULL,
  accepted INTEGER NOT NULL,
  rejected INTEGER NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  completion_tokens INTEGER NOT NULL,
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
    // 9: the kernel lab's runs (`frontier ops optimize`, docs/kernel-lab.md) and their candidates: one
    // per name and one per source text within a run.
    R"sql(
CREATE TABLE op_runs (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE,
  name TEXT NOT NULL UNIQUE,
  op TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL,
  owner TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL);
CREATE TABLE op_candidates (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id TEXT NOT NULL REFERENCES op_runs(id),
  candidate TEXT NOT NULL,
  source_kind TEXT NOT NULL,
  round INTEGER NOT NULL,
  source_hash TEXT NOT NULL,
  source TEXT NOT NULL,
  outcome TEXT NOT NULL,
  speedup REAL NOT NULL,
  speedup_low REAL NOT NULL,
  speedup_high REAL NOT NULL,
  result_json TEXT NOT NULL,
  created_ms INTEGER NOT NULL);
CREATE UNIQUE INDEX op_candidates_by_name ON op_candidates(run_id, candidate);
CREATE UNIQUE INDEX op_candidates_by_source ON op_candidates(run_id, source_hash);
CREATE INDEX op_candidates_by_run ON op_candidates(run_id, seq);
)sql",
};

constexpr int kLatestSchema = static_cast<int>(sizeof(kMigrations) / sizeof(kMigrations[0]));

sqlite3* OpenSqlite(const std::string& file, int flags, const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    const std::string message = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw StoreError("cannot open SQLite store '" + path + "': " + message);
  }
  sqlite3_busy_timeout(db, 10000);
  return db;
}

// A file: URI for `path` with `query` (the path's '%', '?' and '#' escaped).
std::string SqliteUri(const std::string& path, const std::string& query) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
      uri += escaped;
    } else {
      uri += c;
    }
  }
  return uri + "?" + query;
}

// False when a first read fails because the WAL index cannot be opened read-only.
bool WalReadable(sqlite3* db) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM sqlite_master", -1, &stmt, nullptr);
  if (rc == SQLITE_OK) rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  return (rc & 0xff) != SQLITE_CANTOPEN && (rc & 0xff) != SQLITE_READONLY;
}

}  // namespace

SqliteStore::SqliteStore(const std::string& path, OpenMode mode) {
  if (mode != OpenMode::kReadOnly) {
    db_ = OpenSqlite(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, path);
    Exec(db_, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;");
    Migrate();
    return;
  }
  db_ = OpenSqlite(SqliteUri(path, "mode=ro"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, path);
  if (!WalReadable(db_)) {
    // A WAL file in a folder where its -shm cannot be created: no coordinator
    // can be writing it there (it could not create its -wal), so it is read
    // as immutable.
    sqlite3_close(db_);
    db_ = OpenSqlite(SqliteUri(path, "mode=ro&immutable=1"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, path);
  }
  CheckSchema(path);
}

void SqliteStore::CheckSchema(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  bool frontier_store = false;
  {
    Statement s(db_, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
    frontier_store = s.Step();
  }
  int version = 0;
  if (frontier_store) {
    Statement s(db_, "SELECT version FROM schema_version");
    if (s.Step()) version = static_cast<int>(s.Int(0));
  }
  if (!frontier_store) {
    throw StoreError("'" + path + "' is not a Frontier store (no schema_version table)");
  }
  const std::string mismatch = SchemaMismatch(path, version, kLatestSchema);
  if (!mismatch.empty()) throw StoreError(mismatch);
}

SqliteStore::~SqliteStore() { sqlite3_close(db_); }

void SqliteStore::Migrate() {
  std::lock_guard<std::mutex> lock(mu_);
  Exec(db_, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
  Transaction tx(db_);
  int version = 0;
  {
    Statement s(db_, "SELECT version FROM schema_version");
    if (s.Step()) {
      version = static_cast<int>(s.Int(0));
    } else {
      Statement(db_, "INSERT INTO schema_version (version) VALUES (0)").Run();
    }
  }
  sql_store::RefuseNewerSchema(version, kLatestSchema);
  for (; version < kLatestSchema; ++version) Exec(db_, kMigrations[version].c_str());
  Statement(db_, "UPDATE schema_version SET version = ?").Bind(1, version).Run();
  // The current result views (result_views.h), unless they carry its stamp already.
  const std::string stamp = ResultViewsStamp(SqlDialect::kSqlite);
  bool current = false;
  {
    Statement s(db_, "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'config_front'");
    current = s.Step() && s.Text(0).find(stamp) != std::string::npos;
  }
  if (!current) {
    Exec(db_, ("DROP VIEW IF EXISTS config_front; DROP VIEW IF EXISTS config_results; DROP VIEW IF EXISTS "
               "results;\n" +
               ResultViewsSql(SqlDialect::kSqlite))
                  .c_str());
  }
  tx.Commit();
}

int SqliteStore::schema_version() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, "SELECT version FROM schema_version");
  return s.Step() ? static_cast<int>(s.Int(0)) : 0;
}

}  // namespace frontier
