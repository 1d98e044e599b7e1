#include "server/scheduler/scheduler.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "search_spaces/trial_spec.h"
#include "server/search/adaptive_seeds.h"
#include "server/search/screen.h"

namespace frontier {
namespace {

// Trials of one configuration at one fidelity form a group: its seeds.
std::string GroupKey(const std::string& config_key, int steps) {
  return config_key + "@" + std::to_string(steps);
}

// The trials of `config` at `steps`, one per seed first_seed..last_seed.
std::vector<TrialRow> TrialRows(const SearchSpace& space, const Config& config, int steps, int first_seed,
                                int last_seed) {
  std::vector<TrialRow> rows;
  for (int seed = first_seed; seed <= last_seed; ++seed) {
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

// Who proposed the trials' configuration and why (docs/proposers.md): an
// external proposer's name and rationale, else the strategy's name.
void Label(std::vector<TrialRow>& rows, const SearchSpace& space, const Proposal& proposal) {
  for (TrialRow& row : rows) {
    row.proposer = proposal.proposer.empty() ? space.strategy.name : proposal.proposer;
    row.rationale = proposal.rationale;
  }
}

TrialOutcome OutcomeOf(const TrialRow& row) {
  TrialOutcome outcome;
  outcome.seed = row.seed;
  outcome.state = row.state;
  outcome.error = row.error;
  if (!row.result_json.empty()) {
    outcome.result = nlohmann::json::parse(row.result_json, nullptr, /*allow_exceptions=*/false);
    if (outcome.result.is_discarded()) outcome.result = nullptr;
  }
  return outcome;
}

// The screening trials (docs/strategies.md#screening): the baseline's first,
// the yardstick, then one per runnable configuration of the grid, each one
// seed at screen.steps; `skipped` gets the configurations that cannot run.
std::vector<TrialRow> ScreeningRows(const SearchSpace& space, std::vector<std::string>& skipped) {
  std::vector<Config> configs = {Config::object()};
  for (Config& config : EnumerateGrid(space, kMaxScreenedConfigs)) {
    if (IsBaseline(space, config)) continue;
    if (const std::optional<std::string> why = WhyInvalid(space, config)) {
      const std::string entry = ConfigKey(config) + ": " + *why;
      if (std::find(skipped.begin(), skipped.end(), entry) == skipped.end()) skipped.push_back(entry);
      continue;
    }
    configs.push_back(std::move(config));
  }
  std::vector<TrialRow> rows;
  for (const Config& config : configs) {
    TrialRow row;
    row.config_json = ConfigKey(config);
    row.is_baseline = IsBaseline(space, config);
    row.seed = 1;
    row.steps = space.screen.steps;
    row.max_attempts = space.max_attempts;
    row.spec_json = ToJson(ScreeningSpec(space, config)).dump();
    row.proposer = kScreenProposer;
    rows.push_back(std::move(row));
  }
  return rows;
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
    std::vector<std::string> trial_ids;         // one per seed
    std::vector<int64_t> seeds;                 // of trial_ids
    std::map<std::string, TrialOutcome> ended;  // final trials by id, until the strategy is told
    std::map<int64_t, TrialOutcome> finals;     // every final trial by seed (adaptive seeds read them)
    bool told = false;                          // the strategy has its evaluation
    bool stopped = false;                       // a seed ended as stopped
    bool screening = false;                     // a screening trial (screen.h): never told to the strategy
    std::string proposer, rationale;            // who proposed it and why (stored with its trials)

    // The evaluation for the strategy, once, when every seed 1..repeats has
    // ended, or, under ASHA's delayed seeds, the first seed alone when it was
    // stopped (the later ones are never run). Seeds that adaptive seeding adds
    // beyond `repeats` refine the report's verdict, not the strategy's
    // evaluation, so a replay after a restart tells the same evaluation.
    std::optional<Evaluation> TakeEvaluation(int repeats) {
      if (told) return std::nullopt;
      std::vector<std::string> first;  // the trials of seeds 1..repeats
      for (size_t i = 0; i < trial_ids.size(); ++i) {
        if (seeds[i] <= repeats) first.push_back(trial_ids[i]);
      }
      for (const std::string& id : first) {
        if (!ended.count(id)) return std::nullopt;
      }
      if (first.size() < static_cast<size_t>(repeats) && !stopped) return std::nullopt;
      Evaluation evaluation{config, steps, {}};
      for (const std::string& id : first) evaluation.trials.push_back(std::move(ended.at(id)));
      ended.clear();
      told = true;
      return evaluation;
    }

    // Every final seed of it, as an evaluation.
    Evaluation AllSeeds() const {
      Evaluation evaluation{config, steps, {}};
      for (const auto& [seed, outcome] : finals) evaluation.trials.push_back(outcome);
      return evaluation;
    }
    bool AllFinal() const { return finals.size() >= trial_ids.size(); }
  };

  SearchSpace space;
  std::unique_ptr<Strategy> strategy;
  std::unique_ptr<EarlyStopping> stopping;      // strategy asha only
  ScreenedStrategy* screened = nullptr;         // `strategy` when the space screens (screen.h)
  std::map<std::string, Group> groups;          // by GroupKey
  std::vector<std::string> group_order;         // creation order
  std::map<std::string, std::string> group_of;  // trial id -> group key
  std::set<std::string> open;                   // trials not final yet

  std::string paused;  // the paused status last stored (external proposers)

  Search(SearchSpace s, const ProposerFactory& proposers)
      : space(std::move(s)), strategy(MakeStrategy(space, proposers)), stopping(MakeEarlyStopping(space)) {
    if (space.screen.by_trials()) {
      auto wrapped = std::make_unique<ScreenedStrategy>(std::move(strategy));
      screened = wrapped.get();
      strategy = std::move(wrapped);
    }
  }

  // True once every screening trial is final and the strategy has not been
  // given the verdicts yet: then Screen gives them.
  bool ScreeningDue() const {
    if (!screened || screened->decided()) return false;
    bool any = false;
    for (const auto& [key, group] : groups) {
      if (!group.screening) continue;
      if (!group.AllFinal()) return false;
      any = true;
    }
    return any;
  }

  // The drop rule (ScreenOut) over the screening trials' outcomes, given to
  // the strategy: from then on it proposes only kept configurations. The
  // same stored outcomes give the same verdicts after a restart.
  void Screen() {
    ScreenMeasurement baseline;
    std::vector<ScreenMeasurement> configs;
    for (const std::string& key : group_order) {
      const Group& group = groups.at(key);
      if (!group.screening || group.finals.empty()) continue;
      const TrialOutcome& outcome = group.finals.begin()->second;
      ScreenMeasurement m =
          MeasureScreened(ConfigKey(group.config), outcome.state, outcome.result, outcome.error);
      if (group.baseline) {
        baseline = std::move(m);
      } else {
        configs.push_back(std::move(m));
      }
    }
    std::map<std::string, std::string> dropped;
    for (ScreenVerdict& v : ScreenOut(space.objectives, space.constraints, space.screen, baseline, configs)) {
      if (!v.kept) dropped[v.config_key] = std::move(v.reason);
    }
    screened->Decide(std::move(dropped));
  }

  // An asynchronous strategy (external) may still propose while nothing is
  // open: its experiment completes only once it is finished.
  bool Settled() const { return !strategy->Asynchronous() || strategy->Finished(); }

  void Index(const std::vector<TrialRow>& rows) {
    for (const TrialRow& row : rows) {
      const std::string key = GroupKey(row.config_json, row.steps);
      auto [it, added] = groups.try_emplace(key);
      if (added) {
        it->second.config = nlohmann::json::parse(row.config_json);
        it->second.steps = row.steps;
        it->second.baseline = row.is_baseline;
        it->second.proposer = row.proposer;
        it->second.rationale = row.rationale;
        it->second.screening = row.proposer == kScreenProposer;
        group_order.push_back(key);
      }
      it->second.trial_ids.push_back(row.id);
      it->second.seeds.push_back(row.seed);
      group_of[row.id] = key;
      if (trial_state::IsFinal(row.state)) {
        it->second.ended[row.id] = OutcomeOf(row);
        it->second.finals[row.seed] = it->second.ended[row.id];
        if (row.state == trial_state::kStopped) it->second.stopped = true;
      } else {
        open.insert(row.id);
      }
    }
  }

  // Records that `trial_id` ended; returns its group's evaluation when that
  // completes the group (every seed final) and the strategy has not been told.
  std::optional<Evaluation> Ended(const std::string& trial_id, TrialOutcome outcome) {
    auto key = group_of.find(trial_id);
    if (key == group_of.end()) return std::nullopt;
    open.erase(trial_id);
    Group& group = groups.at(key->second);
    const size_t index =
        std::find(group.trial_ids.begin(), group.trial_ids.end(), trial_id) - group.trial_ids.begin();
    outcome.seed = group.seeds.at(index);
    group.finals[outcome.seed] = outcome;  // adaptive seeds read every seed, told or not
    if (group.told || group.screening) return std::nullopt;
    if (outcome.state == trial_state::kStopped) group.stopped = true;
    group.ended[trial_id] = std::move(outcome);
    return group.TakeEvaluation(space.repeats);
  }

  // Under ASHA a configuration's later seeds (2..repeats) wait for its first
  // seed: they are added once it passed the first rung, or ended otherwise
  // than stopped (completed, diverged or failed before the rung), and never
  // when it was stopped. The baseline runs every seed at once.
  bool DelaysSeeds() const { return stopping && !stopping->rungs().empty() && space.repeats > 1; }
  int LastSeedAtFirst(bool baseline) const { return DelaysSeeds() && !baseline ? 1 : space.repeats; }

  // The seeds of group `key` to add now (empty when none is due).
  std::vector<int> DueSeeds(const std::string& key) const {
    const Group& group = groups.at(key);
    if (group.baseline || group.stopped || group.screening ||
        group.trial_ids.size() >= static_cast<size_t>(space.repeats)) {
      return {};
    }
    bool due = stopping && stopping->PassedFirstRung(ConfigKey(group.config));
    for (const auto& [id, outcome] : group.ended) due = due || outcome.state != trial_state::kStopped;
    if (!due) return {};
    std::vector<int> seeds;
    for (int seed = 1; seed <= space.repeats; ++seed) {
      if (std::find(group.seeds.begin(), group.seeds.end(), seed) == group.seeds.end()) seeds.push_back(seed);
    }
    return seeds;
  }

  // Adaptive seeds: (group key, seed) of every trial to add now. Decided when
  // the baseline and the configuration have no trial running: the next seed
  // of each configuration WantsAnotherSeed picks, and that seed of the
  // baseline when it lacks it (the paired test needs both sides' seed).
  std::vector<std::pair<std::string, int>> AdaptiveSeedsDue() const {
    if (!space.AdaptiveSeeds()) return {};
    const std::string* baseline_key = nullptr;
    for (const std::string& key : group_order) {
      if (groups.at(key).baseline && !groups.at(key).screening) baseline_key = &key;
    }
    if (baseline_key == nullptr || !groups.at(*baseline_key).AllFinal()) return {};
    const Group& baseline = groups.at(*baseline_key);
    std::vector<std::string> keys;
    std::vector<Fitness> field;  // of every configuration at the full budget, from what has ended of it
    for (const std::string& key : group_order) {
      const Group& group = groups.at(key);
      if (group.steps != FullSteps(space) || group.screening) continue;
      keys.push_back(key);
      field.push_back(FitnessOf(space, group.AllSeeds()));
    }
    std::vector<std::pair<std::string, int>> due;
    std::set<int> baseline_needs;
    const Evaluation baseline_seeds = baseline.AllSeeds();
    for (size_t i = 0; i < keys.size(); ++i) {
      const Group& group = groups.at(keys[i]);
      if (group.baseline || group.stopped || !group.AllFinal()) continue;
      if (group.trial_ids.size() < static_cast<size_t>(space.repeats)) continue;
      std::vector<Fitness> others = field;
      others.erase(others.begin() + static_cast<std::ptrdiff_t>(i));
      if (!WantsAnotherSeed(space, baseline_seeds, group.AllSeeds(), others)) continue;
      const int next = static_cast<int>(*std::max_element(group.seeds.begin(), group.seeds.end())) + 1;
      due.emplace_back(keys[i], next);
      if (std::find(baseline.seeds.begin(), baseline.seeds.end(), next) == baseline.seeds.end()) {
        baseline_needs.insert(next);
      }
    }
    for (int seed : baseline_needs) due.emplace_back(*baseline_key, seed);
    return due;
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
  const std::optional<ExperimentRecord> experiment = store_.GetExperiment(experiment_id);
  if (!experiment || experiment->state != experiment_state::kRunning) return nullptr;
  std::unique_ptr<Search> search;
  try {
    search = std::make_unique<Search>(ParseStoredSearchSpace(experiment->space_yaml, experiment->source_name),
                                      options_.proposers);
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
  const std::vector<Proposal> beyond = Replay(*search->strategy, baseline, history);
  search->strategy->Attach(experiment_id);
  search->paused = experiment->paused;

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

  Search* loaded = search.get();
  searches_[experiment_id] = std::move(search);
  // Later seeds that became due before the restart but were not stored.
  for (const std::string& key : std::vector<std::string>(loaded->group_order))
    AddDueSeeds(experiment_id, *loaded, key);
  AddAdaptiveSeeds(experiment_id, *loaded);
  AddProposals(experiment_id, *loaded, beyond);
  return loaded;
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
  const std::vector<std::pair<std::string, int>> due = search.AdaptiveSeedsDue();
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
  if (!group_key.empty()) AddDueSeeds(experiment_id, *search, group_key);
  AddAdaptiveSeeds(experiment_id, *search);
  if (evaluation) search->strategy->Tell(*evaluation);
  const bool screened = search->ScreeningDue();
  if (screened) search->Screen();
  if (evaluation || screened) AddProposals(experiment_id, *search, search->strategy->Ask());
  if (search->open.empty() && search->Settled()) {
    store_.SetExperimentState(experiment_id, experiment_state::kCompleted);
    searches_.erase(experiment_id);
  }
  return true;
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
  if (!event.is_object() || (event.contains("step") && !event["step"].is_number_integer())) {
    // A malformed event is dropped and the trial goes on; it still proves the worker alive.
    return store_.ExtendLease(trial_id, attempt, worker_id, lease_until) ? reply : lost();
  }
  const ProgressRow row{trial_id, attempt, event.value("step", 0), event_json, now};
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
  try {
    outcome.result = nlohmann::json::parse(result_json);
    if (outcome.result.value("status", "") == "diverged") outcome.state = trial_state::kDiverged;
  } catch (const nlohmann::json::exception& e) {
    return Fail(worker_id, trial_id, attempt, std::string("unreadable result: ") + e.what(), true, "");
  }
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
                           const std::string& error, bool retryable, const std::string& result_json) {
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
  } else if (const std::optional<int> steps = ScreeningSteps(trial_id)) {
    // A screening trial that failed for good (a crash, out of memory) ends
    // as screened with its error: its configuration is dropped for it.
    const std::optional<TrialRow> row = store_.GetTrial(trial_id);
    if (retryable && row && row->attempt < row->max_attempts) {
      t = store_.FailAttempt(trial_id, attempt, error, retryable, "", clock_.NowMs());
    } else {
      nlohmann::json result = nlohmann::json::parse(result_json, nullptr, /*allow_exceptions=*/false);
      if (result.is_discarded()) result = nullptr;
      t = store_.FinishTrial(trial_id, attempt, kScreenedState, ScreenedResult(result, *steps).dump(), error,
                             clock_.NowMs());
    }
  } else {
    t = store_.FailAttempt(trial_id, attempt, error, retryable, result_json, clock_.NowMs());
  }
  if (t == Transition::kApplied) {
    TellStoredEnd(trial_id);  // failed for good or stopped; pending again: nothing to tell
    Changed();
  } else if (t == Transition::kDuplicate && TellStoredEnd(trial_id)) {
    Changed();
  }
  return t;
}

void Scheduler::CompleteFinishedExperiments(const std::vector<std::string>& ready) {
  for (const std::string& id : ready) {
    // A search loaded now (after a restart) may still propose: then it goes on.
    const Search* search = SearchOf(id);
    if (search && (!search->open.empty() || !search->Settled())) continue;
    const TrialCountsRow counts = store_.CountTrials(id);
    if (counts.pending + counts.running > 0) continue;
    store_.SetExperimentState(id, experiment_state::kCompleted);
    searches_.erase(id);
  }
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
      if (trial_state::IsFinal(trial.state)) TrialEnded(trial.id, OutcomeOf(trial));
    }
    polled = PollProposers();
    CompleteFinishedExperiments(ready);
  }
  if (!expired.empty() || polled) Changed();
}

}  // namespace frontier
