#include "server/search/strategy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "search_spaces/metric_catalog.h"
#include "server/search/external.h"
#include "server/search/genome.h"
#include "server/search/nsga2.h"
#include "server/search/screen.h"
#include "server/search/tpe.h"

namespace frontier {
namespace {

using nlohmann::json;

constexpr double kNoResult = std::numeric_limits<double>::infinity();

// Mean of `metric` over the results that have it; nullopt when none does.
std::optional<double> MeanOf(const std::vector<const json*>& results, const std::string& metric) {
  double sum = 0;
  int n = 0;
  for (const json* result : results) {
    if (std::optional<double> value = MetricOf(*result, metric)) {
      sum += *value;
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / n;
}

double Violation(double value, const Constraint& constraint) {
  const auto scale = [](double bound) { return bound != 0 ? std::fabs(bound) : 1.0; };
  double violation = 0;
  if (constraint.max && value > *constraint.max)
    violation += (value - *constraint.max) / scale(*constraint.max);
  if (constraint.min && value < *constraint.min)
    violation += (*constraint.min - value) / scale(*constraint.min);
  return violation;
}

// Fitness of the means over `results` (see FitnessOf).
Fitness Score(const std::vector<Objective>& objectives, const std::vector<Constraint>& constraints,
              const std::vector<const json*>& results) {
  Fitness fitness;
  if (results.empty()) {
    fitness.violation = kNoResult;
    return fitness;
  }
  for (const Objective& objective : objectives) {
    if (ReportDerived(objective.metric)) {  // in no trial result: equal for every config, the report's front has it
      fitness.objectives.push_back(0);
      continue;
    }
    const std::optional<double> mean = MeanOf(results, objective.metric);
    if (!mean) return Fitness{{}, kNoResult};
    fitness.objectives.push_back(objective.maximize ? -*mean : *mean);
  }
  for (const Constraint& constraint : constraints) {
    if (ReportDerived(constraint.metric)) continue;
    const std::optional<double> mean = MeanOf(results, constraint.metric);
    if (!mean) return Fitness{{}, kNoResult};
    fitness.violation += Violation(*mean, constraint);
  }
  return fitness;
}

std::vector<const json*> CompletedResults(const Evaluation& evaluation) {
  std::vector<const json*> results;
  for (const TrialOutcome& trial : evaluation.trials) {
    if (trial.state == "completed" && trial.result.is_object()) results.push_back(&trial.result);
  }
  return results;
}

// A dimension's choices are ordinal when they are numbers in strictly
// increasing or strictly decreasing order.
bool Ordinal(const Dimension& dim) {
  if (dim.choices.size() < 2) return false;
  for (const json& choice : dim.choices) {
    if (!choice.is_number()) return false;
  }
  bool increasing = true, decreasing = true;
  for (size_t i = 1; i < dim.choices.size(); ++i) {
    const double a = dim.choices[i - 1].get<double>(), b = dim.choices[i].get<double>();
    increasing = increasing && a < b;
    decreasing = decreasing && a > b;
  }
  return increasing || decreasing;
}

// The space seen as genomes, with validity checks cached and every
// configuration that cannot run recorded once in `skipped`.
class SpaceDomain {
 public:
  explicit SpaceDomain(const SearchSpace& space) : space_(space) {
    for (const Dimension& dim : space.dimensions) {
      genes_.push_back(GeneSpec{static_cast<int>(dim.choices.size()), Ordinal(dim)});
    }
  }

  const SearchSpace& space() const { return space_; }
  const std::vector<GeneSpec>& genes() const { return genes_; }
  const std::vector<std::string>& skipped() const { return skipped_; }

  // Every dimension set: the configurations of the grid.
  Config ConfigOf(const Genome& genome) const {
    Config config = json::object();
    for (size_t d = 0; d < genome.size(); ++d) {
      config[space_.dimensions[d].name] = space_.dimensions[d].choices[static_cast<size_t>(genome[d])];
    }
    return config;
  }

  // The genome of a configuration that sets every dimension, or of the
  // baseline ({}) when every dimension lists the baseline's value; nullopt otherwise.
  std::optional<Genome> GenomeOf(const Config& config) const {
    Genome genome;
    for (const Dimension& dim : space_.dimensions) {
      const auto is_choice = [&](const json& choice) {
        return config.contains(dim.name) ? config[dim.name] == choice
                                         : IsBaseline(space_, json{{dim.name, choice}});
      };
      const auto it = std::find_if(dim.choices.begin(), dim.choices.end(), is_choice);
      if (it == dim.choices.end()) return std::nullopt;
      genome.push_back(static_cast<int>(it - dim.choices.begin()));
    }
    return genome;
  }

  // Not the baseline, and a valid trial spec.
  bool Runnable(const Config& config) {
    const std::string key = ConfigKey(config);
    auto it = runnable_.find(key);
    if (it != runnable_.end()) return it->second;
    bool runnable = !IsBaseline(space_, config);
    if (runnable) {
      if (std::optional<std::string> why = WhyInvalid(space_, config)) {
        skipped_.push_back(key + ": " + *why);
        runnable = false;
      }
    }
    return runnable_.emplace(key, runnable).first->second;
  }

 private:
  const SearchSpace& space_;
  std::vector<GeneSpec> genes_;
  std::map<std::string, bool> runnable_;
  std::vector<std::string> skipped_;
};

// Proposes a fixed list once: grid, random, sobol, and asha over random or sobol.
class ListStrategy final : public Strategy {
 public:
  ListStrategy(std::vector<Config> configs, int steps, std::vector<std::string> skipped)
      : steps_(steps), configs_(std::move(configs)), skipped_(std::move(skipped)) {}

  std::vector<Proposal> Ask() override {
    if (asked_) return {};
    asked_ = true;
    std::vector<Proposal> out;
    for (const Config& config : configs_) out.push_back({config, steps_});
    return out;
  }
  void Tell(const Evaluation&) override {}
  bool Finished() const override { return asked_; }
  const std::vector<std::string>& Skipped() const override { return skipped_; }

 private:
  int steps_;
  std::vector<Config> configs_;
  std::vector<std::string> skipped_;
  bool asked_ = false;
};

// Every runnable configuration of the grid, in grid order, the baseline left out.
std::vector<Config> RunnableGrid(SpaceDomain& domain) {
  std::vector<Config> configs;
  for (Config& config : EnumerateGrid(domain.space())) {
    if (domain.Runnable(config)) configs.push_back(std::move(config));
  }
  return configs;
}

std::vector<Config> RandomOrder(SpaceDomain& domain, int trials, int64_t seed) {
  std::vector<Config> configs = RunnableGrid(domain);
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  std::shuffle(configs.begin(), configs.end(), rng);
  if (trials > 0 && static_cast<size_t>(trials) < configs.size()) configs.resize(static_cast<size_t>(trials));
  return configs;
}

// `trials` configurations (0: every one) in Sobol' order; the parser bounds
// them (kMaxListedConfigs), and so does this, for a space that skipped it.
std::vector<Config> SobolOrder(SpaceDomain& domain, int trials, int64_t seed) {
  const size_t space_size = SpaceSize(domain.genes());
  const size_t wanted = trials > 0 ? std::min(static_cast<size_t>(trials), space_size) : space_size;
  if (wanted > kMaxListedConfigs) {
    throw SpaceError(domain.space().source, 0, "strategy",
                     "sobol would list " + std::to_string(wanted) +
                         " configurations at submission, more than " + std::to_string(kMaxListedConfigs));
  }
  GenomeStream stream(domain.genes(), static_cast<uint64_t>(seed));
  std::set<Genome> drawn;
  std::vector<Config> configs;
  while (configs.size() < wanted) {
    std::optional<Genome> genome = stream.Next(
        [&](const Genome& g) { return drawn.count(g) > 0 || !domain.Runnable(domain.ConfigOf(g)); });
    if (!genome) break;
    drawn.insert(*genome);
    configs.push_back(domain.ConfigOf(*genome));
  }
  return configs;
}

// A genome algorithm (Nsga2, Tpe: Ask, Tell, Finished) over the space's
// dimensions. The baseline joins the algorithm's model when its values are
// choices of every dimension; then nothing after the first round is proposed
// before the baseline's evaluation is in, so that a replay (which tells the
// baseline first) sees the same evaluations at every Ask.
template <typename Algorithm, typename Options>
class GenomeStrategy final : public Strategy {
 public:
  GenomeStrategy(const SearchSpace& space, int steps, Options options)
      : space_(space),
        steps_(steps),
        domain_(space_),
        baseline_genome_(domain_.GenomeOf(json::object())),
        algorithm_(domain_.genes(), options,
                   [this](const Genome& g) { return domain_.Runnable(domain_.ConfigOf(g)); }) {}

  std::vector<Proposal> Ask() override {
    if (asked_ && baseline_genome_ && !baseline_told_) return {};
    std::vector<Proposal> out;
    for (const Genome& genome : algorithm_.Ask()) out.push_back({domain_.ConfigOf(genome), steps_});
    asked_ = asked_ || !out.empty();
    return out;
  }

  void Tell(const Evaluation& evaluation) override {
    const bool baseline = evaluation.config.empty();
    if (baseline) baseline_told_ = true;
    const std::optional<Genome> genome = domain_.GenomeOf(evaluation.config);
    if (genome) algorithm_.Tell(*genome, FitnessOf(space_, evaluation));
  }

  bool Finished() const override { return algorithm_.Finished(); }
  const std::vector<std::string>& Skipped() const override { return domain_.skipped(); }

 private:
  const SearchSpace space_;
  int steps_;
  SpaceDomain domain_;
  std::optional<Genome> baseline_genome_;
  Algorithm algorithm_;
  bool asked_ = false;  // a round was proposed
  bool baseline_told_ = false;
};

Nsga2Options Nsga2OptionsOf(const StrategySpec& spec) {
  Nsga2Options options;
  options.population = static_cast<size_t>(spec.population);
  options.generations = static_cast<size_t>(spec.generations);
  options.max_evaluations = static_cast<size_t>(spec.trials);
  options.seed = static_cast<uint64_t>(spec.seed);
  return options;
}

TpeOptions TpeOptionsOf(const StrategySpec& spec) {
  TpeOptions options;
  if (spec.trials > 0) options.max_evaluations = static_cast<size_t>(spec.trials);
  options.seed = static_cast<uint64_t>(spec.seed);
  return options;
}

// Sobol' (and the genome stream that nsga2 and tpe start from) has a largest dimension.
void CheckSobolDimensions(const SearchSpace& space, const std::string& strategy) {
  if (space.dimensions.size() > SobolSequence::kMaxDimensions) {
    throw SpaceError(
        space.source, 0, "space",
        strategy + " supports at most " + std::to_string(SobolSequence::kMaxDimensions) + " dimensions");
  }
}

// One factor at a time: every choice of every dimension with everything else
// at the base (first the baseline). Cumulative: once a round and the base's
// own evaluation are in, the feasible change with the best mean of the
// metric becomes the base if it beats the base's mean (any feasible change
// beats a base without one; ties go to the earlier proposal), and the next
// round varies the dimensions not fixed yet. The path ends when no change
// improves or no dimension is left.
class AblationStrategy final : public Strategy {
 public:
  AblationStrategy(const SearchSpace& space, int steps)
      : space_(space), steps_(steps), domain_(space_), base_(json::object()) {
    const std::string& metric =
        space_.strategy.metric.empty() ? space_.objectives.at(0).metric : space_.strategy.metric;
    for (const Objective& objective : space_.objectives) {
      if (objective.metric == metric) objective_ = objective;
    }
    for (size_t d = 0; d < space_.dimensions.size(); ++d) remaining_.push_back(d);
  }

  std::vector<Proposal> Ask() override {
    if (finished_) return {};
    if (started_) {
      if (!space_.strategy.cumulative || !RoundDone()) return {};
      if (!Advance()) {
        finished_ = true;
        return {};
      }
    }
    started_ = true;
    round_.clear();
    for (size_t d : remaining_) {
      const Dimension& dim = space_.dimensions[d];
      for (const json& choice : dim.choices) {
        if (IsBaseline(space_, json{{dim.name, choice}})) continue;  // the base's own value
        Config config = base_;
        config[dim.name] = choice;
        if (domain_.Runnable(config)) round_.push_back(config);
      }
    }
    if (round_.empty()) finished_ = true;
    std::vector<Proposal> out;
    for (const Config& config : round_) out.push_back({config, steps_});
    return out;
  }

  void Tell(const Evaluation& evaluation) override {
    std::optional<double> value;
    if (FitnessOf(space_, evaluation).feasible())
      value = MeanOf(CompletedResults(evaluation), objective_.metric);
    told_.emplace(ConfigKey(evaluation.config), value);
  }

  bool Finished() const override { return finished_ || (started_ && !space_.strategy.cumulative); }
  const std::vector<std::string>& Skipped() const override { return domain_.skipped(); }

 private:
  bool Told(const Config& config) const { return told_.count(ConfigKey(config)) > 0; }
  bool RoundDone() const {
    return Told(base_) && std::all_of(round_.begin(), round_.end(), [&](const Config& c) { return Told(c); });
  }

  // Moves the base to the round's best improving change; false when none improves.
  bool Advance() {
    std::optional<double> best = told_.at(ConfigKey(base_));
    const Config* chosen = nullptr;
    for (const Config& config : round_) {
      const std::optional<double> value = told_.at(ConfigKey(config));
      if (value && (!best || (objective_.maximize ? *value > *best : *value < *best))) {
        best = value;
        chosen = &config;
      }
    }
    if (!chosen) return false;
    base_ = *chosen;
    remaining_.erase(std::remove_if(remaining_.begin(), remaining_.end(),
                                    [&](size_t d) { return base_.contains(space_.dimensions[d].name); }),
                     remaining_.end());
    return true;
  }

  const SearchSpace space_;
  int steps_;
  SpaceDomain domain_;
  Objective objective_;
  Config base_;
  std::vector<size_t> remaining_;                      // dimensions the path has not fixed
  std::vector<Config> round_;                          // the current round's proposals
  std::map<std::string, std::optional<double>> told_;  // config key -> mean of the metric when feasible
  bool started_ = false;
  bool finished_ = false;
};

}  // namespace

bool IsOrdinal(const Dimension& dim) { return Ordinal(dim); }

std::optional<double> CompletedMean(const Evaluation& evaluation, const std::string& metric) {
  return MeanOf(CompletedResults(evaluation), metric);
}

int FullSteps(const SearchSpace& space) { return MakeTrialSpec(space, Config::object(), 1, "").task.steps; }

Fitness FitnessOf(const SearchSpace& space, const Evaluation& evaluation) {
  return Score(space.objectives, space.constraints, CompletedResults(evaluation));
}

// The external strategy's settings, validated by the parser into spec.options.
ExternalOptions ExternalOptionsOf(const StrategySpec& spec) {
  ExternalOptions options;
  options.batch = spec.options.value("batch", options.batch);
  options.trials = spec.trials;
  options.max_invalid_answers = spec.options.value("max_invalid", options.max_invalid_answers);
  return options;
}

std::unique_ptr<Strategy> MakeStrategy(const SearchSpace& space, const ProposerFactory& proposers) {
  const StrategySpec& spec = space.strategy;
  const int steps = FullSteps(space);
  if (spec.name == "external") {
    if (!proposers) {
      throw SpaceError(space.source, 0, "strategy.name",
                       "external: this coordinator has no proposer client (a build without server/proposer)");
    }
    return MakeExternalStrategy(space, steps, proposers(space), ExternalOptionsOf(spec));
  }
  const std::string proposer = spec.name == "asha" ? spec.proposer : spec.name;
  if (proposer == "nsga2") {
    CheckSobolDimensions(space, proposer);
    return std::make_unique<GenomeStrategy<Nsga2, Nsga2Options>>(space, steps, Nsga2OptionsOf(spec));
  }
  if (proposer == "tpe") {
    CheckSobolDimensions(space, proposer);
    return std::make_unique<GenomeStrategy<Tpe, TpeOptions>>(space, steps, TpeOptionsOf(spec));
  }
  if (proposer == "ablation") return std::make_unique<AblationStrategy>(space, steps);
  SpaceDomain domain(space);
  std::vector<Config> configs;
  if (proposer == "grid") {
    configs = RunnableGrid(domain);
  } else if (proposer == "random") {
    configs = RandomOrder(domain, spec.trials, spec.seed);
  } else if (proposer == "sobol") {
    CheckSobolDimensions(space, proposer);
    configs = SobolOrder(domain, spec.trials, spec.seed);
  } else {
    throw SpaceError(space.source, 0, "strategy.name", "unknown strategy '" + spec.name + "'");
  }
  return std::make_unique<ListStrategy>(std::move(configs), steps, domain.skipped());
}

std::vector<Proposal> Replay(Strategy& strategy, const std::optional<Evaluation>& baseline,
                             const std::vector<StoredProposal>& history) {
  if (strategy.Restore(baseline, history)) return {};
  std::map<std::string, const StoredProposal*> stored;
  for (const StoredProposal& p : history) stored[ConfigKey(p.proposal.config)] = &p;
  if (baseline) strategy.Tell(*baseline);
  std::vector<Proposal> beyond;
  size_t matched = 0;
  while (beyond.empty()) {
    const std::vector<Proposal> batch = strategy.Ask();
    if (batch.empty()) break;
    for (const Proposal& proposal : batch) {
      auto it = stored.find(ConfigKey(proposal.config));
      if (it == stored.end() || it->second->proposal.steps != proposal.steps) {
        beyond.push_back(proposal);
        continue;
      }
      ++matched;
      if (it->second->evaluation) strategy.Tell(*it->second->evaluation);
    }
  }
  if (matched < history.size()) return {};
  return beyond;
}

EarlyStopping::EarlyStopping(const SearchSpace& space, AshaOptions options)
    : asha_(options),
      screen_(space.screen.in_trial ? space.screen : ScreenSpec{}),
      space_objectives_(space.objectives),
      space_constraints_(space.constraints) {
  auto measured_during_training = [](const std::string& metric) {
    const MetricInfo* info = FindMetric(metric);
    return info != nullptr && info->in_progress;
  };
  for (const Objective& objective : space.objectives) {
    if (measured_during_training(objective.metric)) objectives_.push_back(objective);
  }
  for (const Constraint& constraint : space.constraints) {
    if (measured_during_training(constraint.metric)) constraints_.push_back(constraint);
  }
}

StopDecision EarlyStopping::Observe(const RunningTrial& trial, const json& event) {
  if (!event.is_object()) return {};
  if (!trial.is_baseline) {
    // A seed of a configuration stopped at a rung would stop there: it stops now.
    if (std::optional<StopDecision> stopped = Stopped(trial.config_key)) {
      median_step_ms_.erase(trial.trial_id);
      return *stopped;
    }
  }
  const std::string kind = StringAt(event, {"event"});  // another type reads as absent
  const std::optional<double> step = MetricOf(event, "step");
  if (kind == "progress") {
    if (std::optional<double> median = MetricOf(event, "median_step_time_ms")) {
      if (*median > 0) {
        median_step_ms_[trial.trial_id] = *median;
        if (step && *step >= screen_.steps) {
          const StopDecision screened = ScreenAt(trial, *median);
          if (screened.stop) median_step_ms_.erase(trial.trial_id);
          return screened;
        }
      }
    }
    return {};
  }
  // A rung is an int: a larger step (refused when reported, stored by an older version) decides nothing.
  if (kind != "eval" || !step || !(*step > 0 && *step <= std::numeric_limits<int>::max())) return {};
  json partial = json::object();
  // An evaluation event carries the quality metrics under their names; the
  // step time and throughput follow from the step times.
  static const std::vector<std::string> kEvaluated =
      MetricNames([](const MetricInfo& m) { return m.in_progress && m.quality; });
  for (const std::string& metric : kEvaluated) {
    if (event.contains(metric)) partial[metric] = event[metric];
  }
  std::optional<double> step_ms;
  auto median = median_step_ms_.find(trial.trial_id);
  if (median != median_step_ms_.end()) {
    step_ms = median->second;
  } else if (std::optional<double> train_time = MetricOf(event, "train_time_s");
             train_time && *train_time > 0) {
    step_ms = *train_time * 1e3 / *step;
  }
  if (step_ms) {
    partial["step_time_ms"] = {{"median", *step_ms}};
    partial["throughput"] = {{"samples_per_s", trial.batch_size * 1e3 / *step_ms}};
    if (*step >= screen_.steps) {
      if (StopDecision screened = ScreenAt(trial, *step_ms); screened.stop) {
        median_step_ms_.erase(trial.trial_id);
        return screened;
      }
    }
  }
  const Fitness fitness = Score(objectives_, constraints_, {&partial});
  const StopDecision decision =
      asha_.Report(trial.config_key, trial.seed, static_cast<int>(*step), fitness, !trial.is_baseline);
  if (decision.stop) median_step_ms_.erase(trial.trial_id);
  return decision;
}

StopDecision EarlyStopping::ScreenAt(const RunningTrial& trial, double step_ms) {
  if (!screen_.in_trial || !(step_ms > 0) || !screen_measured_.insert(trial.config_key).second) return {};
  std::map<std::string, double> values = {{"step_time_ms", step_ms},
                                          {"throughput", trial.batch_size * 1e3 / step_ms}};
  if (trial.is_baseline) {
    screen_baseline_ = std::move(values);
    // Those measured before it: judged on the objectives now; a dropped one
    // stops at its next event (Observe reads Stopped first). One that ASHA
    // scored at its first rung meanwhile is left to ASHA: it was compared at
    // equal fidelity, and its later seeds may have been added.
    for (const auto& [config_key, waiting] : screen_waiting_) {
      if (rungs().empty() || !asha_.Decision(config_key, rungs().front())) Judge(config_key, waiting);
    }
    screen_waiting_.clear();
    return {};
  }
  if (!screen_baseline_) {
    // The constraints judge at once (an empty yardstick judges no objective).
    StopDecision decision = Judge(trial.config_key, values);
    if (!decision.stop) screen_waiting_.emplace_back(trial.config_key, std::move(values));
    return decision;
  }
  return Judge(trial.config_key, values);
}

StopDecision EarlyStopping::Judge(const std::string& config_key,
                                  const std::map<std::string, double>& values) {
  ScreenMeasurement baseline;
  baseline.config_key = "{}";
  if (screen_baseline_) baseline.values = *screen_baseline_;
  ScreenMeasurement measured;
  measured.config_key = config_key;
  measured.values = values;
  const ScreenVerdict verdict =
      ScreenOut(space_objectives_, space_constraints_, screen_, baseline, {measured}).front();
  if (verdict.kept) return {};
  StopDecision decision{true, std::string(kScreenedOut) + verdict.reason};
  screened_out_[config_key] = decision;
  return decision;
}

std::optional<StopDecision> EarlyStopping::Stopped(const std::string& config_key) const {
  const auto screened = screened_out_.find(config_key);
  if (screened != screened_out_.end()) return screened->second;
  return asha_.Stopped(config_key);
}

bool EarlyStopping::PassedFirstRung(const std::string& config_key) const {
  if (asha_.rungs().empty()) return false;
  const std::optional<StopDecision> decision = asha_.Decision(config_key, asha_.rungs().front());
  return decision && !decision->stop;
}

std::unique_ptr<EarlyStopping> MakeEarlyStopping(const SearchSpace& space) {
  if (space.strategy.name != "asha") return nullptr;
  AshaOptions options;
  options.min_steps = space.strategy.min_steps;
  options.eta = space.strategy.eta;
  options.max_steps = FullSteps(space);
  return std::make_unique<EarlyStopping>(space, options);
}

}  // namespace frontier
