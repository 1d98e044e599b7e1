// The PostgreSQL store's calls that share one statement with concurrent
// ones (StatementBatch): RecordProgress (RecordQueuedProgress) and
// FinishTrialAndLease (RecordQueuedCompletions), one JSON-array statement
// for a batch, one by one after it fails; their counts.
#include <spdlog/spdlog.h>
#include <pqxx/pqxx>

#include <exception>
#include <optional>

#include <nlohmann/json.hpp>

#include "server/store/postgres_internal.h"
#include "server/store/postgres_store.h"

namespace frontier {

using postgres_internal::ReadTrial;

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

}  // namespace frontier
