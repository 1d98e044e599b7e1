// The SQLite store's kernel-lab rows: op runs (CreateOpRun, FindOpRun,
// ListOpRuns, SetOpRunState) and their judged candidates (RecordOpCandidate,
// ListOpCandidates).
#include <sqlite3.h>

#include "server/store/sql_store_common.h"
#include "server/store/sqlite_internal.h"
#include "server/store/sqlite_store.h"

namespace frontier {

using sql_store::kOpRunColumns;
using sqlite_internal::Sql;
using sqlite_internal::Statement;

namespace {

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

}  // namespace

std::string SqliteStore::CreateOpRun(OpRunRecord run) {
  sql_store::PrepareNewOpRun(run);
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

}  // namespace frontier
