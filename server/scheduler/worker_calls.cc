// What workers call on the Scheduler (scheduler.h): registration, leases
// (a trial ASHA stopped ended unrun instead), heartbeats, progress events
// (early stopping's decisions), completions and failures (screening trials
// end as screened), each ending told to its search (TrialEnded in
// scheduler.cc).
#include "server/scheduler/scheduler.h"

#include <climits>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "search_spaces/input_bounds.h"
#include "search_spaces/metric_catalog.h"
#include "search_spaces/search_space.h"
#include "search_spaces/trial_spec.h"
#include "server/scheduler/retry_policy.h"
#include "server/scheduler/search_state.h"
#include "server/search/screen.h"

namespace frontier {

using namespace scheduling;

namespace {

// Throws SpecError naming the field when a progress event's fields that
// early stopping reads are not of their types: the event is stored, and
// replayed after a restart, only when they are.
void CheckProgressEvent(const nlohmann::json& event) {
  const auto shown = [](const nlohmann::json& value) { return Abbreviated(value.dump(), 40); };
  const auto kind = event.find("event");
  if (kind != event.end() && !kind->is_string()) {
    throw SpecError("event_json.event", "expected a string, got " + shown(*kind));
  }
  const auto step = event.find("step");
  if (step == event.end()) return;
  const bool in_range =
      step->is_number_integer() &&
      (step->is_number_unsigned() ? step->get<uint64_t>() <= INT_MAX
                                  : step->get<int64_t>() >= 0 && step->get<int64_t>() <= INT_MAX);
  if (!in_range) {
    throw SpecError("event_json.step",
                    "expected an integer in [0, " + std::to_string(INT_MAX) + "], got " + shown(*step));
  }
}

}  // namespace

std::string Scheduler::RegisterWorker(WorkerRecord worker) {
  std::string id = store_.RegisterWorker(std::move(worker), clock_.NowMs());
  Changed();
  return id;
}

std::optional<TrialRow> Scheduler::Lease(const std::string& worker_id) {
  return ToRun(worker_id, store_.LeaseNextTrial(worker_id, clock_.NowMs(), options_.lease_timeout_ms));
}

std::optional<TrialRow> Scheduler::ToRun(const std::string& worker_id, std::optional<TrialRow> trial) {
  const bool changed = trial.has_value();
  while (trial && !trial->is_baseline && !IsProfileRun(trial->id) && trial->proposer != kScreenProposer &&
         EndedUnrun(*trial)) {
    trial = store_.LeaseNextTrial(worker_id, clock_.NowMs(), options_.lease_timeout_ms);
  }
  if (changed) Changed();
  return trial;
}

bool Scheduler::EndedUnrun(const TrialRow& trial) {
  std::lock_guard<std::mutex> lock(search_mu_);
  Search* search = SearchOf(ExperimentOfTrial(trial.id));
  if (!search || !search->stopping) return false;
  const std::optional<StopDecision> stopped = search->stopping->Stopped(trial.config_json);
  if (!stopped) return false;
  const Transition t = store_.FinishTrial(trial.id, trial.attempt, trial_state::kStopped, "",
                                          "stopped: " + stopped->reason, clock_.NowMs());
  if (t == Transition::kApplied) {
    TrialOutcome outcome;
    outcome.state = trial_state::kStopped;
    TrialEnded(trial.id, std::move(outcome));
  }
  return true;
}

std::optional<int> Scheduler::ScreeningSteps(const std::string& trial_id) {
  if (IsProfileRun(trial_id)) return std::nullopt;
  std::lock_guard<std::mutex> lock(search_mu_);
  Search* search = SearchOf(ExperimentOfTrial(trial_id));
  if (!search) return std::nullopt;
  const auto key = search->group_of.find(trial_id);
  if (key == search->group_of.end()) return std::nullopt;
  const Search::Group& group = search->groups.at(key->second);
  return group.screening ? std::optional<int>(group.steps) : std::nullopt;
}

bool Scheduler::RetriesTimeouts(const std::string& trial_id) {
  std::lock_guard<std::mutex> lock(search_mu_);
  Search* search = SearchOf(ExperimentOfTrial(trial_id));
  return search && search->space.retry_timeouts;
}

bool Scheduler::ExperimentCancelled(const std::string& experiment_id) {
  if (searches_.count(experiment_id)) return false;  // loaded searches are of running experiments
  const std::optional<ExperimentRecord> experiment = store_.GetExperiment(experiment_id);
  return experiment && experiment->state == experiment_state::kCancelled;
}

HeartbeatReply Scheduler::Heartbeat(const std::string& worker_id, const std::string& trial_id, int attempt) {
  const int64_t now = clock_.NowMs();
  store_.TouchWorker(worker_id, now);
  HeartbeatReply reply;
  if (trial_id.empty()) return reply;
  reply.lease_valid = store_.ExtendLease(trial_id, attempt, worker_id, now + options_.lease_timeout_ms);
  if (!reply.lease_valid) {
    reply.stop = true;
    return reply;
  }
  // A profile run is asked for after the search: the experiment's end does not stop it.
  if (IsProfileRun(trial_id)) return reply;
  std::lock_guard<std::mutex> lock(search_mu_);
  reply.stop = ExperimentCancelled(ExperimentOfTrial(trial_id));
  return reply;
}

ProgressReply Scheduler::Progress(const std::string& worker_id, const std::string& trial_id, int attempt,
                                  const std::string& event_json) {
  const int64_t now = clock_.NowMs();
  const int64_t lease_until = now + options_.lease_timeout_ms;
  // A lease with more than half its time left is not renewed by a progress
  // event (heartbeats come far more often than that).
  const int64_t renew_before = now + options_.lease_timeout_ms / 2;
  ProgressReply reply;
  const auto lost = [&reply] {
    reply.stop = true;
    reply.reason = "this attempt no longer holds the trial's lease";
    return reply;
  };
  const nlohmann::json event = nlohmann::json::parse(event_json, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object()) {
    // Not an event: dropped, and the trial goes on; it still proves the worker alive.
    return store_.ExtendLease(trial_id, attempt, worker_id, lease_until) ? reply : lost();
  }
  CheckProgressEvent(event);  // refused before it is stored
  const auto step = event.find("step");
  const ProgressRow row{trial_id, attempt, step == event.end() ? 0 : step->get<int>(), event_json, now};
  if (IsProfileRun(trial_id))
    return store_.RecordProgress(row, worker_id, lease_until, renew_before) ? reply : lost();
  const std::string experiment_id = ExperimentOfTrial(trial_id);
  std::unique_lock<std::mutex> lock(search_mu_);
  Search* search = SearchOf(experiment_id);
  if (!search || !search->stopping) {
    const bool cancelled = !search && ExperimentCancelled(experiment_id);
    lock.unlock();
    // Recording extends the lease (a progress event is proof of life) and checks that this attempt holds it.
    if (!store_.RecordProgress(row, worker_id, lease_until, renew_before)) return lost();
    if (cancelled) {
      reply.stop = true;
      reply.reason = "experiment cancelled";
    }
    return reply;
  }
  // Early stopping: recorded and decided under one lock, so a restart
  // replays the decisions in their order.
  if (!store_.RecordProgress(row, worker_id, lease_until, renew_before)) return lost();
  if (const std::optional<TrialRow> trial = store_.GetTrial(trial_id);
      trial && trial->proposer != kScreenProposer) {
    const StopDecision decision = search->stopping->Observe(RunningTrialOf(*trial), event);
    reply.stop = decision.stop;
    reply.reason = decision.reason;
    const auto key = search->group_of.find(trial_id);
    if (key != search->group_of.end()) AddDueSeeds(experiment_id, *search, key->second);
  }
  return reply;
}

Transition Scheduler::Complete(const std::string& worker_id, const std::string& trial_id, int attempt,
                               const std::string& result_json, std::optional<TrialRow>* next) {
  TrialOutcome outcome;
  outcome.state = trial_state::kCompleted;
  // A worker parses a trial's result before it sends it: one that is not a JSON object is the sender's
  // bug, which a retry would only repeat at the cost of a whole trial. Final, quoting its start.
  outcome.result = nlohmann::json::parse(result_json, nullptr, /*allow_exceptions=*/false);
  if (!outcome.result.is_object()) {
    const std::string start = result_json.size() <= 200 ? result_json : result_json.substr(0, 200) + "...";
    return Fail(worker_id, trial_id, attempt,
                std::string("unreadable result: ") + (outcome.result.is_discarded() ? "not JSON" : "not a JSON object") +
                    ": " + start,
                false, "");
  }
  if (StringAt(outcome.result, {"status"}) == "diverged") outcome.state = trial_state::kDiverged;
  // A screening trial ends as screened, its result without quality (ScreenedResult).
  std::string stored = result_json;
  if (const std::optional<int> steps = ScreeningSteps(trial_id)) {
    outcome.state = kScreenedState;
    outcome.result = ScreenedResult(outcome.result, *steps);
    stored = outcome.result.dump();
  }
  // The conditional update needs no lock: it applies once. The search is
  // told under the lock (and a search loaded meanwhile already sees the trial final).
  Transition t;
  if (next) {
    Store::FinishedAndLeased r = store_.FinishTrialAndLease(
        trial_id, attempt, outcome.state, stored, "", clock_.NowMs(), worker_id, options_.lease_timeout_ms);
    t = r.finished;
    *next = std::move(r.next);
  } else {
    t = store_.FinishTrial(trial_id, attempt, outcome.state, stored, "", clock_.NowMs());
  }
  if (t == Transition::kApplied) {
    {
      std::lock_guard<std::mutex> lock(search_mu_);
      TrialEnded(trial_id, std::move(outcome));
    }
    Changed();
  } else if (t == Transition::kDuplicate && TellStoredEnd(trial_id)) {
    Changed();
  }
  if (next) *next = ToRun(worker_id, std::move(*next));
  return t;
}

bool Scheduler::TellStoredEnd(const std::string& trial_id) {
  const std::optional<TrialRow> row = store_.GetTrial(trial_id);
  if (!row || !trial_state::IsFinal(row->state)) return false;
  std::lock_guard<std::mutex> lock(search_mu_);
  return TrialEnded(trial_id, OutcomeOf(*row));
}

Transition Scheduler::Fail(const std::string& worker_id, const std::string& trial_id, int attempt,
                           const std::string& error, bool retryable, const std::string& result_json,
                           bool* retried) {
  if (retried) *retried = false;
  // A trial the coordinator asked to stop ends as stopped (or cancelled with
  // its experiment), not as a failure.
  const bool stopped = !retryable && error.rfind("stopped:", 0) == 0;
  Transition t;
  if (stopped) {
    bool cancelled;
    {
      std::lock_guard<std::mutex> lock(search_mu_);
      cancelled = ExperimentCancelled(ExperimentOfTrial(trial_id));
    }
    t = store_.FinishTrial(trial_id, attempt, cancelled ? trial_state::kCancelled : trial_state::kStopped,
                           result_json, error, clock_.NowMs());
  } else {
    const std::optional<TrialRow> row = store_.GetTrial(trial_id);
    FailedAttempt failed;
    failed.error = error;
    failed.retryable = retryable;
    const nlohmann::json result = nlohmann::json::parse(result_json, nullptr, /*allow_exceptions=*/false);
    failed.error_kind = StringAt(result, {"error_kind"});  // another type reads as absent
    failed.attempt = attempt;
    failed.max_attempts = row ? row->max_attempts : 1;
    if (row && row->attempt == attempt && attempt > 1) failed.previous_error = row->error;
    failed.retry_timeouts = RetriesTimeouts(trial_id);
    const RetryDecision decision = DecideRetry(failed);
    const std::optional<int> steps = ScreeningSteps(trial_id);
    if (steps && !decision.retry) {
      // A screening trial that failed for good (a crash, out of memory) ends
      // as screened with its error: its configuration is dropped for it.
      nlohmann::json screened = result.is_discarded() ? nlohmann::json(nullptr) : result;
      t = store_.FinishTrial(trial_id, attempt, kScreenedState, ScreenedResult(screened, *steps).dump(),
                             decision.error, clock_.NowMs());
    } else {
      t = store_.FailAttempt(trial_id, attempt, decision.error, decision.retryable,
                             steps ? "" : result_json, clock_.NowMs());
      if (retried) *retried = t == Transition::kApplied && decision.retry;
    }
  }
  if (t == Transition::kApplied) {
    TellStoredEnd(trial_id);  // failed for good or stopped; pending again: nothing to tell
    Changed();
  } else if (t == Transition::kDuplicate && TellStoredEnd(trial_id)) {
    Changed();
  }
  return t;
}

}  // namespace frontier
