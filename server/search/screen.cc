#include "server/search/screen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "search_spaces/metric_catalog.h"

namespace frontier {

namespace {

std::string Number(double value) {
  char text[48];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

}  // namespace

const std::vector<std::string>& ScreenedMetrics() {
  static const std::vector<std::string> metrics = {
      "throughput",  "step_time_ms",   "mfu",           "peak_memory_mb",    "params",
      "latency_ms",  "latency_p99_ms", "latency_b1_ms", "latency_b1_p99_ms", "per_rank_throughput"};
  return metrics;
}

bool IsScreenedMetric(const std::string& metric) {
  const std::vector<std::string>& metrics = ScreenedMetrics();
  return std::find(metrics.begin(), metrics.end(), metric) != metrics.end();
}

TrialSpec ScreeningSpec(const SearchSpace& space, const Config& config) {
  TrialSpec spec = MakeTrialSpec(space, config, 1, "");
  spec.task.steps = space.screen.steps;
  spec.task.eval_every = 0;
  spec.task.val_size = 1;
  spec.task.test_size = 1;
  spec.task.warmup_steps = std::min(spec.task.warmup_steps, space.screen.steps / 2);
  spec.task.target.reset();
  spec.profile.steps = 0;  // no profiled steps, and no nsys/ncu wrapping: only the timed ones
  spec.profile.tool = "libtorch";
  // Latency is timed only when an objective or constraint needs it (its
  // forward passes cost more than the screened steps otherwise).
  bool latency = false;
  for (const Objective& o : space.objectives) latency = latency || o.metric.rfind("latency_", 0) == 0;
  for (const Constraint& c : space.constraints) latency = latency || c.metric.rfind("latency_", 0) == 0;
  if (!latency) spec.latency.repetitions = 0;
  return spec;
}

nlohmann::json ScreenedResult(const nlohmann::json& result, int steps) {
  nlohmann::json kept = nlohmann::json::object();
  if (result.is_object()) {
    for (const auto& [key, value] : result.items()) {
      const bool quality = key.rfind("val_", 0) == 0 || key.rfind("test_", 0) == 0 || key == "evals" ||
                           key == "final_train_loss" || key == "time_to_target_s" || key == "steps_to_target" ||
                           key == "target";
      if (!quality) kept[key] = value;
    }
  }
  kept["screen"] = {{"steps", steps}, {"note", "speed only: a screening trial is never evaluated"}};
  return kept;
}

ScreenMeasurement MeasureScreened(const std::string& config_key, const std::string& state,
                                  const nlohmann::json& result, const std::string& error) {
  ScreenMeasurement m;
  m.config_key = config_key;
  m.failed = state == "failed" || state == "cancelled" || !error.empty();
  m.error = error.empty() && m.failed ? "the screening trial " + state : error;
  if (result.is_object()) {
    for (const std::string& metric : ScreenedMetrics()) {
      if (std::optional<double> v = MetricOf(result, metric); v && std::isfinite(*v)) m.values[metric] = *v;
    }
  }
  return m;
}

std::vector<ScreenVerdict> ScreenOut(const std::vector<Objective>& objectives,
                                     const std::vector<Constraint>& constraints, const ScreenSpec& screen,
                                     const ScreenMeasurement& baseline,
                                     const std::vector<ScreenMeasurement>& configs) {
  const double noise = screen.noise;
  const double floor = (1 - screen.margin) * (1 - noise);
  std::vector<const Objective*> speed;
  for (const Objective& o : objectives) {
    if (IsScreenedMetric(o.metric)) speed.push_back(&o);
  }
  const std::string at = " (screened at " + std::to_string(screen.steps) + " steps)";
  std::vector<ScreenVerdict> verdicts;
  for (const ScreenMeasurement& m : configs) {
    ScreenVerdict verdict{m.config_key, true, ""};
    auto drop = [&verdict](std::string reason) {
      verdict.kept = false;
      verdict.reason = std::move(reason);
    };
    if (m.failed) {
      drop("screening trial failed: " + m.error);
      verdicts.push_back(std::move(verdict));
      continue;
    }
    for (const Constraint& c : constraints) {
      if (!IsScreenedMetric(c.metric) || !m.values.count(c.metric)) continue;
      const double v = m.values.at(c.metric);
      if (c.max && v > *c.max + noise * std::abs(*c.max)) {
        drop(c.metric + " " + Number(v) + " over the limit " + Number(*c.max) + at);
        break;
      }
      if (c.min && v < *c.min - noise * std::abs(*c.min)) {
        drop(c.metric + " " + Number(v) + " under the minimum " + Number(*c.min) + at);
        break;
      }
    }
    if (verdict.kept && !speed.empty() && !baseline.failed) {
      bool every_worse = true;
      std::string why;
      for (const Objective* o : speed) {
        const auto v = m.values.find(o->metric);
        const auto b = baseline.values.find(o->metric);
        if (v == m.values.end() || b == baseline.values.end() || !(v->second > 0) || !(b->second > 0)) {
          every_worse = false;  // nothing to judge by: kept
          break;
        }
        const double goodness = o->maximize ? v->second / b->second : b->second / v->second;
        if (!(goodness < floor)) {
          every_worse = false;
          break;
        }
        why += (why.empty() ? "" : ", ") + o->metric + " " + Number(v->second) + " against the baseline's " +
               Number(b->second) + " (" + Number(goodness) + "x)";
      }
      if (every_worse) {
        drop(why + ": worse than the baseline by more than the margin " + Number(screen.margin) +
             " on every speed objective" + at);
      }
    }
    verdicts.push_back(std::move(verdict));
  }
  return verdicts;
}

void ScreenedStrategy::Decide(std::map<std::string, std::string> dropped) {
  dropped_ = std::move(dropped);
  decided_ = true;
}

std::vector<Proposal> ScreenedStrategy::Ask() {
  if (!decided_) return {};
  // Each round of dropped proposals is told at once; a strategy never
  // proposes a configuration twice, so this ends.
  for (;;) {
    std::vector<Proposal> kept;
    bool any_dropped = false;
    for (Proposal& p : inner_->Ask()) {
      const std::string key = ConfigKey(p.config);
      const auto reason = dropped_.find(key);
      if (reason == dropped_.end()) {
        kept.push_back(std::move(p));
        continue;
      }
      any_dropped = true;
      screened_out_.push_back(key + ": " + std::string(kScreenedOut) + reason->second);
      TrialOutcome outcome;
      outcome.seed = 1;
      outcome.state = "failed";
      outcome.result = nullptr;
      outcome.error = std::string(kScreenedOut) + reason->second;
      inner_->Tell(Evaluation{p.config, p.steps, {outcome}});
    }
    if (!kept.empty() || !any_dropped) return kept;
  }
}

const std::vector<std::string>& ScreenedStrategy::Skipped() const {
  skipped_ = inner_->Skipped();
  skipped_.insert(skipped_.end(), screened_out_.begin(), screened_out_.end());
  return skipped_;
}

}  // namespace frontier
