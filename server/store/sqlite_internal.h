// What the SQLite store's files (sqlite_store.cc, sqlite_schema.cc,
// sqlite_op_runs.cc) share: the prepared-statement wrapper, Exec, the Sql
// helper and the transaction. Internal to server/store/.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "server/store/sqlite_store.h"

namespace frontier {
namespace sqlite_internal {

// One prepared statement; a failure throws StoreError with SQLite's message.
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

// Runs `sql` (one or more statements, no parameters); StoreError on failure.
inline void Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string message = err ? err : "unknown error";
    sqlite3_free(err);
    throw StoreError("sqlite: " + message);
  }
}

// A statement's text from its parts (a column list between them).
inline std::string Sql(const std::string& a, const char* b, const std::string& c = "") { return a + b + c; }

}  // namespace sqlite_internal

// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted.
class SqliteStore::Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) { sqlite_internal::Exec(db_, "BEGIN IMMEDIATE"); }
  ~Transaction() {
    if (!committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void Commit() {
    sqlite_internal::Exec(db_, "COMMIT");
    committed_ = true;
  }

 private:
  sqlite3* db_;
  bool committed_ = false;
};

}  // namespace frontier
