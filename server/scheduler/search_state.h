// Scheduler::Search, one running experiment's search state: its strategy,
// early stopping (ASHA), screening, and its trial groups (the seeds of one
// configuration at one fidelity), with the rules for when a group's
// evaluation is told and which seeds are due; and the trial rows the
// scheduler creates (TrialRows, ScreeningRows, Label). Internal to
// server/scheduler/: scheduler.cc (submission, replay, the strategies,
// completion, proposers) and worker_calls.cc (what workers call) share it.
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/scheduler/scheduler.h"
#include "server/search/adaptive_seeds.h"
#include "server/search/screen.h"

namespace frontier {
namespace scheduling {

// Trials of one configuration at one fidelity form a group: its seeds.
std::string GroupKey(const std::string& config_key, int steps);

// The trials of `config` at `steps`, one per seed first_seed..last_seed; seeds
// after the first measure no inference latency and profile no steps unless
// the space says `latency: {seeds: all}` (SearchSpace::latency_every_seed),
// `profile: {seeds: all}` (SearchSpace::profile_every_seed).
std::vector<TrialRow> TrialRows(const SearchSpace& space, const Config& config, int steps, int first_seed,
                                int last_seed);

// Who proposed the trials' configuration and why (docs/proposers.md): an
// external proposer's name and rationale, else the strategy's name.
void Label(std::vector<TrialRow>& rows, const SearchSpace& space, const Proposal& proposal);

// A stored trial's ending as a strategy is told it.
TrialOutcome OutcomeOf(const TrialRow& row);

// The screening trials (docs/strategies.md#screening): the baseline's first,
// the yardstick, then one per runnable configuration of the grid, each one
// seed at screen.steps; `skipped` gets the configurations that cannot run.
std::vector<TrialRow> ScreeningRows(const SearchSpace& space, std::vector<std::string>& skipped);

// A running trial as early stopping observes it.
RunningTrial RunningTrialOf(const TrialRow& row);

}  // namespace scheduling

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
    // Seeds 1..last it has no trial of, in order.
    std::vector<int> SeedsMissing(int last) const {
      std::vector<int> missing;
      for (int seed = 1; seed <= last; ++seed) {
        if (std::find(seeds.begin(), seeds.end(), seed) == seeds.end()) missing.push_back(seed);
      }
      return missing;
    }
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
      const std::string key = scheduling::GroupKey(row.config_json, row.steps);
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
        it->second.ended[row.id] = scheduling::OutcomeOf(row);
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
    return group.SeedsMissing(space.repeats);
  }

  // Adaptive seeds: (group key, seed) of every trial to add now. Decided when
  // the baseline and the configuration have no trial running: the next seed
  // of each configuration WantsAnotherSeed picks, and that seed of the
  // baseline when it lacks it (the paired test needs both sides' seed).
  // With `test: welch` the baseline first runs all `max` seeds and no
  // configuration gets one before they are final: an unpaired verdict reads
  // every baseline seed, so a baseline still gaining seeds (for other
  // configurations) would change a verdict between its own looks, more than
  // the `max - min + 1` looks its bounds are split over (docs/search-space.md).
  std::vector<std::pair<std::string, int>> AdaptiveSeedsDue() const {
    if (!space.AdaptiveSeeds()) return {};
    const std::string* baseline_key = nullptr;
    for (const std::string& key : group_order) {
      if (groups.at(key).baseline && !groups.at(key).screening) baseline_key = &key;
    }
    if (baseline_key == nullptr || !groups.at(*baseline_key).AllFinal()) return {};
    const Group& baseline = groups.at(*baseline_key);
    if (space.parity.test == "welch" && baseline.seeds.size() < static_cast<size_t>(space.max_repeats)) {
      std::vector<std::pair<std::string, int>> baseline_first;
      for (int seed : baseline.SeedsMissing(space.max_repeats)) baseline_first.emplace_back(*baseline_key, seed);
      return baseline_first;
    }
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

}  // namespace frontier
