// The coordinator's logic, independent of gRPC: experiments from search-space
// files, the trial queue, leases and their expiry, attempts, idempotent
// completion, cancellation and experiment completion. Thread-safe. Time comes
// from the injected Clock, so tests drive expiry without sleeping.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "server/clock.h"
#include "server/store.h"

namespace frontier {

struct SchedulerOptions {
  int64_t lease_timeout_ms = 60'000;       // a lease not extended for this long expires
  int64_t heartbeat_interval_ms = 10'000;  // what workers are told to use
  int64_t restart_grace_ms = 120'000;      // running trials' leases after a coordinator start
};

struct HeartbeatReply {
  bool lease_valid = false;
  bool stop = false;
};

struct ProgressReply {
  bool stop = false;
  std::string reason;
};

class Scheduler {
 public:
  // Gives every running trial a fresh lease (restart_grace_ms) so that
  // workers of a restarted coordinator can report before anything expires.
  Scheduler(Store& store, Clock& clock, SchedulerOptions options);

  const SchedulerOptions& options() const { return options_; }
  Store& store() { return store_; }

  // Parses and validates the search space, expands it into trials (the
  // baseline and every proposed configuration at seeds 1..repeats),
  // recording incompatible combinations as skipped. Throws SpaceError.
  ExperimentRecord Submit(const std::string& space_yaml, const std::string& source_name);
  // Pending trials are cancelled, running ones are told to stop. Idempotent.
  // Returns false for an unknown experiment.
  bool Cancel(const std::string& experiment_id);

  std::string RegisterWorker(WorkerRecord worker);
  // The next pending trial, leased to the worker; nullopt when none is pending.
  std::optional<TrialRow> Lease(const std::string& worker_id);
  HeartbeatReply Heartbeat(const std::string& worker_id, const std::string& trial_id, int attempt);
  ProgressReply Progress(const std::string& worker_id, const std::string& trial_id, int attempt,
                         const std::string& event_json);
  // Records a result line: status completed or diverged.
  Transition Complete(const std::string& worker_id, const std::string& trial_id, int attempt,
                      const std::string& result_json);
  Transition Fail(const std::string& worker_id, const std::string& trial_id, int attempt, const std::string& error,
                  bool retryable, const std::string& result_json);

  // Expires leases, completes finished experiments. Call periodically.
  void Tick();

  // Change notification for long polls and watchers: a counter bumped on
  // every change; WaitForChange returns when it moves past `seen` or after timeout_ms.
  uint64_t change_count();
  uint64_t WaitForChange(uint64_t seen, int64_t timeout_ms);

 private:
  void Changed();
  void CompleteFinishedExperiments();
  bool ExperimentCancelled(const std::string& trial_id);

  Store& store_;
  Clock& clock_;
  SchedulerOptions options_;
  std::mutex mu_;
  std::condition_variable changed_;
  uint64_t changes_ = 0;
};

}  // namespace frontier
