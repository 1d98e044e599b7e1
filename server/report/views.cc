#include "server/report/views.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "server/analysis/pareto.h"
#include "server/analysis/parity.h"
#include "server/report/format.h"
#include "server/report/table.h"

namespace frontier {
namespace {

using nlohmann::json;

bool IsQuality(const std::string& metric) {
  const MetricInfo* info = FindMetric(metric);
  return info != nullptr ? info->quality : metric.find("loss") != std::string::npos;
}

const MetricSummary* Find(const ConfigSummary& config, const std::string& metric) {
  auto it = config.metrics.find(metric);
  return it == config.metrics.end() ? nullptr : &it->second;
}

bool HasData(const ConfigSummary& c) { return c.seeds_completed > 0; }

// The parts of a label, trimmed: "convnext · bf16" and "bf16,convnext" name the same config.
std::set<std::string> LabelParts(const std::string& label) {
  std::set<std::string> parts;
  std::string part;
  auto flush = [&] {
    const size_t b = part.find_first_not_of(' '), e = part.find_last_not_of(' ');
    if (b != std::string::npos) parts.insert(part.substr(b, e - b + 1));
    part.clear();
  };
  for (size_t i = 0; i < label.size(); ++i) {
    if (label[i] == ',') {
      flush();
    } else if (label.compare(i, 2, "\u00b7") == 0) {
      flush();
      ++i;
    } else {
      part += label[i];
    }
  }
  flush();
  return parts;
}

// Seconds of one phase summed over the trials with phases; 0 where none recorded it.
double PhaseSeconds(const SearchCost& s, const std::string& phase) {
  const auto it = s.phases.find(phase);
  return it == s.phases.end() ? 0.0 : it->second;
}

}  // namespace

std::vector<std::string> EffectMetrics(const Report& report) {
  std::vector<std::string> metrics;
  for (const Objective& o : report.objectives) metrics.push_back(o.metric);
  if (std::find(metrics.begin(), metrics.end(), report.parity.metric) == metrics.end()) {
    metrics.push_back(report.parity.metric);
  }
  return metrics;
}

std::optional<Effect> ChangeOf(const ConfigSummary& variant, const ConfigSummary& reference,
                               const std::string& metric) {
  const MetricSummary* v = Find(variant, metric);
  const MetricSummary* r = Find(reference, metric);
  if (v == nullptr || r == nullptr) return std::nullopt;
  Effect effect{metric, !IsQuality(metric), {}};
  if (!effect.relative) {
    effect.interval = DifferenceInterval(*v, *r);
    return effect;
  }
  const std::optional<Interval> ratio = SpeedupInterval(*v, *r);
  if (!ratio) return std::nullopt;
  effect.interval = *ratio;
  effect.interval.value -= 1;
  effect.interval.low -= 1;
  effect.interval.high -= 1;
  return effect;
}

std::vector<MainEffect> MainEffects(const Report& report) {
  std::vector<MainEffect> out;
  const std::vector<std::string> metrics = EffectMetrics(report);
  for (const ReportDimension& dim : report.dimensions) {
    if (dim.baseline_choice.is_null()) continue;
    for (const json& choice : dim.choices) {
      if (choice == dim.baseline_choice) continue;
      // Matched pairs: a config with this choice and the one equal to it but for the baseline's choice.
      std::vector<std::pair<const ConfigSummary*, const ConfigSummary*>> pairs;
      for (const ConfigSummary& a : report.configs) {
        if (!HasData(a) || !a.choices.is_object() || a.choices.value(dim.name, json()) != choice) continue;
        json wanted = a.choices;
        wanted[dim.name] = dim.baseline_choice;
        for (const ConfigSummary& b : report.configs) {
          if (HasData(b) && b.choices == wanted) {
            pairs.emplace_back(&a, &b);
            break;
          }
        }
      }
      if (pairs.empty()) continue;
      MainEffect effect{dim.name, dim.short_name, ChoiceText(choice), static_cast<int>(pairs.size()), {}};
      for (const std::string& metric : metrics) {
        if (pairs.size() == 1) {
          if (auto e = ChangeOf(*pairs[0].first, *pairs[0].second, metric)) effect.effects.push_back(*e);
          continue;
        }
        std::vector<double> changes;
        for (const auto& [a, b] : pairs) {
          if (auto e = ChangeOf(*a, *b, metric)) changes.push_back(e->interval.value);
        }
        if (changes.empty()) continue;
        if (IsQuality(metric)) {
          const MetricSummary s = SummarizeMetric(changes);
          const int n = static_cast<int>(changes.size());
          effect.effects.push_back({metric, false, Interval{s.mean, s.ci_low, s.ci_high, n, n}});
          continue;
        }
        // Relative changes: the pairs' ratios on the log scale (their geometric
        // mean), so the interval never reaches below -100%.
        std::vector<double> ratios;
        for (double change : changes) ratios.push_back(1 + change);
        std::optional<Interval> ratio = GeometricMeanInterval(ratios);
        if (!ratio) continue;
        ratio->value -= 1;
        ratio->low -= 1;
        ratio->high -= 1;
        effect.effects.push_back({metric, true, *ratio});
      }
      out.push_back(std::move(effect));
    }
  }
  return out;
}

std::vector<const ConfigSummary*> OneFactorConfigs(const Report& report) {
  std::vector<const ConfigSummary*> out;
  for (const ReportDimension& dim : report.dimensions) {
    for (const json& choice : dim.choices) {
      for (const ConfigSummary& c : report.configs) {
        if (!c.is_baseline && c.changes.size() == 1 && c.changes[0].dimension == dim.name &&
            c.changes[0].choice == choice)
          out.push_back(&c);
      }
    }
  }
  return out;
}

std::vector<const ConfigSummary*> CumulativePath(const Report& report) {
  std::vector<const ConfigSummary*> path;
  if (report.strategy.name != "ablation" || !report.strategy.cumulative || report.configs.empty() ||
      !report.configs.front().is_baseline) {
    return path;
  }
  const std::string metric = report.strategy.metric.empty() && !report.objectives.empty()
                                 ? report.objectives.front().metric
                                 : report.strategy.metric;
  const bool lower = LowerIsBetter(metric, report.objectives);
  auto contains = [](const ConfigSummary& bigger, const ConfigSummary& smaller) {
    for (const ConfigChange& change : smaller.changes) {
      if (std::none_of(bigger.changes.begin(), bigger.changes.end(), [&](const ConfigChange& c) {
            return c.dimension == change.dimension && c.choice == change.choice;
          }))
        return false;
    }
    return true;
  };
  path.push_back(&report.configs.front());
  for (size_t round = 1;; ++round) {
    std::vector<const ConfigSummary*> candidates;
    for (const ConfigSummary& c : report.configs) {
      if (c.changes.size() == round && contains(c, *path.back())) candidates.push_back(&c);
    }
    if (candidates.empty()) break;
    // The one the next round built on: every config of the next round extends it.
    const ConfigSummary* next = nullptr;
    int most = 0;
    for (const ConfigSummary* c : candidates) {
      int extended = 0;
      for (const ConfigSummary& later : report.configs) {
        extended += later.changes.size() == round + 1 && contains(later, *c);
      }
      if (extended > most) {
        most = extended;
        next = c;
      }
    }
    if (next == nullptr) {  // the last round: its best
      for (const ConfigSummary* c : candidates) {
        const MetricSummary* m = Find(*c, metric);
        const MetricSummary* best = next == nullptr ? nullptr : Find(*next, metric);
        if (m != nullptr && (best == nullptr || (lower ? m->mean < best->mean : m->mean > best->mean))) next = c;
      }
    }
    if (next == nullptr) break;
    path.push_back(next);
  }
  return path.size() > 1 ? path : std::vector<const ConfigSummary*>();
}

CostTotals TotalCost(const Report& report) {
  CostTotals totals;
  double completed_s = 0;
  for (const ConfigSummary& c : report.configs) {
    const SearchCost& s = c.cost;
    totals.total.trials_run += s.trials_run;
    totals.total.device_s += s.device_s;
    totals.total.train_s += s.train_s;
    totals.total.profile_s += s.profile_s;
    totals.total.other_s += s.other_s;
    totals.total.stopped_s += s.stopped_s;
    totals.total.failed_s += s.failed_s;
    totals.total.trials_with_phases += s.trials_with_phases;
    totals.total.phased_device_s += s.phased_device_s;
    for (const auto& [phase, seconds] : s.phases) totals.total.phases[phase] += seconds;
    totals.trials_completed += c.seeds_completed;
    totals.trials_stopped += c.trials_stopped;
    completed_s += s.train_s + s.profile_s + s.other_s;
  }
  if (const SearchCost& s = totals.total; s.trials_with_phases > 0 && s.device_s > 0) {
    const double train_s = PhaseSeconds(s, "train");
    totals.goodput = train_s / s.device_s;
    totals.fixed_cost_s = std::max(0.0, s.phased_device_s - train_s - PhaseSeconds(s, "warmup")) / s.trials_with_phases;
    totals.outside_process_s = std::max(0.0, s.phased_device_s - PhaseSeconds(s, "wall")) / s.trials_with_phases;
  }
  if (totals.trials_completed == 0) return totals;
  totals.mean_completed_s = completed_s / totals.trials_completed;
  for (const ConfigSummary& c : report.configs) {
    if (c.trials_stopped == 0) continue;
    const double full = c.seeds_completed > 0
                            ? (c.cost.train_s + c.cost.profile_s + c.cost.other_s) / c.seeds_completed
                            : totals.mean_completed_s;
    totals.early_stopping_saved_s += std::max(0.0, full * c.trials_stopped - c.cost.stopped_s);
  }
  if (report.grid_size > 0) {
    totals.full_grid_s =
        static_cast<double>(report.grid_size) * std::max(1, report.repeats) * totals.mean_completed_s;
  }
  return totals;
}

std::string GoodputLine(const CostTotals& totals) {
  if (!totals.goodput) return "";
  const SearchCost& s = totals.total;
  std::string parts;
  for (const std::string& phase : ReportedPhases()) {
    if (phase == "train" || phase == "warmup" || phase == "wall") continue;
    parts += Printf("%s %.2f, ", phase.c_str(), PhaseSeconds(s, phase) / s.trials_with_phases);
  }
  std::string line = Printf(
      "goodput %.2f: measured training steps %.1f s of %.1f device-s; fixed cost %.2f s a completed "
      "trial: %soutside the trial process %.2f (lease to launch, upload, report)",
      *totals.goodput, PhaseSeconds(s, "train"), s.device_s, totals.fixed_cost_s, parts.c_str(),
      totals.outside_process_s);
  // Where most of a short trial's fixed cost goes, and what sets it (docs/report.md#goodput).
  const double eval_s = PhaseSeconds(s, "eval") / s.trials_with_phases;
  if (totals.fixed_cost_s > 0 && eval_s >= 0.5 * totals.fixed_cost_s) {
    line += Printf("; the evaluation is %.0f%% of it: the validation and test splits' sizes set it (task.val_size "
                   "and task.test_size; task.bev.val_samples and test_samples), task.eval_every how often",
                   100.0 * eval_s / totals.fixed_cost_s);
  }
  return line;
}

nlohmann::json GoodputToJson(const CostTotals& totals) {
  if (!totals.goodput) return nullptr;
  const SearchCost& s = totals.total;
  nlohmann::json phases = nlohmann::json::object();
  for (const auto& [phase, seconds] : s.phases) phases[phase + "_s"] = seconds;
  return {{"share", *totals.goodput},
          {"device_s", s.device_s},
          {"train_s", PhaseSeconds(s, "train")},
          {"fixed_cost_s", totals.fixed_cost_s},
          {"outside_process_s", totals.outside_process_s},
          {"trials", s.trials_with_phases},
          {"phases", phases}};
}

const ConfigSummary& FindConfig(const Report& report, const std::string& name) {
  std::vector<const ConfigSummary*> found;
  char* end = nullptr;
  const long row = std::strtol(name.c_str(), &end, 10);
  if (!name.empty() && *end == '\0') {
    if (row >= 1 && row <= static_cast<long>(report.configs.size())) return report.configs[row - 1];
    throw std::invalid_argument("config #" + name + ": the report has rows 1 to " +
                                std::to_string(report.configs.size()));
  }
  const std::set<std::string> parts = LabelParts(name);
  for (const ConfigSummary& c : report.configs) {
    if (c.config_key == name || c.label == name || (!parts.empty() && LabelParts(c.label) == parts)) {
      found.push_back(&c);
    }
  }
  if (found.size() == 1) return *found.front();
  std::string choices;
  for (size_t i = 0; i < report.configs.size(); ++i) {
    choices += Printf("\n%4zu  %s", i + 1, report.configs[i].label.c_str());
  }
  throw std::invalid_argument("config '" + name + "' " +
                              (found.empty() ? "names no config" : "names several configs") +
                              " of the report; give a row number, a label or a config key:" + choices);
}

Comparison CompareConfigs(const Report& report, const ConfigSummary& a, const ConfigSummary& b) {
  Comparison out;
  out.a = &a;
  out.b = &b;
  for (const std::string& metric :
       SummarizedMetrics(report.objectives, report.constraints, report.parity, report.varies_op)) {
    MetricComparison m;
    m.metric = metric;
    if (const MetricSummary* s = Find(a, metric)) m.a = *s;
    if (const MetricSummary* s = Find(b, metric)) m.b = *s;
    if (!m.a && !m.b) continue;
    if (m.a && m.b) {
      m.difference = DifferenceInterval(*m.a, *m.b);
      if (!IsQuality(metric)) m.ratio = SpeedupInterval(*m.a, *m.b);
    }
    out.metrics.push_back(std::move(m));
  }
  // The report's rule (CompareQuality, alpha split over the looks of adaptive seeds), so that compare
  // and the report never disagree on a verdict.
  const bool lower = LowerIsBetter(report.parity.metric, report.objectives);
  out.one_sided_quantile = SequentialOneSidedQuantile(report.parity.looks);
  const QualityComparison q = CompareQuality(a.parity_by_seed, b.parity_by_seed, report.parity.test == "paired",
                                             report.parity.margin, lower, out.one_sided_quantile);
  if (q.test.empty()) {
    out.parity = "no data";
    return out;
  }
  out.parity_test = q.test;
  out.quality_delta = q.delta;
  out.parity = q.verdict;
  return out;
}

namespace {

// The values of a deploy field over the seeds; empty when no seed has it.
const std::map<int64_t, double>* SeedValues(const DeployFormat& format, const std::string& field) {
  auto it = format.by_seed.find(field);
  return it == format.by_seed.end() || it->second.empty() ? nullptr : &it->second;
}

std::optional<MetricSummary> SummarizeSeeds(const DeployFormat& format, const std::string& field) {
  const std::map<int64_t, double>* seeds = SeedValues(format, field);
  if (seeds == nullptr) return std::nullopt;
  std::vector<double> values;
  for (const auto& [seed, value] : *seeds) values.push_back(value);
  return SummarizeMetric(values);
}

// "convnext float and int8"
std::string PointsText(const ConfigSummary& config, const std::vector<std::string>& formats) {
  std::string text = config.label + " ";
  for (size_t i = 0; i < formats.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == formats.size() ? " and " : ", ") + formats[i];
  }
  return text;
}

}  // namespace

std::optional<OnboardView> Onboard(const Report& report) {
  OnboardView view;
  const ConfigSummary* first = nullptr;
  for (const ConfigSummary& c : report.configs) {
    if (c.deploy && first == nullptr) first = &c;
  }
  if (first == nullptr) return std::nullopt;
  view.engine = first->deploy->engine;
  view.batch = first->deploy->batch;
  view.threads = first->deploy->threads;
  const std::string& parity = report.parity.metric;
  view.quality_metric = parity == "val_accuracy" || parity == "val_iou" ? parity
                        : !first->deploy->quality_metric.empty()       ? first->deploy->quality_metric
                                                                       : "val_accuracy";
  const bool lower = LowerIsBetter(view.quality_metric, report.objectives);
  for (size_t i = 0; i < report.configs.size(); ++i) {
    const ConfigSummary& c = report.configs[i];
    if (!c.deploy) continue;
    const int row = static_cast<int>(i) + 1;
    for (const auto& [format, measured] : c.deploy->formats) {
      const std::optional<MetricSummary> latency = SummarizeSeeds(measured, "latency_ms");
      const std::optional<MetricSummary> quality = SummarizeSeeds(measured, view.quality_metric);
      if (!latency || !quality) continue;
      view.points.push_back({&c, row, format, *latency, *quality, SummarizeSeeds(measured, "latency_p99_ms"),
                             SummarizeSeeds(measured, "size_bytes"), false});
    }
    OnboardConfig config{&c, row, std::nullopt, std::nullopt, false, std::nullopt, std::nullopt};
    const auto float_format = c.deploy->formats.find("float"), int8_format = c.deploy->formats.find("int8");
    if (int8_format != c.deploy->formats.end()) {
      if (auto layers = SummarizeSeeds(int8_format->second, "quantized_layers")) config.quantized_layers = layers->mean;
      if (auto share = SummarizeSeeds(int8_format->second, "quantized_flop_share")) {
        config.quantized_flop_share = share->mean;
      }
    }
    if (float_format != c.deploy->formats.end() && int8_format != c.deploy->formats.end()) {
      const std::map<int64_t, double>* float_quality = SeedValues(float_format->second, view.quality_metric);
      const std::map<int64_t, double>* int8_quality = SeedValues(int8_format->second, view.quality_metric);
      if (float_quality != nullptr && int8_quality != nullptr) {
        config.int8_parity = CompareQuality(*int8_quality, *float_quality, report.parity.test == "paired",
                                            report.parity.margin, lower,
                                            SequentialOneSidedQuantile(report.parity.looks));
      }
      // Paired: each seed's float latency over its int8 latency, both measured in the same trial; the
      // speed-up is their geometric mean with its 95% interval, and int8 is faster only when the interval's
      // low end is above 1 (two seeds at least), not when one mean is below the other.
      const std::map<int64_t, double>* float_ms = SeedValues(float_format->second, "latency_ms");
      const std::map<int64_t, double>* int8_ms = SeedValues(int8_format->second, "latency_ms");
      if (float_ms != nullptr && int8_ms != nullptr) {
        std::vector<double> ratios;
        for (const auto& [seed, ms] : *float_ms) {
          const auto paired = int8_ms->find(seed);
          if (paired != int8_ms->end() && paired->second > 0 && ms > 0) ratios.push_back(ms / paired->second);
        }
        config.int8_speedup = GeometricMeanInterval(ratios);
        config.faster_at_parity = config.int8_speedup && config.int8_speedup->n_variant >= 2 &&
                                  config.int8_speedup->low > 1 && config.int8_parity &&
                                  config.int8_parity->verdict == "at parity";
      }
    }
    view.configs.push_back(config);
  }
  // The front over the feasible configs' points, as the training front is over feasible configs.
  std::vector<size_t> candidates;
  std::vector<std::vector<double>> points;
  for (size_t i = 0; i < view.points.size(); ++i) {
    if (!view.points[i].config->feasible) continue;
    candidates.push_back(i);
    points.push_back({view.points[i].latency_ms.mean, view.points[i].quality.mean});
  }
  for (size_t index : ParetoFront(points, {false, !lower})) view.points[candidates[index]].on_front = true;
  // Configs on one front only.
  for (const ConfigSummary& c : report.configs) {
    std::vector<std::string> onboard, dominated;
    for (const OnboardPoint& p : view.points) {
      if (p.config == &c) (p.on_front ? onboard : dominated).push_back(p.format);
    }
    if (c.on_front && onboard.empty()) {
      view.rank_changes.push_back(
          {&c, false, {},
           "training front: " + c.label + " (not on the onboard front: " +
               (dominated.empty() ? std::string("not measured onboard")
                                  : PointsText(c, dominated) + (dominated.size() > 1 ? " are" : " is") + " dominated") +
               ")"});
    } else if (!c.on_front && !onboard.empty()) {
      view.rank_changes.push_back(
          {&c, true, onboard, "onboard front: " + PointsText(c, onboard) + " (was not on the training front)"});
    }
  }
  return view;
}

std::string QuantizationLine(const Report& report, const OnboardView& view, const OnboardConfig& config) {
  const ConfigSummary& c = *config.config;
  std::string line = c.label + ": ";
  const bool has_float = c.deploy->formats.count("float") > 0, has_int8 = c.deploy->formats.count("int8") > 0;
  if (!has_float || !has_int8) {
    line += has_float ? "float only (int8 not measured)" : "int8 only (float not measured)";
  } else if (!config.int8_parity) {
    line += "int8 against float: no " + view.quality_metric + " in both formats";
  } else {
    const QualityComparison& parity = *config.int8_parity;
    line += "int8 " + (parity.verdict == "worse" ? std::string("worse than") : parity.verdict == "at parity" ? "at parity with" : "inconclusive against") +
            " float on " + view.quality_metric + Printf(" (margin %g", report.parity.margin);
    if (!parity.test.empty()) line += ", " + parity.test;
    if (parity.delta) {
      line += Printf(", \u0394 %+.4f [%+.4f, %+.4f]", parity.delta->value, parity.delta->low, parity.delta->high);
    }
    line += ")";
    if (config.int8_speedup) {
      const Interval& s = *config.int8_speedup;
      line += Printf("; int8 %.2fx as fast as float", s.value);
      if (s.n_variant >= 2 && s.n_baseline >= 2) line += Printf(" [%.2f, %.2f]", s.low, s.high);
    }
    line += config.faster_at_parity ? ": faster onboard at parity" : ": not faster onboard at parity";
  }
  if (has_int8) {
    if (config.quantized_layers) line += Printf("; %.0f layers quantized", *config.quantized_layers);
    if (config.quantized_flop_share) line += Printf(" (%.0f%% of FLOPs)", 100 * *config.quantized_flop_share);
    const json& kept = c.deploy->formats.at("int8").float_layers;
    std::string names;
    for (const json& layer : kept.is_array() ? kept : json::array()) {
      if (!layer.is_object()) continue;
      const json name = layer.value("name", json()), why = layer.value("why", json());
      if (!name.is_string()) continue;
      names += (names.empty() ? "" : ", ") + name.get<std::string>() +
               (why.is_string() && !why.get<std::string>().empty() ? " (" + why.get<std::string>() + ")" : "");
    }
    line += names.empty() ? "; no layer kept in float" : "; kept in float: " + names;
  }
  return line;
}

std::vector<std::string> OnboardNotes(const Report& report, const OnboardView& view) {
  std::vector<std::string> notes = {
      Printf("onboard: latency at batch %d, %d thread%s (int8 engine %s) against %s in each format, means over "
             "seeds with 95%% intervals; onboard front (o): the (config, format) points of feasible configs that "
             "no other point beats on both",
             view.batch, view.threads, view.threads == 1 ? "" : "s", view.engine.empty() ? "-" : view.engine.c_str(),
             view.quality_metric.c_str()),
      Printf("parity after quantization: int8 %s against float %s over the seeds, margin %g (%s)",
             view.quality_metric.c_str(), view.quality_metric.c_str(), report.parity.margin,
             report.parity.test == "paired" ? "paired when the seeds match, else Welch" : "Welch"),
  };
  if (view.rank_changes.empty()) notes.push_back("rank changes: none (the same configs lead both fronts)");
  for (const RankChange& change : view.rank_changes) notes.push_back(change.text);
  for (const OnboardConfig& config : view.configs) notes.push_back(QuantizationLine(report, view, config));
  return notes;
}

namespace {

// "mean ± half-width of the 95% interval", the report table's way.
std::string Summary(const std::optional<MetricSummary>& s) {
  if (!s) return "-";
  if (s->n < 2) return Printf("%.4g", s->mean);
  return Printf("%.4g \u00b1 %.3g", s->mean, (s->ci_high - s->ci_low) / 2);
}

std::string IntervalText(const std::optional<Interval>& i, const char* format) {
  if (!i) return "-";
  const std::string value = Printf(format, i->value);
  if (i->n_variant < 2 || i->n_baseline < 2) return value;
  return value + " \u00b1 " + Printf("%.3g", (i->high - i->low) / 2);
}

// A ratio's interval is not symmetric (log scale): "1.234x [1.05, 1.45]".
std::string RatioText(const std::optional<Interval>& i) {
  if (!i) return "-";
  const std::string value = Printf("%.3fx", i->value);
  if (i->n_variant < 2 || i->n_baseline < 2) return value;
  return value + Printf(" [%.3g, %.3g]", i->low, i->high);
}

std::string Seeds(const MetricComparison& m) {
  return Printf("%d/%d", m.a ? m.a->n : 0, m.b ? m.b->n : 0);
}

}  // namespace

std::string RenderComparisonTable(const Report& report, const Comparison& c) {
  TextTable table;
  table.header = {"metric", "n A/B", "A", "B", "A - B", "A / B"};
  table.right_aligned = {false, true, true, true, true, true};
  for (const MetricComparison& m : c.metrics) {
    table.rows.push_back({m.metric, Seeds(m), Summary(m.a), Summary(m.b), IntervalText(m.difference, "%+.4g"),
                          RatioText(m.ratio)});
  }
  std::string out = "experiment " + report.experiment_id + ": A = " + c.a->label + " vs B = " + c.b->label +
                    "\n  A: " + c.a->config_key + "\n  B: " + c.b->config_key + "\n\n";
  out += RenderTextTable(table, 0);
  out += Printf("\nparity of A against B (%s, margin %g, %s test, one-sided bounds at %.4g%%%s): %s; delta %s\n",
                report.parity.metric.c_str(), report.parity.margin,
                c.parity_test.empty() ? "no" : c.parity_test.c_str(), 100 * c.one_sided_quantile,
                report.parity.looks > 1 ? Printf(", alpha split over %d looks", report.parity.looks).c_str() : "",
                c.parity.c_str(), IntervalText(c.quality_delta, "%+.4f").c_str());
  out +=
      "\u00b1: half-width of the 95% interval: Student-t of each mean, Welch for A - B; [low, high] of "
      "A / B: the 95% interval on the log scale, delta method (docs/report.md)\n";
  return out;
}

nlohmann::json ComparisonToJson(const Report& report, const Comparison& c) {
  auto summary = [](const std::optional<MetricSummary>& s) -> json {
    if (!s) return nullptr;
    return {{"n", s->n}, {"mean", s->mean}, {"std", s->std}, {"ci_low", s->ci_low}, {"ci_high", s->ci_high}};
  };
  auto interval = [](const std::optional<Interval>& i) -> json {
    if (!i) return nullptr;
    return {{"value", i->value}, {"low", i->low}, {"high", i->high}, {"n_a", i->n_variant}, {"n_b", i->n_baseline}};
  };
  json metrics = json::array();
  for (const MetricComparison& m : c.metrics) {
    metrics.push_back({{"metric", m.metric},
                       {"a", summary(m.a)},
                       {"b", summary(m.b)},
                       {"difference", interval(m.difference)},
                       {"ratio", interval(m.ratio)}});
  }
  return {{"experiment_id", report.experiment_id},
          {"a", {{"label", c.a->label}, {"config_key", c.a->config_key}}},
          {"b", {{"label", c.b->label}, {"config_key", c.b->config_key}}},
          {"metrics", metrics},
          {"parity",
           {{"metric", report.parity.metric},
            {"margin", report.parity.margin},
            {"test", c.parity_test},
            {"verdict", c.parity},
            {"delta", interval(c.quality_delta)}}}};
}

}  // namespace frontier
