// Search strategies as ask/tell: a strategy proposes configurations (with a
// fidelity, the step budget) and is told the outcome of each once every seed
// of it has ended. Its state is rebuilt from the trials already stored
// (Replay), so a restarted coordinator continues where it was. ASHA's early
// stopping of running trials is an EarlyStopping next to the strategy.
// Torch-free and gRPC-free: pure functions of proposals and results.
// Definitions: docs/strategies.md.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/analysis/pareto.h"
#include "server/search/asha.h"

namespace frontier {

struct Proposal {
  Config config;
  int steps = 0;  // fidelity
  // Who proposed it and why, stored with its trials and shown by the report
  // and `frontier trials`: set by the external strategy (the proposer's
  // name and rationale); empty for the built-in strategies.
  std::string proposer{};
  std::string rationale{};
};

// How one trial (one seed) of a proposal ended.
struct TrialOutcome {
  int64_t seed = 0;
  std::string state;      // completed, diverged, failed, stopped, cancelled
  nlohmann::json result;  // the trial result (docs/trial-output.md); null when there is none
  std::string error{};    // why it did not complete, when it failed or stopped (told to external proposers)
};

// A proposal (or the baseline, config {}) with the outcome of every seed.
struct Evaluation {
  Config config;
  int steps = 0;
  std::vector<TrialOutcome> trials;
};

struct StoredProposal;

// One call of an external proposer (asynchronous strategies), for the
// record: docs/proposers.md.
struct ProposerCallRecord {
  std::string proposer;  // the name it answered with, or where it is when the call failed
  int64_t latency_ms = 0;
  int asked = 0, accepted = 0, rejected = 0;
  int64_t prompt_tokens = 0, completion_tokens = 0;  // as the proposer reports its model's usage
  int model_calls = 0;
  std::string error;  // why the call failed; "" when it answered
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Every configuration to run next (each at every seed): empty when there
  // is nothing to propose now (finished, or waiting for outcomes). A
  // configuration is never proposed twice, nor the baseline. The answers
  // depend only on the set of evaluations told so far, not on the order of
  // the Tells: Replay relies on it.
  virtual std::vector<Proposal> Ask() = 0;
  // The outcome of a proposal, or of the baseline, once every seed of it is
  // final. An evaluation told twice counts once.
  virtual void Tell(const Evaluation& evaluation) = 0;
  // True once Ask will never propose anything again. It may lag: a strategy
  // that decides from outcomes can learn it is done only at its next Ask.
  virtual bool Finished() const = 0;
  // Configurations passed over because they cannot run, as
  // "<ConfigKey>: <reason>", in the order the strategy met them.
  virtual const std::vector<std::string>& Skipped() const = 0;

  // Strategies whose proposals arrive from elsewhere (external,
  // server/search/external.h) and may come between Tells: the scheduler asks
  // them again periodically, and an experiment of one completes only once
  // nothing is open and Finished() is true.
  virtual bool Asynchronous() const { return false; }
  // Why the strategy cannot propose now ("" when it can): the experiment's
  // paused status, e.g. "proposer at HOST:PORT unavailable: ...".
  virtual std::string Paused() const { return ""; }
  // The experiment's id, once it has one (after creation, or when loaded
  // after a restart); an asynchronous strategy starts asking only then.
  virtual void Attach(const std::string& /*experiment_id*/) {}
  // The proposer calls made since the last TakeCalls (none for the built-in strategies).
  virtual std::vector<ProposerCallRecord> TakeCalls() { return {}; }
  // Restores the state after a restart straight from the stored proposals
  // (see Replay) and returns true, for strategies whose proposals cannot be
  // replayed by asking again; false (the default): Replay asks and tells.
  virtual bool Restore(const std::optional<Evaluation>& /*baseline*/,
                       const std::vector<StoredProposal>& /*history*/) {
    return false;
  }
};

class ProposerClient;  // server/search/external.h
// Makes the client of an external proposer for a space (strategy external).
using ProposerFactory = std::function<std::unique_ptr<ProposerClient>(const SearchSpace& space)>;

// The space's strategy (space.strategy): grid, random, sobol, nsga2, tpe, asha
// (its proposer's configurations; the stopping is MakeEarlyStopping's) or
// ablation, or external (its client from `proposers`; without one, a
// SpaceError saying this coordinator cannot reach proposers). Every proposal
// runs at FullSteps(space). Throws SpaceError for a space the strategy cannot
// search (e.g. more dimensions than Sobol' has).
std::unique_ptr<Strategy> MakeStrategy(const SearchSpace& space, const ProposerFactory& proposers = {});

// The step budget of the baseline and of every proposal: the task's steps.
int FullSteps(const SearchSpace& space);

// The fitness of an evaluation on the space's objectives and constraints:
// each objective's mean over the completed seeds (negated when maximized),
// and the summed relative violation of the constraints by those means
// (max(0, mean - max) / |max| + max(0, min - mean) / |min|, a zero bound
// counting as 1). The violation is +infinity when no seed completed or the
// mean of an objective or constrained metric is missing. Metrics are read
// with MetricOf (search_spaces/metric_catalog.h).
Fitness FitnessOf(const SearchSpace& space, const Evaluation& evaluation);

// True when a dimension's choices are numbers in strictly increasing or
// strictly decreasing order (neighbouring choices are similar): how nsga2,
// tpe and external proposers treat it; otherwise it is categorical.
bool IsOrdinal(const Dimension& dim);

// The mean of `metric` (MetricOf) over the evaluation's completed seeds;
// nullopt when none has it.
std::optional<double> CompletedMean(const Evaluation& evaluation, const std::string& metric);

// A proposal already stored, with its evaluation when every seed is final.
struct StoredProposal {
  Proposal proposal;
  std::optional<Evaluation> evaluation;
};

// Brings a fresh `strategy` to the state it had after `history` (the stored
// proposals in the order they were made) and the baseline's evaluation
// (when final): tells the baseline, then repeatedly asks and tells the
// stored evaluations of what it proposed. Returns what the strategy
// proposes beyond the history (a coordinator stopped between a Tell and
// storing its answer), or nothing when the replay did not match every
// stored proposal (the history comes from another strategy version, which
// then proposes nothing more).
std::vector<Proposal> Replay(Strategy& strategy, const std::optional<Evaluation>& baseline,
                             const std::vector<StoredProposal>& history);

// A running trial, as early stopping sees it.
struct RunningTrial {
  std::string trial_id;
  std::string config_key;  // ConfigKey(config)
  int64_t seed = 0;
  bool is_baseline = false;  // the baseline is never stopped
  int batch_size = 0;        // from its spec: throughput = batch_size / step time
};

// ASHA over the step budget (strategy asha): each eval event of a running
// trial at a rung is scored on the objectives and constraints measurable
// during training (val_accuracy, val_loss; throughput and step_time_ms from
// the trial's latest progress event's median_step_time_ms, or its mean step
// time train_time_s / step when none came) and AshaStopper decides whether
// the trial goes on. Once a configuration was stopped at a rung, any event
// of its other seeds stops them too (they would stop at that rung), without
// scoring them; the baseline is never stopped. Other events continue.
//
// With `screen: {in_trial: true}` (docs/strategies.md#screening inside the
// trials) each configuration is also screened, once, at the first event of
// one of its trials at step >= screen.steps that gives a step time (a
// progress event's median_step_time_ms, or an eval event's train_time_s /
// step): ScreenOut judges its step_time_ms and throughput against the
// baseline's, measured the same way. A configuration measured before the
// baseline is judged on the constraints at once and on the objectives when
// the baseline's measurement arrives (its trial then stops at its next
// event). A configuration dropped there stops like one stopped at a rung,
// with the reason "screened out: ...". Not thread-safe.
class EarlyStopping {
 public:
  EarlyStopping(const SearchSpace& space, AshaOptions options);
  const std::vector<int>& rungs() const { return asha_.rungs(); }
  // `event`: one frontier-trial output line (docs/trial-output.md); a field
  // of another type reads as absent (an event is worker-sent JSON).
  StopDecision Observe(const RunningTrial& trial, const nlohmann::json& event);
  // True once a seed of the configuration passed the first rung (the
  // decision there was to continue); false while none reached it or when it
  // was stopped there. Without rungs, false.
  bool PassedFirstRung(const std::string& config_key) const;
  // The decision that stopped the configuration at a rung, if one did: its
  // other seeds stop too (Observe stops them at their next event).
  // Screening inside the trials stops a configuration the same way.
  std::optional<StopDecision> Stopped(const std::string& config_key) const;

 private:
  // Screening inside the trials: the configuration's one measurement, taken
  // at its first event at step >= screen.steps with a step time.
  StopDecision ScreenAt(const RunningTrial& trial, double step_ms);
  // ScreenOut over one configuration's step time and throughput; a drop is
  // remembered in screened_out_.
  StopDecision Judge(const std::string& config_key, const std::map<std::string, double>& values);

  std::vector<Objective> objectives_;    // those measurable at rungs
  std::vector<Constraint> constraints_;  // those measurable at rungs
  AshaStopper asha_;
  std::map<std::string, double> median_step_ms_;  // per trial id, from its latest progress event

  ScreenSpec screen_;                          // in_trial false: no screening here
  std::vector<Objective> space_objectives_;    // every one: ScreenOut reads the screened ones
  std::vector<Constraint> space_constraints_;  // every one: ScreenOut reads the screened ones
  std::set<std::string> screen_measured_;      // configurations (and "{}", the baseline) measured
  std::optional<std::map<std::string, double>> screen_baseline_;  // the yardstick, once measured
  std::vector<std::pair<std::string, std::map<std::string, double>>> screen_waiting_;  // for the yardstick
  std::map<std::string, StopDecision> screened_out_;  // config key -> why it was dropped
};

// The space's early stopping: for strategy asha, ASHA from min_steps with
// eta up to FullSteps(space); nullptr for every other strategy.
std::unique_ptr<EarlyStopping> MakeEarlyStopping(const SearchSpace& space);

}  // namespace frontier
