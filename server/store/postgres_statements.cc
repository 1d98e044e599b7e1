// The PostgreSQL store's prepared statements (PrepareStatements, run on each
// new connection): the lease, progress and completion statements of the hot
// path, with the SQL they are built from (the pending trials a lease takes,
// LeaseSql) and their batched forms over a JSON array.
#include <pqxx/pqxx>

#include <string>

#include "server/store/postgres_internal.h"
#include "server/store/sql_store_common.h"

namespace frontier::postgres_internal {

using sql_store::kExperimentColumns;
using sql_store::kTrialColumns;

namespace {

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

// Ends trial $5's running attempt $6: state $1, result $2, error $3, at $4.
constexpr const char* kFinishTrial =
    "UPDATE trials SET state = $1, result_json = $2, error = $3, finished_ms = $4, lease_expires_ms = 0 "
    "WHERE id = $5 AND attempt = $6 AND state = 'running'";

// Extends the lease of the trial $2 when its attempt $3 is running for worker $4.
constexpr const char* kExtendHeldLease =
    "UPDATE trials SET lease_expires_ms = GREATEST(lease_expires_ms, $1) "
    "WHERE id = $2 AND attempt = $3 AND worker_id = $4 AND state = 'running'";

}  // namespace

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

}  // namespace frontier::postgres_internal
