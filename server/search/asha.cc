#include "server/search/asha.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace frontier {
namespace {

Fitness MeanFitness(const std::map<int64_t, Fitness>& seeds) {
  Fitness mean;
  for (const auto& [seed, fitness] : seeds) {
    if (mean.objectives.empty()) mean.objectives.assign(fitness.objectives.size(), 0.0);
    for (size_t i = 0; i < fitness.objectives.size() && i < mean.objectives.size(); ++i) {
      mean.objectives[i] += fitness.objectives[i] / static_cast<double>(seeds.size());
    }
    mean.violation += fitness.violation / static_cast<double>(seeds.size());
  }
  return mean;
}

}  // namespace

std::vector<int> AshaRungs(const AshaOptions& options) {
  if (options.min_steps < 1 || options.eta < 2) {
    throw std::invalid_argument("AshaRungs: needs min_steps >= 1 and eta >= 2");
  }
  std::vector<int> rungs;
  for (int64_t step = options.min_steps; step < options.max_steps; step *= options.eta) {
    rungs.push_back(static_cast<int>(step));
  }
  return rungs;
}

AshaStopper::AshaStopper(AshaOptions options) : options_(options), rungs_(AshaRungs(options)) {}

StopDecision AshaStopper::Report(const std::string& config, int64_t seed, int step, const Fitness& fitness,
                                 bool may_stop) {
  if (std::find(rungs_.begin(), rungs_.end(), step) == rungs_.end()) return {};
  Rung& rung = by_step_[step];
  auto [it, first] = rung.index.emplace(config, rung.entries.size());
  if (first) rung.entries.push_back(Entry{config, {}, {}});
  Entry& entry = rung.entries[it->second];
  entry.seeds[seed] = fitness;
  if (!first) return entry.decision;

  std::vector<Fitness> points;
  points.reserve(rung.entries.size());
  for (const Entry& e : rung.entries) points.push_back(MeanFitness(e.seeds));
  const std::vector<size_t> order = RankOrder(points);
  const size_t n = points.size();
  const size_t quota = std::max<size_t>(1, n / static_cast<size_t>(options_.eta));
  const size_t position =
      static_cast<size_t>(std::find(order.begin(), order.end(), it->second) - order.begin());
  // The extremes of the first front continue whatever the quota: the best
  // configuration at this rung in some objective. They all have infinite
  // crowding distance, so the quota would otherwise choose among them by
  // arrival; and in two objectives max(1, floor(n / eta)) is often a single
  // place, which would stop one end of the front.
  bool extreme = false;
  if (position >= quota && points[it->second].feasible()) {
    const std::vector<size_t> first_front = NonDominatedFronts(points).front();
    const auto member = std::find(first_front.begin(), first_front.end(), it->second);
    if (member != first_front.end()) {
      const std::vector<double> distance = CrowdingDistances(points, first_front);
      extreme = std::isinf(distance[static_cast<size_t>(member - first_front.begin())]);
    }
  }
  if (may_stop && position >= quota && !extreme) {
    entry.decision.stop = true;
    entry.decision.reason = "asha: at step " + std::to_string(step) + " ranked " +
                            std::to_string(position + 1) + " of " + std::to_string(n) +
                            " configurations; the best " + std::to_string(quota) + " continue";
  }
  return entry.decision;
}

std::optional<StopDecision> AshaStopper::Decision(const std::string& config, int step) const {
  const auto rung = by_step_.find(step);
  if (rung == by_step_.end()) return std::nullopt;
  const auto it = rung->second.index.find(config);
  if (it == rung->second.index.end()) return std::nullopt;
  return rung->second.entries[it->second].decision;
}

std::optional<StopDecision> AshaStopper::Stopped(const std::string& config) const {
  for (const auto& [step, rung] : by_step_) {  // by step, lowest first
    const auto it = rung.index.find(config);
    if (it != rung.index.end() && rung.entries[it->second].decision.stop) return rung.entries[it->second].decision;
  }
  return std::nullopt;
}

}  // namespace frontier
