#include "server/search/adaptive_seeds.h"

#include <cmath>
#include <map>
#include <optional>

#include "search_spaces/metric_catalog.h"
#include "server/analysis/parity.h"
#include "server/analysis/statistics.h"

namespace frontier {
namespace {

// The parity metric of every completed seed.
std::map<int64_t, double> QualityBySeed(const SearchSpace& space, const Evaluation& evaluation) {
  std::map<int64_t, double> by_seed;
  for (const TrialOutcome& trial : evaluation.trials) {
    if (trial.state != "completed") continue;
    const std::optional<double> value = MetricOf(trial.result, space.parity.metric);
    if (value && std::isfinite(*value)) by_seed[trial.seed] = *value;
  }
  return by_seed;
}

// The candidate's objectives to minimize, each one standard error of its
// mean in its favour; nullopt when an objective has no value.
std::optional<std::vector<double>> Optimistic(const SearchSpace& space, const Evaluation& evaluation) {
  std::vector<double> point;
  for (const Objective& objective : space.objectives) {
    if (ReportDerived(objective.metric)) {  // in no trial result: equal for every config
      point.push_back(0);
      continue;
    }
    std::vector<double> values;
    for (const TrialOutcome& trial : evaluation.trials) {
      if (trial.state != "completed") continue;
      const std::optional<double> value = MetricOf(trial.result, objective.metric);
      if (value && std::isfinite(*value)) values.push_back(*value);
    }
    if (values.empty()) return std::nullopt;
    const MetricSummary s = SummarizeMetric(values);
    const double se = s.n > 1 ? s.std / std::sqrt(static_cast<double>(s.n)) : 0.0;
    point.push_back(objective.maximize ? -(s.mean + se) : s.mean - se);
  }
  return point;
}

}  // namespace

bool WantsAnotherSeed(const SearchSpace& space, const Evaluation& baseline, const Evaluation& candidate,
                      const std::vector<Fitness>& others) {
  if (!space.AdaptiveSeeds() || candidate.trials.size() >= static_cast<size_t>(space.max_repeats)) return false;
  for (const TrialOutcome& trial : candidate.trials) {
    if (trial.state != "completed") return false;  // a failure repeats; it is no verdict to refine
  }
  const QualityComparison comparison =
      CompareQuality(QualityBySeed(space, candidate), QualityBySeed(space, baseline), space.parity.test == "paired",
                     space.parity.margin, LowerIsBetter(space.parity.metric, space.objectives),
                     SequentialOneSidedQuantile(space.parity.looks));
  if (comparison.verdict != "inconclusive") return false;
  if (!FitnessOf(space, candidate).feasible()) return false;
  const std::optional<std::vector<double>> optimistic = Optimistic(space, candidate);
  if (!optimistic) return false;
  for (const Fitness& other : others) {
    if (other.feasible() && Dominates(other.objectives, *optimistic)) return false;
  }
  return true;
}

}  // namespace frontier
