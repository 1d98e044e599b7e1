// The Scheduler (scheduler.h) apart from what workers call: submission and
// experiment creation, a search rebuilt from the store after a restart
// (SearchOf), the strategies told and asked, trials added, cancellation,
// profile runs, experiment completion, the external proposers' answers and
// pause status (PollProposers) and Tick. Worker calls: worker_calls.cc; the
// search state: search_state.h.
#include "server/scheduler/scheduler.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "search_spaces/trial_spec.h"
#include "server/scheduler/search_state.h"
#include "server/search/adaptive_seeds.h"
#include "server/search/screen.h"

namespace frontier {

using namespace scheduling;

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

ExperimentRecord Scheduler::Submit(const std::string& space_yaml, const std::string& source_name,
                                   const std::string& owner, const std::string& submit_id, bool* repeated) {
  if (repeated) *repeated = false;
  if (submit_id.empty()) return Create(space_yaml, source_name, owner, submit_id);
  const std::pair<std::string, std::string> key(owner, submit_id);
  {
    std::unique_lock<std::mutex> lock(submit_mu_);
    submit_done_.wait(lock, [&] { return submitting_.count(key) == 0; });
    submitting_.insert(key);
  }
  struct Release {
    Scheduler& scheduler;
    const std::pair<std::string, std::string>& key;
    ~Release() {
      {
        std::lock_guard<std::mutex> lock(scheduler.submit_mu_);
        scheduler.submitting_.erase(key);
      }
      scheduler.submit_done_.notify_all();
    }
  } release{*this, key};
  std::optional<ExperimentRecord> existing = store_.FindSubmittedExperiment(owner, submit_id);
  if (!existing) {
    try {
      return Create(space_yaml, source_name, owner, submit_id);
    } catch (const StoreError&) {
      // The unique (owner, submit_id) index refused it: another coordinator
      // on the same store created it meanwhile. Or the commit's answer was
      // lost. Either way, the stored one is the answer when there is one.
      existing = store_.FindSubmittedExperiment(owner, submit_id);
      if (!existing) throw;
    }
  }
  if (repeated) *repeated = true;
  return *existing;
}

ExperimentRecord Scheduler::Create(const std::string& space_yaml, const std::string& source_name,
                                   const std::string& owner, const std::string& submit_id) {
  auto search = std::make_unique<Search>(ParseSearchSpace(space_yaml, source_name), options_.proposers);
  const SearchSpace& space = search->space;
  const std::vector<Proposal> proposals = search->strategy->Ask();
  ExperimentRecord experiment;
  experiment.name = space.name;
  experiment.goals_json = GoalsJson(space).dump();
  experiment.space_yaml = space_yaml;
  experiment.source_name = source_name;
  experiment.owner = owner;
  experiment.submit_id = submit_id;
  experiment.skipped = search->strategy->Skipped();
  // Screening first: its trials are created (and so leased) before any
  // other; the strategy proposes once they are all final.
  std::vector<TrialRow> trials;
  if (space.screen.by_trials()) trials = ScreeningRows(space, experiment.skipped);
  std::vector<TrialRow> baseline = TrialRows(space, Config::object(), FullSteps(space), 1, space.repeats);
  trials.insert(trials.end(), std::make_move_iterator(baseline.begin()),
                std::make_move_iterator(baseline.end()));
  for (const Proposal& p : proposals) {
    std::vector<TrialRow> rows = TrialRows(space, p.config, p.steps, 1, search->LastSeedAtFirst(false));
    Label(rows, space, p);
    trials.insert(trials.end(), std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
  }
  std::string id;
  {
    std::lock_guard<std::mutex> lock(search_mu_);
    id = store_.CreateExperiment(experiment, std::move(trials), clock_.NowMs());
    search->Index(store_.ListTrials(id));
    search->strategy->Attach(id);
    searches_[id] = std::move(search);
  }
  Changed();
  return *store_.GetExperiment(id);
}

Scheduler::Search* Scheduler::SearchOf(const std::string& experiment_id) {
  auto found = searches_.find(experiment_id);
  if (found != searches_.end()) return found->second.get();
  if (unloadable_.count(experiment_id)) return nullptr;
  const std::optional<ExperimentRecord> experiment = store_.GetExperiment(experiment_id);
  if (!experiment || experiment->state != experiment_state::kRunning) return nullptr;
  std::unique_ptr<Search> search;
  std::vector<Proposal> beyond;
  try {
    search = RebuildSearch(*experiment, beyond);
  } catch (const StoreError&) {
    throw;  // the store may answer the next call
  } catch (const std::exception& e) {
    // A space this version refuses (accepted by an older one), or stored
    // state the replay cannot take: the experiment runs the trials it has,
    // and no call of another experiment trips over it again.
    spdlog::warn("experiment {}: its search cannot be rebuilt ({}); it runs the trials it has", experiment_id,
                 e.what());
    unloadable_.insert(experiment_id);
    return nullptr;
  }
  Search* loaded = search.get();
  searches_[experiment_id] = std::move(search);
  // Later seeds that became due before the restart but were not stored.
  for (const std::string& key : std::vector<std::string>(loaded->group_order))
    AddDueSeeds(experiment_id, *loaded, key);
  AddAdaptiveSeeds(experiment_id, *loaded);
  AddProposals(experiment_id, *loaded, beyond);
  return loaded;
}

std::unique_ptr<Scheduler::Search> Scheduler::RebuildSearch(const ExperimentRecord& experiment,
                                                            std::vector<Proposal>& beyond) {
  auto search = std::make_unique<Search>(
      ParseStoredSearchSpace(experiment.space_yaml, experiment.source_name), options_.proposers);
  const std::vector<TrialRow> rows = store_.ListTrials(experiment.id);
  search->Index(rows);
  std::map<std::string, const TrialRow*> by_id;
  for (const TrialRow& row : rows) by_id[row.id] = &row;

  // The strategy: replay the stored proposals and outcomes.
  std::optional<Evaluation> baseline;
  std::vector<StoredProposal> history;
  for (const std::string& key : search->group_order) {
    Search::Group& group = search->groups.at(key);
    if (group.screening) continue;
    std::optional<Evaluation> evaluation = group.TakeEvaluation(search->space.repeats);
    if (group.baseline) {
      if (evaluation) baseline = std::move(evaluation);
    } else {
      history.push_back(
          {{group.config, group.steps, group.proposer, group.rationale}, std::move(evaluation)});
    }
  }
  if (search->ScreeningDue()) search->Screen();
  beyond = Replay(*search->strategy, baseline, history);
  search->strategy->Attach(experiment.id);
  search->paused = experiment.paused;

  // Early stopping: replay every progress event in the order it arrived.
  if (search->stopping) {
    std::vector<std::tuple<int64_t, std::string, size_t, nlohmann::json>> events;
    for (const TrialRow& row : rows) {
      if (row.state == trial_state::kPending || row.proposer == kScreenProposer) continue;
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
  return search;
}

void Scheduler::AddDueSeeds(const std::string& experiment_id, Search& search, const std::string& group_key) {
  const std::vector<int> seeds = search.DueSeeds(group_key);
  if (seeds.empty()) return;
  const Search::Group& group = search.groups.at(group_key);
  std::vector<TrialRow> rows;
  for (int seed : seeds) {
    std::vector<TrialRow> one = TrialRows(search.space, group.config, group.steps, seed, seed);
    rows.insert(rows.end(), std::make_move_iterator(one.begin()), std::make_move_iterator(one.end()));
  }
  const std::vector<std::string> ids = store_.AddTrials(experiment_id, rows, clock_.NowMs());
  for (size_t i = 0; i < rows.size() && i < ids.size(); ++i) rows[i].id = ids[i];
  search.Index(rows);
}

void Scheduler::AddAdaptiveSeeds(const std::string& experiment_id, Search& search) {
  std::vector<std::pair<std::string, int>> due;
  try {
    due = search.AdaptiveSeedsDue();
  } catch (const std::invalid_argument& e) {  // server/analysis/: a verdict it cannot compute
    spdlog::warn("experiment {}: no adaptive seeds added: {}", experiment_id, e.what());
    return;
  }
  if (due.empty()) return;
  std::vector<TrialRow> rows;
  for (const auto& [key, seed] : due) {
    const Search::Group& group = search.groups.at(key);
    std::vector<TrialRow> one = TrialRows(search.space, group.config, group.steps, seed, seed);
    rows.insert(rows.end(), std::make_move_iterator(one.begin()), std::make_move_iterator(one.end()));
  }
  const std::vector<std::string> ids = store_.AddTrials(experiment_id, rows, clock_.NowMs());
  for (size_t i = 0; i < rows.size() && i < ids.size(); ++i) rows[i].id = ids[i];
  search.Index(rows);
}

void Scheduler::AddProposals(const std::string& experiment_id, Search& search,
                             const std::vector<Proposal>& proposals) {
  std::vector<TrialRow> rows;
  for (const Proposal& p : proposals) {
    if (search.groups.count(GroupKey(ConfigKey(p.config), p.steps))) continue;  // stored already
    std::vector<TrialRow> more = TrialRows(search.space, p.config, p.steps, 1, search.LastSeedAtFirst(false));
    Label(more, search.space, p);
    rows.insert(rows.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  if (rows.empty()) return;
  const std::vector<std::string> ids = store_.AddTrials(experiment_id, rows, clock_.NowMs());
  for (size_t i = 0; i < rows.size() && i < ids.size(); ++i) rows[i].id = ids[i];
  search.Index(rows);
}

// Records that a trial ended; when it was the last of its group, tells the
// strategy and adds what it proposes next. Then completes the experiment
// when nothing is left open.
bool Scheduler::TrialEnded(const std::string& trial_id, TrialOutcome outcome) {
  if (IsProfileRun(trial_id)) return false;  // a re-run for its profile: nothing the search learns from
  const std::string experiment_id = ExperimentOfTrial(trial_id);
  Search* search = SearchOf(experiment_id);
  // Told once: a trial no longer open was final when the search was built, or told since (a
  // repeated report of it, or one that raced with it).
  if (!search || !search->open.count(trial_id)) return false;
  const auto key = search->group_of.find(trial_id);
  const std::string group_key = key != search->group_of.end() ? key->second : "";
  std::optional<Evaluation> evaluation = search->Ended(trial_id, std::move(outcome));
  // The strategy hears of the outcome first: nothing below may keep it from it.
  if (evaluation) search->strategy->Tell(*evaluation);
  if (!group_key.empty()) AddDueSeeds(experiment_id, *search, group_key);
  AddAdaptiveSeeds(experiment_id, *search);
  const bool screened = search->ScreeningDue();
  if (screened) search->Screen();
  if (evaluation || screened) AddProposals(experiment_id, *search, search->strategy->Ask());
  if (search->open.empty() && search->Settled()) CompleteExperiment(experiment_id, *search);
  return true;
}

void Scheduler::CompleteExperiment(const std::string& experiment_id, Search& search) {
  // The proposer's calls not yet taken (a poll takes them at every tick; short trials end sooner).
  RecordProposerCalls(experiment_id, search);
  store_.SetExperimentState(experiment_id, experiment_state::kCompleted);
  searches_.erase(experiment_id);
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

std::optional<TrialRow> Scheduler::ProfileRun(const std::string& experiment_id, const std::string& trial_id,
                                              int steps, const std::string& tool) {
  const std::optional<TrialRow> trial = IsProfileRun(trial_id) ? std::nullopt : store_.GetTrial(trial_id);
  if (!trial || trial->experiment_id != experiment_id) return std::nullopt;
  if (steps < 1 || steps > 1000) {
    throw SpecError("profile.steps", "profiled steps must be 1 to 1000, not " + std::to_string(steps));
  }
  if (tool != "libtorch" && tool != "nsys" && tool != "ncu") {
    throw SpecError("profile.tool", "'" + tool.substr(0, 40) + "' is not a profiler: libtorch, nsys or ncu");
  }
  nlohmann::json spec = nlohmann::json::parse(trial->spec_json);
  spec["profile"] = {{"steps", steps}, {"start", -1}, {"tool", tool}};
  ParseTrialSpec(spec);  // the spec as a worker will get it must be valid
  TrialRow run;
  run.spec_json = spec.dump();
  run.max_attempts = trial->max_attempts;
  run.proposer = "frontier profile";
  const std::string id = store_.AddProfileRun(trial_id, std::move(run), clock_.NowMs());
  Changed();
  return store_.GetTrial(id);
}

void Scheduler::CompleteFinishedExperiments(const std::vector<std::string>& ready) {
  for (const std::string& id : ready) {
    // A search loaded now (after a restart) may still propose: then it goes on.
    const Search* search = SearchOf(id);
    if (search && (!search->open.empty() || !search->Settled())) continue;
    const TrialCountsRow counts = store_.CountTrials(id);
    if (counts.pending + counts.running > 0) continue;
    if (search) {
      CompleteExperiment(id, *searches_.at(id));
    } else {
      store_.SetExperimentState(id, experiment_state::kCompleted);
    }
  }
}

void Scheduler::RecordProposerCalls(const std::string& id, Search& search) {
  std::vector<ProposerCallRow> rows;
  for (const ProposerCallRecord& call : search.strategy->TakeCalls()) {
    ProposerCallRow row;
    row.experiment_id = id;
    row.at_ms = clock_.NowMs();
    row.proposer = call.proposer;
    row.latency_ms = call.latency_ms;
    row.asked = call.asked;
    row.accepted = call.accepted;
    row.rejected = call.rejected;
    row.prompt_tokens = call.prompt_tokens;
    row.completion_tokens = call.completion_tokens;
    row.model_calls = call.model_calls;
    row.error = call.error;
    rows.push_back(std::move(row));
  }
  if (!rows.empty()) store_.AddProposerCalls(rows);
}

bool Scheduler::PollProposers() {
  bool changed = false;
  std::vector<std::string> ids;
  for (const auto& [id, search] : searches_) {
    if (search->strategy->Asynchronous()) ids.push_back(id);
  }
  for (const std::string& id : ids) {
    Search& search = *searches_.at(id);
    const size_t groups = search.groups.size();
    AddProposals(id, search, search.strategy->Ask());
    changed = changed || search.groups.size() != groups;
    RecordProposerCalls(id, search);
    const std::string paused = search.strategy->Paused();
    if (paused != search.paused) {
      store_.SetExperimentPaused(id, paused);
      search.paused = paused;
      changed = true;
    }
  }
  return changed;
}

void Scheduler::Tick() {
  // The store's statements run before the lock, as Complete's update does
  // (the expiry applies once; a ready experiment is checked again under the
  // lock): completions and progress events, which need the lock to tell their
  // search, never wait for them.
  const std::vector<TrialRow> expired = store_.ExpireLeases(clock_.NowMs());
  const std::vector<std::string> ready = store_.ExperimentsReadyToComplete();
  bool polled = false;
  {
    std::lock_guard<std::mutex> lock(search_mu_);
    for (const TrialRow& trial : expired) {
      if (!trial_state::IsFinal(trial.state)) continue;
      try {
        TrialEnded(trial.id, OutcomeOf(trial));
      } catch (const StoreError&) {
        throw;
      } catch (const std::exception& e) {  // one experiment's failure stops no other's
        spdlog::error("trial {} expired, and its search failed on it: {}", trial.id, e.what());
      }
    }
    polled = PollProposers();
    CompleteFinishedExperiments(ready);
  }
  if (!expired.empty() || polled) Changed();
}

}  // namespace frontier
