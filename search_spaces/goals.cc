#include "search_spaces/search_space.h"

#include "search_spaces/metric_catalog.h"

namespace frontier {

using nlohmann::json;

json GoalsJson(const SearchSpace& space) {
  json goals = {{"objectives", json::array()}, {"constraints", json::array()}};
  for (const Objective& o : space.objectives) {
    goals["objectives"].push_back({{"metric", o.metric}, {"goal", o.maximize ? "maximize" : "minimize"}});
  }
  for (const Constraint& c : space.constraints) {
    goals["constraints"].push_back({{"metric", c.metric},
                                    {"min", c.min ? json(*c.min) : json()},
                                    {"max", c.max ? json(*c.max) : json()}});
  }
  goals["parity"] = {
      {"metric", space.parity.metric}, {"margin", space.parity.margin}, {"test", space.parity.test},
      {"looks", space.parity.looks}};
  return goals;
}

std::optional<SearchSpace> GoalsOnlySpace(const std::string& name, const json& goals) {
  if (!goals.is_object() || !goals.contains("objectives") || !goals.contains("constraints") ||
      !goals.contains("parity")) {
    return std::nullopt;
  }
  SearchSpace space;
  space.name = name;
  for (const json& o : goals.at("objectives")) {
    space.objectives.push_back({o.at("metric").get<std::string>(), o.at("goal") == "maximize"});
  }
  for (const json& c : goals.at("constraints")) {
    Constraint constraint;
    constraint.metric = c.at("metric").get<std::string>();
    if (c.at("min").is_number()) constraint.min = c["min"].get<double>();
    if (c.at("max").is_number()) constraint.max = c["max"].get<double>();
    space.constraints.push_back(constraint);
  }
  const json& parity = goals.at("parity");
  space.parity.metric = parity.at("metric").get<std::string>();
  space.parity.margin = parity.at("margin").get<double>();
  space.parity.test = parity.at("test").get<std::string>();
  space.parity.looks = parity.value("looks", 1);
  return space;
}

bool LowerIsBetter(const std::string& metric, const std::vector<Objective>& objectives) {
  for (const Objective& objective : objectives) {
    if (objective.metric == metric) return !objective.maximize;
  }
  if (const MetricInfo* info = FindMetric(metric)) return !info->maximize;
  const std::string suffix = "_loss";
  return metric.size() >= suffix.size() &&
         metric.compare(metric.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace frontier
