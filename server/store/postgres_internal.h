// What the PostgreSQL store's files (postgres_store.cc, postgres_schema.cc,
// postgres_statements.cc, postgres_batching.cc, postgres_op_runs.cc) share:
// the connection pool, the transaction helpers (Run, InTransaction,
// Statement, RelaxedStatement), the queued calls of the shared statements,
// the Sql helper, the trial row reader and the prepared statements.
// Internal to server/store/.
#pragma once

#include <pqxx/pqxx>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/store/postgres_store.h"
#include "server/store/statement_batch.h"

namespace frontier {
namespace postgres_internal {

// A statement's text: `a`, a column list, `b`.
inline std::string Sql(const char* a, const char* columns, const char* b) {
  return std::string(a) + columns + b;
}

// A row of the trial columns (sql_store_common.h kTrialColumns or kOutcomeColumns) as a TrialRow.
TrialRow ReadTrial(const pqxx::row& r);

// The statements of the hot path (lease, progress, completion), prepared once
// per connection: planned once instead of on every call (postgres_statements.cc).
void PrepareStatements(pqxx::connection& c);

}  // namespace postgres_internal

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
    postgres_internal::PrepareStatements(*conn);
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

}  // namespace frontier
