#include "server/scheduler.h"

#include <algorithm>
#include <tuple>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"

namespace frontier {
namespace {

// Trials of one configuration at one fidelity form a group: its seeds.
std::string GroupKey(const std::string& config_key, int steps) {
  return config_key + "@" + std::to_string(steps);
}

// The trials of `config` at `steps`, one per seed 1..repeats.
std::vector<TrialRow> TrialRows(const SearchSpace& space, const Config& config, int steps) {
  std::vector<TrialRow> rows;
  for (int seed = 1; seed <= space.repeats; ++seed) {
    TrialSpec spec = MakeTrialSpec(space, config, seed, "");
    spec.task.steps = steps;
    TrialRow row;
    row.config_json = ConfigKey(config);
    row.is_baseline = IsBaseline(space, config);
    row.seed = seed;
    row.steps = steps;
    row.max_attempts = space.max_attempts;
    row.spec_json = ToJson(spec).dump();
    rows.push_back(std::move(row));
  }
  return rows;
}

TrialOutcome OutcomeOf(const TrialRow& row) {
  TrialOutcome outcome;
  outcome.seed = row.seed;
  outcome.state = row.state;
  if (!row.result_json.empty()) {
    outcome.result = nlohmann::json::parse(row.result_json, nullptr, /*allow_exceptions=*/false);
    if (outcome.result.is_discarded()) outcome.result = nullptr;
  }
  return outcome;
}

RunningTrial RunningTrialOf(const TrialRow& row) {
  RunningTrial trial;
  trial.trial_id = row.id;
  trial.config_key = row.config_json;
  trial.seed = row.seed;
  trial.is_baseline = row.is_baseline;
  const nlohmann::json spec = nlohmann::json::parse(row.spec_json, nullptr, /*allow_exceptions=*/false);
  if (spec.is_object() && spec.contains("task")) trial.batch_size = spec["task"].value("batch_size", 0);
  return trial;
}

}  // namespace

struct Scheduler::Search {
  struct Group {
    Config config;
    int steps = 0;
    bool baseline = false;
    std::vector<std::string> trial_ids;  // one per seed
    bool told = false;                   // the strategy has its evaluation
  };

  SearchSpace space;
  std::unique_ptr<Strategy> strategy;
  std::unique_ptr<EarlyStopping> stopping;      // strategy asha only
  std::map<std::string, Group> groups;          // by GroupKey
  std::vector<std::string> group_order;         // creation order
  std::map<std::string, std::string> group_of;  // trial id -> group key

  explicit Search(SearchSpace s)
      : space(std::move(s)), strategy(MakeStrategy(space)), stopping(MakeEarlyStopping(space)) {}

  void Index(const std::vector<TrialRow>& rows) {
    for (const TrialRow& row : rows) {
      const std::string key = GroupKey(row.config_json, row.steps);
      auto [it, added] = groups.try_emplace(key);
      if (added) {
        it->second.config = nlohmann::json::parse(row.config_json);
        it->second.steps = row.steps;
        it->second.baseline = row.is_baseline;
        group_order.push_back(key);
      }
      it->second.trial_ids.push_back(row.id);
      group_of[row.id] = key;
    }
  }
};

Scheduler::Scheduler(Store& store, Clock& clock, SchedulerOptions options)
    : store_(store), clock_(clock), options_(options) {
  store_.ExtendAllLeases(clock_.NowMs() + options_.restart_grace_ms);
}

Scheduler::~Scheduler() = default;

void Scheduler::Changed() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++changes_;
  }
  changed_.notify_all();
}

uint64_t Scheduler::change_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return changes_;
}

uint64_t Scheduler::WaitForChange(uint64_t seen, int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return changes_ != seen; });
  return changes_;
}

ExperimentRecord Scheduler::Submit(const std::string& space_yaml, const std::string& source_name) {
  auto search = std::make_unique<Search>(ParseSearchSpace(space_yaml, source_name));
  const SearchSpace& space = search->space;
  const std::vector<Proposal> proposals = search->strategy->Ask();
  ExperimentRecord experiment;
  experiment.name = space.name;
  experiment.space_yaml = space_yaml;
  experiment.source_name = source_name;
  experiment.skipped = search->strategy->Skipped();
  std::vector<TrialRow> trials = TrialRows(space, Config::object(), FullSteps(space));
  for (const Proposal& p : proposals) {
    std::vector<TrialRow> rows = TrialRows(space, p.config, p.steps);
    trials.insert(trials.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  }
  std::string id;
  {
    std::lock_guard<std::mutex> lock(search_mu_);
    id = store_.CreateExperiment(experiment, std::move(trials), clock_.NowMs());
    search->Index(store_.ListTrials(id));
    searches_[id] = std::move(search);
  }
  Changed();
  return *store_.GetExperiment(id);
}

Scheduler::Search* Scheduler::SearchOf(const std::string& experiment_id) {
  auto found = searches_.find(experiment_id);
  if (found != searches_.end()) return found->second.get();
  const std::optional<ExperimentRecord> experiment = store_.GetExperiment(experiment_id);
  if (!experiment || experiment->state != experiment_state::kRunning) return nullptr;
  std::unique_ptr<Search> search;
  try {
    search = std::make_unique<Search>(ParseSearchSpace(experiment->space_yaml, experiment->source_name));
  } catch (const SpaceError&) {
    return nullptr;  // accepted by an older version: it runs the trials it has
  }
  const std::vector<TrialRow> rows = store_.ListTrials(experiment_id);
  search->Index(rows);
  std::map<std::string, const TrialRow*> by_id;
  for (const TrialRow& row : rows) by_id[row.id] = &row;

  // The strategy: replay the stored proposals and outcomes.
  std::optional<Evaluation> baseline;
  std::vector<StoredProposal> history;
  for (const std::string& key : search->group_order) {
    Search::Group& group = search->groups.at(key);
    Evaluation evaluation{group.config, group.steps, {}};
    bool final = true;
    for (const std::string& id : group.trial_ids) {
      final = final && trial_state::IsFinal(by_id.at(id)->state);
      evaluation.trials.push_back(OutcomeOf(*by_id.at(id)));
    }
    group.told = final;
    if (group.baseline) {
      if (final) baseline = std::move(evaluation);
    } else {
      history.push_back({{group.config, group.steps},
                         final ? std::optional<Evaluation>(std::move(evaluation)) : std::nullopt});
    }
  }
  const std::vector<Proposal> beyond = Replay(*search->strategy, baseline, history);

  // Early stopping: replay every progress event in the order it arrived.
  if (search->stopping) {
    std::vector<std::tuple<int64_t, std::string, size_t, nlohmann::json>> events;
    for (const TrialRow& row : rows) {
      if (row.state == trial_state::kPending) continue;
      const std::vector<ProgressRow> progress = store_.ListProgress(row.id);
      for (size_t i = 0; i < progress.size(); ++i) {
        events.emplace_back(
            progress[i].at_ms, row.id, i,
            nlohmann::json::parse(progress[i].event_json, nullptr, /*allow_exceptions=*/false));
      }
    }
    std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
      return std::tie(std::get<0>(a), std::get<1>(a), std::get<2>(a)) <
             std::tie(std::get<0>(b), std::get<1>(b), std::get<2>(b));
    });
    for (const auto& [at_ms, trial_id, index, event] : events) {
      search->stopping->Observe(RunningTrialOf(*by_id.at(trial_id)), event);
    }
  }

  Search* loaded = search.get();
  searches_[experiment_id] = std::move(search);
  AddProposals(experiment_id, *loaded, beyond);
  return loaded;
}

void Scheduler::AddProposals(const std::string& experiment_id, Search& search,
                             const std::vector<Proposal>& proposals) {
  std::vector<TrialRow> rows;
  for (const Proposal& p : proposals) {
    if (search.groups.count(GroupKey(ConfigKey(p.config), p.steps))) continue;  // stored already
    std::vector<TrialRow> more = TrialRows(search.space, p.config, p.steps);
    rows.insert(rows.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  if (rows.empty()) return;
  const std::vector<std::string> ids = store_.AddTrials(experiment_id, rows, clock_.NowMs());
  for (size_t i = 0; i < rows.size() && i < ids.size(); ++i) rows[i].id = ids[i];
  search.Index(rows);
}

// When `trial_id` was the last of its group to end, tells the strategy and
// adds what it proposes next.
void Scheduler::TrialEnded(const std::string& trial_id) {
  const std::optional<TrialRow> trial = store_.GetTrial(trial_id);
  if (!trial) return;
  Search* search = SearchOf(trial->experiment_id);
  if (!search) return;
  auto key = search->group_of.find(trial_id);
  if (key == search->group_of.end()) return;
  Search::Group& group = search->groups.at(key->second);
  if (group.told) return;
  Evaluation evaluation{group.config, group.steps, {}};
  for (const std::string& id : group.trial_ids) {
    const std::optional<TrialRow> row = id == trial_id ? trial : store_.GetTrial(id);
    if (!row || !trial_state::IsFinal(row->state)) return;
    evaluation.trials.push_back(OutcomeOf(*row));
  }
  group.told = true;
  search->strategy->Tell(evaluation);
  AddProposals(trial->experiment_id, *search, search->strategy->Ask());
}

bool Scheduler::Cancel(const std::string& experiment_id) {
  std::unique_lock<std::mutex> lock(search_mu_);
  auto experiment = store_.GetExperiment(experiment_id);
  if (!experiment) return false;
  if (experiment->state == experiment_state::kRunning) {
    store_.SetExperimentState(experiment_id, experiment_state::kCancelled);
    store_.CancelPendingTrials(experiment_id, clock_.NowMs());
    searches_.erase(experiment_id);
    lock.unlock();
    Changed();
  }
  return true;
}

std::string Scheduler::RegisterWorker(WorkerRecord worker) {
  std::string id = store_.RegisterWorker(std::move(worker), clock_.NowMs());
  Changed();
  return id;
}

std::optional<TrialRow> Scheduler::Lease(const std::string& worker_id) {
  auto trial = store_.LeaseNextTrial(worker_id, clock_.NowMs(), options_.lease_timeout_ms);
  if (trial) Changed();
  return trial;
}

bool Scheduler::ExperimentCancelled(const std::string& trial_id) {
  auto trial = store_.GetTrial(trial_id);
  if (!trial) return false;
  auto experiment = store_.GetExperiment(trial->experiment_id);
  return experiment && experiment->state == experiment_state::kCancelled;
}

HeartbeatReply Scheduler::Heartbeat(const std::string& worker_id, const std::string& trial_id, int attempt) {
  const int64_t now = clock_.NowMs();
  store_.TouchWorker(worker_id, now);
  HeartbeatReply reply;
  if (trial_id.empty()) return reply;
  reply.lease_valid = store_.ExtendLease(trial_id, attempt, worker_id, now + options_.lease_timeout_ms);
  reply.stop = !reply.lease_valid || ExperimentCancelled(trial_id);
  return reply;
}

ProgressReply Scheduler::Progress(const std::string& worker_id, const std::string& trial_id, int attempt,
                                  const std::string& event_json) {
  const int64_t now = clock_.NowMs();
  ProgressReply reply;
  auto trial = store_.GetTrial(trial_id);
  if (!trial || trial->state != trial_state::kRunning || trial->attempt != attempt ||
      trial->worker_id != worker_id) {
    reply.stop = true;
    reply.reason = "this attempt no longer holds the trial's lease";
    return reply;
  }
  const nlohmann::json event = nlohmann::json::parse(event_json, nullptr, /*allow_exceptions=*/false);
  if (!event.is_object() || (event.contains("step") && !event["step"].is_number_integer())) {
    return reply;  // a malformed event is dropped; the trial goes on
  }
  const int step = event.value("step", 0);
  // A progress event is proof of life too.
  store_.ExtendLease(trial_id, attempt, worker_id, now + options_.lease_timeout_ms);
  if (ExperimentCancelled(trial_id)) {
    store_.AddProgress({trial_id, attempt, step, event_json, now});
    reply.stop = true;
    reply.reason = "experiment cancelled";
    return reply;
  }
  // Recorded and decided under one lock, so a restart replays the decisions in their order.
  std::lock_guard<std::mutex> lock(search_mu_);
  store_.AddProgress({trial_id, attempt, step, event_json, now});
  Search* search = SearchOf(trial->experiment_id);
  if (search && search->stopping) {
    const StopDecision decision = search->stopping->Observe(RunningTrialOf(*trial), event);
    reply.stop = decision.stop;
    reply.reason = decision.reason;
  }
  return reply;
}

Transition Scheduler::Complete(const std::string& worker_id, const std::string& trial_id, int attempt,
                               const std::string& result_json) {
  std::string state = trial_state::kCompleted;
  try {
    if (nlohmann::json::parse(result_json).value("status", "") == "diverged") state = trial_state::kDiverged;
  } catch (const nlohmann::json::exception& e) {
    return Fail(worker_id, trial_id, attempt, std::string("unreadable result: ") + e.what(), true, "");
  }
  Transition t;
  {
    std::lock_guard<std::mutex> lock(search_mu_);
    t = store_.FinishTrial(trial_id, attempt, state, result_json, "", clock_.NowMs());
    if (t == Transition::kApplied) {
      TrialEnded(trial_id);
      CompleteFinishedExperiments();
    }
  }
  if (t == Transition::kApplied) Changed();
  return t;
}

Transition Scheduler::Fail(const std::string& worker_id, const std::string& trial_id, int attempt,
                           const std::string& error, bool retryable, const std::string& result_json) {
  // A trial the coordinator asked to stop ends as stopped (or cancelled with
  // its experiment), not as a failure.
  const bool stopped = !retryable && error.rfind("stopped:", 0) == 0;
  Transition t;
  {
    std::lock_guard<std::mutex> lock(search_mu_);
    t = stopped ? store_.FinishTrial(
                      trial_id, attempt,
                      ExperimentCancelled(trial_id) ? trial_state::kCancelled : trial_state::kStopped,
                      result_json, error, clock_.NowMs())
                : store_.FailAttempt(trial_id, attempt, error, retryable, result_json, clock_.NowMs());
    if (t == Transition::kApplied) {
      TrialEnded(trial_id);  // nothing to tell while the trial is pending again
      CompleteFinishedExperiments();
    }
  }
  if (t == Transition::kApplied) Changed();
  return t;
}

void Scheduler::CompleteFinishedExperiments() {
  for (const std::string& id : store_.ExperimentsReadyToComplete()) {
    // A search loaded now (after a restart) may still propose: then it goes on.
    SearchOf(id);
    const TrialCountsRow counts = store_.CountTrials(id);
    if (counts.pending + counts.running > 0) continue;
    store_.SetExperimentState(id, experiment_state::kCompleted);
    searches_.erase(id);
  }
}

void Scheduler::Tick() {
  std::vector<TrialRow> expired;
  {
    std::lock_guard<std::mutex> lock(search_mu_);
    expired = store_.ExpireLeases(clock_.NowMs());
    for (const TrialRow& trial : expired) {
      if (trial_state::IsFinal(trial.state)) TrialEnded(trial.id);
    }
    CompleteFinishedExperiments();
  }
  if (!expired.empty()) Changed();
}

}  // namespace frontier
