// The coordinator's logic, independent of gRPC: experiments from search-space
// files, the trial queue, leases and their expiry, attempts, idempotent
// completion, cancellation and experiment completion, and the search: each
// running experiment's strategy (strategy.h) is told every configuration's
// outcome once all its seeds are final, and what it proposes next is added
// as trials; ASHA's early stopping answers progress reports. The search
// state lives in memory and is rebuilt from the store when an experiment is
// first touched after a restart (Replay), so nothing but the store is
// persistent. An external proposer (strategy external) answers in the
// background: Tick adds what it proposed, records its calls and stores the
// experiment's paused status while it is down or useless. Thread-safe. Time
// comes from the injected Clock, so tests drive expiry without sleeping.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "proto/clock.h"
#include "server/search/strategy.h"
#include "server/store/store.h"

namespace frontier {

struct SchedulerOptions {
  int64_t lease_timeout_ms = 60'000;       // a lease not extended for this long expires
  int64_t heartbeat_interval_ms = 10'000;  // what workers are told to use
  int64_t restart_grace_ms = 120'000;      // running trials' leases after a coordinator start
  // The clients of external proposers (strategy external); empty: such
  // spaces are refused. The coordinator's is server/proposer's gRPC client.
  ProposerFactory proposers;
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
  ~Scheduler();

  const SchedulerOptions& options() const { return options_; }
  Store& store() { return store_; }

  // Parses and validates the search space and creates the experiment with
  // its first trials: the baseline and every configuration the strategy
  // proposes at once, each at seeds 1..repeats (under ASHA a configuration
  // starts with seed 1 alone: its later seeds are added once seed 1 passed
  // the first rung, never when it was stopped there), and the configurations the
  // strategy passed over as skipped (with their reasons). With `screen`
  // (docs/strategies.md#screening) the first trials are one screening trial
  // per runnable configuration and the baseline, then the baseline's seeds;
  // the strategy proposes once every screening trial is final, and only the
  // configurations the drop rule kept. Adaptive
  // strategies propose more as outcomes come in. `owner`: who submitted it
  // (stored with it). Throws SpaceError.
  //
  // `submit_id` (not empty): the client's idempotency key. When `owner`
  // already has an experiment with it (also one created before a restart,
  // or by another coordinator on the same store), that experiment is
  // returned, nothing is created and the space is not read; `repeated`
  // (when given) says so. Submits with the same key run one at a time.
  ExperimentRecord Submit(const std::string& space_yaml, const std::string& source_name,
                          const std::string& owner = "", const std::string& submit_id = "",
                          bool* repeated = nullptr);
  // Pending trials are cancelled, running ones are told to stop. Idempotent.
  // Returns false for an unknown experiment.
  bool Cancel(const std::string& experiment_id);

  // Queues a profile run of the stored trial `trial_id` of `experiment_id`
  // (`frontier profile`): its spec (same config, seed and steps) with
  // profile {steps, start -1: extra steps after training, tool}, a linked
  // trial (Store::AddProfileRun) that is leased first, also when the
  // experiment has ended, and never counts in the experiment's statistics,
  // front or state; its result and artifacts are the profile. nullopt for
  // an unknown trial or one of another experiment. Throws SpecError for
  // steps outside 1..1000, an unknown tool or a spec this build refuses.
  std::optional<TrialRow> ProfileRun(const std::string& experiment_id, const std::string& trial_id, int steps,
                                     const std::string& tool);

  std::string RegisterWorker(WorkerRecord worker);
  // The next pending trial, leased to the worker; nullopt when none is pending.
  // A trial of a configuration ASHA has stopped at a rung (a later seed still
  // pending) is ended as stopped instead of being handed out.
  std::optional<TrialRow> Lease(const std::string& worker_id);
  HeartbeatReply Heartbeat(const std::string& worker_id, const std::string& trial_id, int attempt);
  // Records a progress event. The reply says stop when the lease is not this
  // attempt's, the experiment was cancelled, or early stopping (strategy
  // asha) ends the trial at a rung; the worker then fails it with
  // "stopped: <reason>" and it ends as stopped.
  ProgressReply Progress(const std::string& worker_id, const std::string& trial_id, int attempt,
                         const std::string& event_json);
  // Records a result line: status completed or diverged. When it is the last
  // seed of its configuration to end, the strategy is told and its next
  // proposals are added before the experiment can complete.
  // With `next`, the worker's next trial is leased too, in the same store
  // commit, as Lease would (CompleteTrial.lease_next); nullopt when none is pending.
  Transition Complete(const std::string& worker_id, const std::string& trial_id, int attempt,
                      const std::string& result_json, std::optional<TrialRow>* next = nullptr);
  // Records a failed attempt; whether it runs again is DecideRetry's
  // (retry_policy.h): *retried says so when given.
  Transition Fail(const std::string& worker_id, const std::string& trial_id, int attempt,
                  const std::string& error, bool retryable, const std::string& result_json,
                  bool* retried = nullptr);

  // Expires leases (telling strategies about trials that failed for good),
  // completes finished experiments. Call periodically.
  void Tick();

  // Change notification for long polls and watchers: a counter bumped on
  // every change; WaitForChange returns when it moves past `seen` or after timeout_ms.
  uint64_t change_count();
  uint64_t WaitForChange(uint64_t seen, int64_t timeout_ms);

 private:
  struct Search;  // one running experiment's strategy, early stopping and trial groups

  void Changed();
  // Submit's work without the key's lookup: parses, creates, starts the search.
  ExperimentRecord Create(const std::string& space_yaml, const std::string& source_name,
                          const std::string& owner, const std::string& submit_id);
  // Ends a trial just leased as stopped, without running it, when ASHA
  // stopped its configuration at a rung (a later seed that was still
  // pending); true when it did. Takes search_mu_.
  bool EndedUnrun(const TrialRow& trial);
  // `trial` (just leased) or, when a search ended it unrun, the next leased
  // trial that is to run; tells the dispatcher when anything was leased.
  std::optional<TrialRow> ToRun(const std::string& worker_id, std::optional<TrialRow> trial);
  // Tells the trial's search that it ended, from the stored row, when it is final and the search
  // has not heard: after a failure was recorded, and after a report found already recorded
  // (Transition::kDuplicate: the call that recorded it may never have returned, a commit in doubt).
  // True when told. Takes search_mu_.
  bool TellStoredEnd(const std::string& trial_id);
  // The following require search_mu_.
  // Completes those of `ready` (Store::ExperimentsReadyToComplete, read
  // before the lock) that are still done under it.
  void CompleteFinishedExperiments(const std::vector<std::string>& ready);
  // The search of a running experiment, rebuilt from the store the first
  // time (RebuildSearch); nullptr when it is not running or its search
  // cannot be rebuilt (a space this version refuses, stored state the
  // replay throws on: logged, remembered, and the experiment runs the trials
  // it has). A StoreError propagates.
  Search* SearchOf(const std::string& experiment_id);
  // `experiment`'s search replayed from its stored trials and progress
  // events; `beyond`: what the strategy proposes that is not stored yet.
  std::unique_ptr<Search> RebuildSearch(const ExperimentRecord& experiment, std::vector<Proposal>& beyond);
  // Tells the trial's search that it ended, once; false when there was nothing to tell.
  bool TrialEnded(const std::string& trial_id, TrialOutcome outcome);
  void AddProposals(const std::string& experiment_id, Search& search, const std::vector<Proposal>& proposals);
  // Adds the later seeds of a configuration that ASHA held back, once due (Search::DueSeeds).
  void AddDueSeeds(const std::string& experiment_id, Search& search, const std::string& group_key);
  // Adds the next seed of each configuration adaptive seeding picks (Search::AdaptiveSeedsDue).
  void AddAdaptiveSeeds(const std::string& experiment_id, Search& search);
  bool ExperimentCancelled(const std::string& experiment_id);
  // The steps of a screening trial (server/search/screen.h) of a running
  // experiment; nullopt for any other trial. Takes search_mu_.
  std::optional<int> ScreeningSteps(const std::string& trial_id);
  // The space's retry_timeouts for the trial's experiment (false when it is not loaded).
  bool RetriesTimeouts(const std::string& trial_id);
  // Asynchronous strategies (external proposers): adds what arrived, records
  // their calls, stores their paused status. True when anything changed.
  bool PollProposers();
  // Marks the experiment completed and drops its search, recording the proposer calls it still holds.
  void CompleteExperiment(const std::string& experiment_id, Search& search);
  // The proposer calls `search`'s strategy made since the last time, into the store.
  void RecordProposerCalls(const std::string& id, Search& search);

  Store& store_;
  Clock& clock_;
  SchedulerOptions options_;
  std::mutex mu_;  // guards changes_
  std::condition_variable changed_;
  uint64_t changes_ = 0;
  // Serializes the search: trial endings, the strategies' asks and tells,
  // early-stopping decisions and experiment completion.
  std::mutex search_mu_;
  std::map<std::string, std::unique_ptr<Search>> searches_;  // running experiments, by id, loaded lazily
  std::set<std::string> unloadable_;  // running experiments whose search could not be rebuilt, by id
  // The (owner, submit_id) of the keyed submits under way, one at a time per key.
  std::mutex submit_mu_;
  std::condition_variable submit_done_;
  std::set<std::pair<std::string, std::string>> submitting_;
};

}  // namespace frontier
