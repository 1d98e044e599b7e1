// The `objectives` and `constraints` sections, and the metric each names,
// checked against the metric catalog (SpaceParser::Metric, which the parity
// section uses too).
#include "search_spaces/space_parser.h"

#include <algorithm>

#include "search_spaces/metric_catalog.h"

namespace frontier::space_reading {

std::string SpaceParser::Metric(const Fields& fields, bool quality_only) const {
  std::string metric;
  fields.String("metric", metric);
  const std::vector<std::string> known =
      MetricNames([&](const MetricInfo& m) { return quality_only ? m.quality : m.selectable; });
  const MetricInfo* info = FindMetric(metric);
  if (info == nullptr || std::find(known.begin(), known.end(), metric) == known.end()) {
    Fail(fields.Field("metric"),
         (quality_only ? "'" + metric + "' is not a quality metric" : "unknown metric '" + metric + "'") +
             "; expected one of " + Join(known));
  }
  if (!quality_only && info->test_split) {
    Fail(fields.Field("metric"), "the test split is for the final report; select on val_" + metric.substr(5));
  }
  return metric;
}

void SpaceParser::ParseObjectives(const YAML::Node& node, SearchSpace& space) const {
  if (!node.IsSequence()) {
    Fail("objectives", "expected a list of {metric, goal}, got " + Describe(YamlToJson(node)));
  }
  if (node.size() == 0) Fail("objectives", "needs at least one objective");
  for (size_t i = 0; i < node.size(); ++i) {
    Fields fields(*this, node[i], ElementPath("objectives", i), {"metric", "goal"});
    fields.Required("metric");
    Objective objective;
    objective.metric = Metric(fields, false);
    objective.maximize = FindMetric(objective.metric)->maximize;
    std::string goal = objective.maximize ? "maximize" : "minimize";
    fields.Choice("goal", goal, {"maximize", "minimize"});
    objective.maximize = goal == "maximize";
    for (const Objective& earlier : space.objectives) {
      if (earlier.metric == objective.metric) {
        Fail(fields.Field("metric"), "duplicate objective " + objective.metric);
      }
    }
    space.objectives.push_back(objective);
  }
}

void SpaceParser::ParseConstraints(const YAML::Node& node, SearchSpace& space) const {
  if (!node.IsSequence()) {
    Fail("constraints", "expected a list of {metric, max, min}, got " + Describe(YamlToJson(node)));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    Fields fields(*this, node[i], ElementPath("constraints", i), {"metric", "min", "max"});
    fields.Required("metric");
    Constraint constraint;
    constraint.metric = Metric(fields, false);
    constraint.min = fields.Number("min");
    constraint.max = fields.Number("max");
    if (!constraint.min && !constraint.max) Fail(fields.Field("metric"), "needs a min or a max");
    if (constraint.min && constraint.max && *constraint.min > *constraint.max) {
      Fail(fields.Field("min"), "is above max");
    }
    for (const Constraint& earlier : space.constraints) {
      if (earlier.metric == constraint.metric) {
        Fail(fields.Field("metric"),
             "duplicate constraint on " + constraint.metric + "; put min and max in one entry");
      }
    }
    space.constraints.push_back(constraint);
  }
}

}  // namespace frontier::space_reading
