#include "server/report/front.h"

#include <optional>
#include <string>
#include <utility>

#include "server/analysis/hypervolume.h"
#include "server/analysis/pareto.h"
#include "server/report/format.h"

namespace frontier {

void MarkFront(const std::vector<Objective>& objectives, std::vector<ConfigSummary>& configs) {
  std::vector<bool> maximize;
  for (const Objective& objective : objectives) maximize.push_back(objective.maximize);
  std::vector<size_t> candidates;
  std::vector<std::vector<double>> points;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!configs[i].feasible) continue;
    std::vector<double> point;
    for (const Objective& objective : objectives) {
      auto it = configs[i].metrics.find(objective.metric);
      if (it == configs[i].metrics.end()) break;
      point.push_back(it->second.mean);
    }
    if (point.size() != objectives.size()) continue;
    candidates.push_back(i);
    points.push_back(std::move(point));
  }
  for (size_t index : ParetoFront(points, maximize)) configs[candidates[index]].on_front = true;
}

void ComputeHypervolume(Report& report) {
  const std::vector<Objective>& objectives = report.objectives;
  report.reference_point.assign(objectives.size(), 0.0);
  report.hypervolume = 0;
  if (objectives.empty()) {
    report.hypervolume_note = "no objectives: hypervolume not computed";
    return;
  }
  const ConfigSummary* baseline = nullptr;
  for (const ConfigSummary& config : report.configs) {
    if (config.is_baseline) baseline = &config;
  }
  if (baseline == nullptr || baseline->seeds_completed == 0) {
    report.hypervolume_note =
        "no baseline data: hypervolume not computed (it is normalized by the baseline's means)";
    return;
  }
  std::vector<double> scale;
  for (const Objective& objective : objectives) {
    auto it = baseline->metrics.find(objective.metric);
    if (it == baseline->metrics.end() || !(it->second.mean > 0)) {
      report.hypervolume_note =
          "the baseline's mean " + objective.metric +
          " is missing or not positive: hypervolume not computed (it is normalized by it)";
      return;
    }
    scale.push_back(it->second.mean);
  }
  std::vector<std::vector<double>> points;
  for (const ConfigSummary& config : report.configs) {
    if (!config.on_front) continue;
    std::vector<double> point;
    for (size_t i = 0; i < objectives.size(); ++i) {
      const double value = config.metrics.at(objectives[i].metric).mean;
      if (!objectives[i].maximize && !(value > 0)) {
        report.hypervolume_note = "front config " + config.config_key + " has a non-positive " +
                                  objectives[i].metric + " to minimize: hypervolume not computed";
        return;
      }
      point.push_back(objectives[i].maximize ? value / scale[i] : scale[i] / value);
    }
    points.push_back(std::move(point));
  }
  const std::optional<double> hypervolume = Hypervolume(points, report.reference_point);
  if (!hypervolume) {
    report.hypervolume_note = Printf(
        "hypervolume not computed: the exact hypervolume of %zu front configs in %zu objectives takes more "
        "than %.0f steps (it grows as configs^(objectives - 1)); the front itself is complete",
        points.size(), objectives.size(), kMaxHypervolumeSteps);
    return;
  }
  report.hypervolume = *hypervolume;
  report.hypervolume_note = Printf(
      "exact hypervolume of the %zu front configs in baseline-normalized objective space: each objective "
      "mean divided by the baseline's (inverted, baseline / value, for objectives to minimize), so higher "
      "is better and the baseline alone scores 1; reference point the origin",
      points.size());
}

}  // namespace frontier
