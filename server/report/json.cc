#include <optional>

#include <nlohmann/json.hpp>

#include "server/report/report.h"
#include "server/report/views.h"
#include "server/search/external.h"

namespace frontier {
namespace {

using nlohmann::json;

json IntervalToJson(const std::optional<Interval>& interval) {
  if (!interval) return nullptr;
  return {{"value", interval->value},
          {"low", interval->low},
          {"high", interval->high},
          {"n_variant", interval->n_variant},
          {"n_baseline", interval->n_baseline}};
}

json OptionalToJson(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

}  // namespace

namespace {

// docs/strategies.md#screening; null when the experiment did not screen.
json ScreeningToJson(const std::optional<ScreeningSummary>& screening) {
  if (!screening) return nullptr;
  json configs = json::array();
  for (const ScreenedConfig& c : screening->configs) {
    configs.push_back({{"config_key", c.config_key}, {"label", c.label}, {"kept", c.kept}, {"reason", c.reason}});
  }
  return {{"steps", screening->steps},       {"in_trial", screening->in_trial}, {"trials", screening->trials},
          {"device_s", screening->device_s}, {"dropped", screening->dropped()}, {"configs", configs}};
}

}  // namespace

nlohmann::json ReportToJson(const Report& report) {
  json objectives = json::array();
  for (const Objective& o : report.objectives) {
    objectives.push_back({{"metric", o.metric}, {"goal", o.maximize ? "maximize" : "minimize"}});
  }
  json constraints = json::array();
  for (const Constraint& c : report.constraints) {
    constraints.push_back(
        {{"metric", c.metric}, {"min", OptionalToJson(c.min)}, {"max", OptionalToJson(c.max)}});
  }
  json configs = json::array();
  for (const ConfigSummary& c : report.configs) {
    json metrics = json::object();
    for (const auto& [name, s] : c.metrics) {
      metrics[name] = {
          {"n", s.n}, {"mean", s.mean}, {"std", s.std}, {"ci_low", s.ci_low}, {"ci_high", s.ci_high}};
    }
    json curve = json::array();
    for (const CurvePoint& p : c.curve) {
      curve.push_back({{"train_time_s", p.train_time_s}, {"value", p.value}, {"n", p.n}});
    }
    configs.push_back({{"config_key", c.config_key},
                       {"config", c.config},
                       {"label", c.label},
                       {"learning_curve", curve},
                       {"profile_shares", c.profile_shares},
                       {"cost",
                        {{"trials_run", c.cost.trials_run},
                         {"device_s", c.cost.device_s},
                         {"train_s", c.cost.train_s},
                         {"profile_s", c.cost.profile_s},
                         {"other_s", c.cost.other_s},
                         {"stopped_s", c.cost.stopped_s},
                         {"failed_s", c.cost.failed_s}}},
                       {"is_baseline", c.is_baseline},
                       {"seeds_completed", c.seeds_completed},
                       {"trials_total", c.trials_total},
                       {"trials_failed", c.trials_failed},
                       {"trials_stopped", c.trials_stopped},
                       {"metrics", metrics},
                       {"feasible", c.feasible},
                       {"infeasible_reason", c.infeasible_reason},
                       {"on_front", c.on_front},
                       {"speedup", IntervalToJson(c.speedup)},
                       {"quality_delta", IntervalToJson(c.quality_delta)},
                       {"parity", c.parity},
                       {"parity_test", c.parity_test},
                       {"proposer", c.proposer},
                       {"fallback", IsFallbackProposer(c.proposer)},
                       {"rationale", c.rationale},
                       {"failure", c.failure},
                       {"ranks", c.ranks},
                       {"scaling_efficiency", OptionalToJson(c.scaling_efficiency)},
                       {"bottleneck",
                        {{"verdicts", c.bottleneck_verdicts},
                         {"summary", c.bottleneck_summary},
                         {"profiles", c.profiles}}}});
  }
  return {
      {"experiment_id", report.experiment_id},
      {"name", report.name},
      {"objectives", objectives},
      {"constraints", constraints},
      {"parity",
       {{"metric", report.parity.metric}, {"margin", report.parity.margin}, {"test", report.parity.test}}},
      {"configs", configs},
      {"hypervolume", report.hypervolume},
      {"reference_point", report.reference_point},
      {"hypervolume_note", report.hypervolume_note},
      {"time_to_target_goal",
       report.time_to_target_goal ? json(*report.time_to_target_goal) : json(nullptr)},
      {"proposer_calls",
       {{"calls", report.proposer_calls.calls},
        {"failed", report.proposer_calls.failed},
        {"accepted", report.proposer_calls.accepted},
        {"rejected", report.proposer_calls.rejected},
        {"latency_ms", report.proposer_calls.latency_ms},
        {"model_calls", report.proposer_calls.model_calls},
        {"prompt_tokens", report.proposer_calls.prompt_tokens},
        {"completion_tokens", report.proposer_calls.completion_tokens},
        {"fallback_configs", FallbackConfigs(report)},
        {"last_error", report.proposer_calls.last_error},
        {"paused", report.proposer_calls.paused}}},
      {"screening", ScreeningToJson(report.screening)},
      {"goodput", GoodputToJson(TotalCost(report))}};
}

}  // namespace frontier
