// The PostgreSQL store's schema and its opening: the versioned migrations,
// the constructor (a read-only store's schema check, or the migration under an
// advisory lock, then the current result views and the trials table's
// fillfactor; kServe opens every connection), the destructor's summary of the
// shared statements, schema_version.
#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include "server/store/postgres_internal.h"
#include "server/store/postgres_store.h"
#include "server/store/result_views.h"
#include "server/store/sql_store_common.h"

namespace frontier {
namespace {

// Versioned schema: migration i brings the schema from version i to i + 1.
// The same tables and `results` view as the SQLite store.
const std::string kPostgresMigrations[] = {
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

constexpr int kLatestPostgresSchema =
    static_cast<int>(sizeof(kPostgresMigrations) / sizeof(kPostgresMigrations[0]));

// The trials table's fillfactor (percent of each page filled at insert).
constexpr int kTrialsFillfactor = 50;

}  // namespace

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
    const std::string mismatch = SchemaMismatch(url, version, kLatestPostgresSchema);
    if (!mismatch.empty()) throw StoreError(mismatch);
    return;
  }
  InTransaction("migration", [&](pqxx::work& w) {
    w.exec("SELECT pg_advisory_xact_lock(727274)");  // one migrating coordinator at a time
    w.exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
    pqxx::result r = w.exec("SELECT version FROM schema_version");
    int version = r.empty() ? 0 : r[0][0].as<int>();
    if (r.empty()) w.exec("INSERT INTO schema_version (version) VALUES (0)");
    sql_store::RefuseNewerSchema(version, kLatestPostgresSchema);
    for (; version < kLatestPostgresSchema; ++version) w.exec(kPostgresMigrations[version]);
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

}  // namespace frontier
