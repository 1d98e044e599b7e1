#include "server/store/sqlite_store.h"

#include <sqlite3.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "server/store/result_views.h"

namespace frontier {

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

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) Fail("prepare");
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int i, const std::string& v) {
    Check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT), "bind");
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    Check(sqlite3_bind_int64(stmt_, i, v), "bind");
    return *this;
  }
  Statement& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  Statement& Bind(int i, bool v) { return Bind(i, static_cast<int64_t>(v)); }
  Statement& Bind(int i, const char* v) { return Bind(i, std::string(v)); }
  Statement& Bind(int i, double v) {
    Check(sqlite3_bind_double(stmt_, i, v), "bind");
    return *this;
  }

  // True while rows come; false when done.
  bool Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    Fail("step");
  }
  void Run() {
    while (Step()) {
    }
  }
  std::string Text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  int Changes() const { return sqlite3_changes(db_); }

 private:
  void Check(int rc, const char* what) {
    if (rc != SQLITE_OK) Fail(what);
  }
  [[noreturn]] void Fail(const char* what) {
    throw StoreError(std::string("sqlite ") + what + ": " + sqlite3_errmsg(db_));
  }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

void Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = err ? err : "unknown error";
    sqlite3_free(err);
    throw StoreError("sqlite: " + message);
  }
}

constexpr const char* kTrialColumns =
    "id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, max_attempts, worker_id, "
    "lease_expires_ms, spec_json, result_json, error, created_ms, started_ms, finished_ms, proposer, "
    "rationale";
// kTrialColumns with an empty spec, for reads that do not need it.
constexpr const char* kOutcomeColumns =
    "id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, max_attempts, worker_id, "
    "lease_expires_ms, '' AS spec_json, result_json, error, created_ms, started_ms, finished_ms, proposer, "
    "rationale";

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

constexpr const char* kExperimentColumns =
    "id, name, state, space_yaml, source_name, created_ms, skipped_json, goals_json, owner, paused, "
    "submit_id";

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

std::string Sql(const std::string& a, const char* b, const std::string& c = "") { return a + b + c; }

constexpr const char* kOpRunColumns = "id, name, op, spec_json, state, owner, created_ms, updated_ms";

OpRunRecord ReadOpRun(const Statement& s) {
  OpRunRecord r;
  r.id = s.Text(0);
  r.name = s.Text(1);
  r.op = s.Text(2);
  r.spec_json = s.Text(3);
  r.state = s.Text(4);
  r.owner = s.Text(5);
  r.created_ms = s.Int(6);
  r.updated_ms = s.Int(7);
  return r;
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

// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted.
class SqliteStore::Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { Exec(db_, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void Commit() {
    Exec(db_, "COMMIT");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  bool committed_ = false;
};

namespace {

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
  constexpr int kLatest = kLatestSchema;
  if (version > kLatest) {
    throw StoreError("the store has schema version " + std::to_string(version) +
                     ", newer than this build's " + std::to_string(kLatest) + "; upgrade frontier");
  }
  for (; version < kLatest; ++version) Exec(db_, kMigrations[version].c_str());
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

std::string SqliteStore::CreateOpRun(OpRunRecord run) {
  if (run.name.empty() || IsOpRunId(run.name)) {
    throw StoreError("op run name '" + run.name + "' refused: a name must be non-empty and not an op run id");
  }
  if (run.state.empty()) run.state = op_run_state::kRunning;
  if (run.updated_ms == 0) run.updated_ms = run.created_ms;
  std::lock_guard<std::mutex> lock(mu_);
  Transaction tx(db_);
  {
    Statement taken(db_, "SELECT id FROM op_runs WHERE name = ?");
    taken.Bind(1, run.name);
    if (taken.Step())
      throw StoreError("an op run named '" + run.name + "' exists already (" + taken.Text(0) + ")");
  }
  Statement(db_,
            "INSERT INTO op_runs (name, op, spec_json, state, owner, created_ms, updated_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)")
      .Bind(1, run.name)
      .Bind(2, run.op)
      .Bind(3, run.spec_json)
      .Bind(4, run.state)
      .Bind(5, run.owner)
      .Bind(6, run.created_ms)
      .Bind(7, run.updated_ms)
      .Run();
  const int64_t seq = sqlite3_last_insert_rowid(db_);
  const std::string id = OpRunIdFor(seq);
  Statement(db_, "UPDATE op_runs SET id = ? WHERE seq = ?").Bind(1, id).Bind(2, seq).Run();
  tx.Commit();
  return id;
}

std::optional<OpRunRecord> SqliteStore::FindOpRun(const std::string& id_or_name) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, Sql("SELECT ", kOpRunColumns,
                       " FROM op_runs WHERE id = ?1 OR name = ?1 ORDER BY id = ?1 DESC LIMIT 1")
                       .c_str());
  s.Bind(1, id_or_name);
  if (!s.Step()) return std::nullopt;
  return ReadOpRun(s);
}

std::vector<OpRunRecord> SqliteStore::ListOpRuns(int limit) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_, Sql("SELECT ", kOpRunColumns, " FROM op_runs ORDER BY seq DESC LIMIT ?").c_str());
  s.Bind(1, limit);
  std::vector<OpRunRecord> out;
  while (s.Step()) out.push_back(ReadOpRun(s));
  return out;
}

void SqliteStore::SetOpRunState(const std::string& id, const std::string& state, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement(db_, "UPDATE op_runs SET state = ?, updated_ms = ? WHERE id = ?")
      .Bind(1, state)
      .Bind(2, now_ms)
      .Bind(3, id)
      .Run();
}

bool SqliteStore::RecordOpCandidate(const OpCandidateRow& c) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(
      db_,
      "INSERT INTO op_candidates (run_id, candidate, source_kind, round, source_hash, source, outcome, "
      "speedup, speedup_low, speedup_high, result_json, created_ms) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING");
  s.Bind(1, c.run_id).Bind(2, c.candidate).Bind(3, c.source_kind).Bind(4, c.round).Bind(5, c.source_hash);
  s.Bind(6, c.source).Bind(7, c.outcome).Bind(8, c.speedup).Bind(9, c.speedup_low).Bind(10, c.speedup_high);
  s.Bind(11, c.result_json).Bind(12, c.created_ms).Run();
  return s.Changes() == 1;
}

std::vector<OpCandidateRow> SqliteStore::ListOpCandidates(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(
      db_,
      "SELECT run_id, candidate, source_kind, round, source_hash, source, outcome, speedup, speedup_low, "
      "speedup_high, result_json, created_ms FROM op_candidates WHERE run_id = ? ORDER BY seq");
  s.Bind(1, run_id);
  std::vector<OpCandidateRow> out;
  while (s.Step()) {
    OpCandidateRow c;
    c.run_id = s.Text(0);
    c.candidate = s.Text(1);
    c.source_kind = s.Text(2);
    c.round = static_cast<int>(s.Int(3));
    c.source_hash = s.Text(4);
    c.source = s.Text(5);
    c.outcome = s.Text(6);
    c.speedup = s.Double(7);
    c.speedup_low = s.Double(8);
    c.speedup_high = s.Double(9);
    c.result_json = s.Text(10);
    c.created_ms = s.Int(11);
    out.push_back(std::move(c));
  }
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
