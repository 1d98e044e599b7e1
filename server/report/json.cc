#include <optional>
#include <stdexcept>
#include <string>

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

json SummaryToJson(const MetricSummary& s) {
  return {{"n", s.n}, {"mean", s.mean}, {"std", s.std}, {"ci_low", s.ci_low}, {"ci_high", s.ci_high}};
}

json SummaryToJson(const std::optional<MetricSummary>& s) { return s ? SummaryToJson(*s) : json(nullptr); }

// docs/report.md#the-onboard-front.
json OnboardToJson(const Report& report, const OnboardView& view) {
  json points = json::array();
  for (const OnboardPoint& p : view.points) {
    points.push_back({{"config_key", p.config->config_key},
                      {"label", p.config->label},
                      {"row", p.row},
                      {"format", p.format},
                      {"latency_ms", SummaryToJson(p.latency_ms)},
                      {"quality", SummaryToJson(p.quality)},
                      {"latency_p99_ms", SummaryToJson(p.latency_p99_ms)},
                      {"size_bytes", SummaryToJson(p.size_bytes)},
                      {"feasible", p.config->feasible},
                      {"on_front", p.on_front},
                      {"on_training_front", p.config->on_front}});
  }
  json configs = json::array();
  for (const OnboardConfig& c : view.configs) {
    json parity = nullptr;
    if (c.int8_parity) {
      parity = {{"verdict", c.int8_parity->verdict},
                {"test", c.int8_parity->test},
                {"delta", IntervalToJson(c.int8_parity->delta)}};
    }
    json formats = json::array();
    for (const auto& [format, measured] : c.config->deploy->formats) formats.push_back(format);
    const auto int8 = c.config->deploy->formats.find("int8");
    configs.push_back({{"config_key", c.config->config_key},
                       {"label", c.config->label},
                       {"row", c.row},
                       {"engine", c.config->deploy->engine},
                       {"formats", formats},
                       {"int8_parity", parity},
                       {"int8_speedup", IntervalToJson(c.int8_speedup)},
                       {"faster_at_parity", c.faster_at_parity},
                       {"quantized_layers", OptionalToJson(c.quantized_layers)},
                       {"quantized_flop_share", OptionalToJson(c.quantized_flop_share)},
                       {"float_layers", int8 == c.config->deploy->formats.end() || int8->second.float_layers.is_null()
                                            ? json::array()
                                            : int8->second.float_layers},
                       {"summary", QuantizationLine(report, view, c)}});
  }
  json changes = json::array();
  for (const RankChange& change : view.rank_changes) {
    changes.push_back({{"config_key", change.config->config_key},
                       {"label", change.config->label},
                       {"front", change.onboard ? "onboard" : "training"},
                       {"formats", change.formats},
                       {"text", change.text}});
  }
  return {{"quality_metric", view.quality_metric},
          {"engine", view.engine},
          {"batch", view.batch},
          {"threads", view.threads},
          {"margin", report.parity.margin},
          {"points", points},
          {"configs", configs},
          {"rank_changes", changes},
          {"notes", OnboardNotes(report, view)}};
}

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

json ConfigToJson(const ConfigSummary& c) {
  json metrics = json::object();
  for (const auto& [name, s] : c.metrics) metrics[name] = SummaryToJson(s);
  json curve = json::array();
  for (const CurvePoint& p : c.curve) {
    curve.push_back({{"train_time_s", p.train_time_s}, {"value", p.value}, {"n", p.n}});
  }
  return {{"config_key", c.config_key},
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
          {"parity_bound", c.parity_bound ? json{{"bound", c.parity_bound->bound},
                                                 {"direction", c.parity_bound->at_least ? ">=" : "<="},
                                                 {"quantile", c.parity_bound->quantile}}
                                          : json(nullptr)},
          {"parity", c.parity},
          {"parity_test", c.parity_test},
          {"proposer", c.proposer},
          {"fallback", IsFallbackProposer(c.proposer)},
          {"rationale", c.rationale},
          {"failure", c.failure},
          {"ranks", c.ranks},
          {"scaling_efficiency", OptionalToJson(c.scaling_efficiency)},
          {"bottleneck",
           {{"verdicts", c.bottleneck_verdicts}, {"summary", c.bottleneck_summary}, {"profiles", c.profiles}}}};
}

// Everything but the configs ("configs" holds `configs`).
json ReportFrame(const Report& report, json configs) {
  json objectives = json::array();
  for (const Objective& o : report.objectives) {
    objectives.push_back({{"metric", o.metric}, {"goal", o.maximize ? "maximize" : "minimize"}});
  }
  json constraints = json::array();
  for (const Constraint& c : report.constraints) {
    constraints.push_back(
        {{"metric", c.metric}, {"min", OptionalToJson(c.min)}, {"max", OptionalToJson(c.max)}});
  }
  json out = {
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
  if (const std::optional<OnboardView> onboard = Onboard(report)) out["onboard"] = OnboardToJson(report, *onboard);
  return out;
}

}  // namespace

nlohmann::json ReportToJson(const Report& report) {
  json configs = json::array();
  for (const ConfigSummary& c : report.configs) configs.push_back(ConfigToJson(c));
  return ReportFrame(report, std::move(configs));
}

std::string RenderJson(const Report& report) {
  // The frame with a marker where the configs go; each config is dumped alone and indented to its
  // depth (two levels: a JSON string holds no raw newline, so every line break is the layout's).
  const std::string control(1, '\x01');
  const std::string marker = "\"\\u0001configs\\u0001\"";  // the marker as dump() escapes it
  const std::string frame = ReportFrame(report, control + "configs" + control).dump(2);
  const size_t at = frame.find(marker);
  if (at == std::string::npos) throw std::logic_error("RenderJson: the configs' marker is missing");
  std::string out = frame.substr(0, at);
  if (report.configs.empty()) {
    out += "[]";
  } else {
    out += "[\n";
    for (size_t i = 0; i < report.configs.size(); ++i) {
      out += "    ";
      for (const char ch : ConfigToJson(report.configs[i]).dump(2)) {
        out += ch;
        if (ch == '\n') out += "    ";
      }
      out += i + 1 < report.configs.size() ? ",\n" : "\n";
    }
    out += "  ]";
  }
  out.append(frame, at + marker.size(), std::string::npos);
  return out;
}

}  // namespace frontier
