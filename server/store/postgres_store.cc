// The PostgreSQL store's experiments, trials (insertion, lists, counts,
// leases, finishes, failures, expiry), proposer calls, progress events,
// profile runs and workers. Its schema and opening are in postgres_schema.cc,
// the prepared statements in postgres_statements.cc, the calls that share
// statements in postgres_batching.cc, the kernel lab's op runs in
// postgres_op_runs.cc.
#include "server/store/postgres_store.h"

#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include <optional>

#include <nlohmann/json.hpp>

#include "server/store/postgres_internal.h"
#include "server/store/sql_store_common.h"

namespace frontier {

using postgres_internal::ReadTrial;
using postgres_internal::Sql;
using sql_store::kExperimentColumns;
using sql_store::kOutcomeColumns;
using sql_store::kTrialColumns;

namespace postgres_internal {

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

}  // namespace postgres_internal

namespace {

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

}  // namespace

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
