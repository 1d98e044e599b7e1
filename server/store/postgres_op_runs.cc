// The PostgreSQL store's kernel-lab rows: op runs (CreateOpRun, FindOpRun,
// ListOpRuns, SetOpRunState) and their judged candidates (RecordOpCandidate,
// ListOpCandidates).
#include <pqxx/pqxx>

#include "server/store/postgres_internal.h"
#include "server/store/postgres_store.h"
#include "server/store/sql_store_common.h"

namespace frontier {

using postgres_internal::Sql;
using sql_store::kOpRunColumns;

namespace {

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

}  // namespace

std::string PostgresStore::CreateOpRun(OpRunRecord run) {
  sql_store::PrepareNewOpRun(run);
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

}  // namespace frontier
