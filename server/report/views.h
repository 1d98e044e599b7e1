// The views a co-design engineer asks of a report, computed from it
// (docs/report.md, "Views"): main effects per dimension, the ablation table
// and its cumulative path, what the search cost, and two configs side by
// side. Pure functions of a Report; the renderers draw them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "server/analysis/parity.h"
#include "server/report/report.h"

namespace frontier {

// A change of one metric: absolute (variant - reference) for quality
// metrics, relative (variant / reference - 1) for the others, with its 95% interval.
struct Effect {
  std::string metric;
  bool relative = false;
  Interval interval;  // n_variant = n_baseline = matched pairs when pairs > 1, else seeds
};

// One choice of one dimension against the baseline's choice: over matched
// pairs (two configs equal on every other dimension) the mean of the absolute
// changes, or for relative changes the geometric mean of the pairs' ratios
// less 1 (GeometricMeanInterval), Student-t over the pairs; with one pair (a
// one-factor config and the baseline) the seeds' Welch interval (the
// speed-up's log-scale interval less 1 for relative changes).
struct MainEffect {
  std::string dimension, short_name, choice;
  int pairs = 0;
  std::vector<Effect> effects;  // one per objective, then the parity metric when no objective names it
};
std::vector<MainEffect> MainEffects(const Report& report);

// The metrics the views show changes of: the objectives, then the parity metric.
std::vector<std::string> EffectMetrics(const Report& report);
// The change of `metric` from `reference` to `variant` (see Effect); nullopt when either lacks it.
std::optional<Effect> ChangeOf(const ConfigSummary& variant, const ConfigSummary& reference,
                               const std::string& metric);

// Configs that differ from the baseline in exactly one dimension, in the space's dimension order.
std::vector<const ConfigSummary*> OneFactorConfigs(const Report& report);
// The cumulative ablation path (strategy ablation with cumulative: true):
// the baseline, then at each round the config the next round built on (the
// last round: the best by the strategy's metric); empty for other strategies.
std::vector<const ConfigSummary*> CumulativePath(const Report& report);

// What the whole search cost, and what early stopping saved.
struct CostTotals {
  SearchCost total;
  int trials_completed = 0, trials_stopped = 0;
  double mean_completed_s = 0;  // device-seconds of a completed trial, on average
  // Estimates (they are runs that never happened): each stopped trial run to
  // the end at its config's mean completed cost (else the experiment's), less
  // what it used; and the full grid at every seed at the mean completed cost.
  double early_stopping_saved_s = 0;
  double full_grid_s = 0;  // 0 when the grid size is unknown
  // Goodput (docs/report.md#goodput): the measured training steps' share of
  // every device-second the experiment's trials used (phases.train_s summed
  // over completed trials, over total.device_s); nullopt when no completed
  // trial's result has phases. fixed_cost_s: a completed trial's mean
  // device-seconds outside its training steps (warm-up and measured), of the
  // trials with phases; outside_process_s: the part of it before and after the
  // trial's process (lease to launch, upload, the report).
  std::optional<double> goodput;
  double fixed_cost_s = 0;
  double outside_process_s = 0;
};
CostTotals TotalCost(const Report& report);
// One sentence for people: the goodput, the fixed cost of a completed trial
// and its phases; "" when TotalCost has no goodput.
std::string GoodputLine(const CostTotals& totals);
// {share, device_s, train_s, fixed_cost_s, outside_process_s, trials, phases: {NAME_s: seconds summed}},
// or null when TotalCost has no goodput.
nlohmann::json GoodputToJson(const CostTotals& totals);

// Two configs side by side: every summarized metric of each with its
// interval, their difference (a - b, Welch) and the parity verdict of a
// against b as the reference (paired when the parity rule is and they share
// at least 2 seeds).
struct MetricComparison {
  std::string metric;
  std::optional<MetricSummary> a, b;
  std::optional<Interval> difference;  // a - b, Welch
  std::optional<Interval> ratio;       // a / b, for metrics other than quality
};
struct Comparison {
  const ConfigSummary* a = nullptr;
  const ConfigSummary* b = nullptr;
  std::vector<MetricComparison> metrics;
  std::string parity;       // "at parity", "worse", "inconclusive": a against b
  std::string parity_test;  // "paired" or "welch"
  std::optional<Interval> quality_delta;
  double one_sided_quantile = 0.95;  // of the verdict's bounds: the report's (split over adaptive seeds' looks)
};

// The config `name` names: "baseline", its row number in the report (1 is
// the first), its label (parts in any order, separated by " · " or ","), or
// its config key. Throws std::invalid_argument naming the choices when none
// or several match.
const ConfigSummary& FindConfig(const Report& report, const std::string& name);
Comparison CompareConfigs(const Report& report, const ConfigSummary& a, const ConfigSummary& b);

// The onboard front (docs/report.md#the-onboard-front): the configs' deployed
// networks (ConfigSummary::deploy), one point per config and format measured,
// latency at the deploy section's headline batch (lower is better) against the
// quality in that format (higher is better), means over seeds with 95% intervals.
struct OnboardPoint {
  const ConfigSummary* config = nullptr;
  int row = 0;         // the config's 1-based row in the report
  std::string format;  // "float" or "int8"
  MetricSummary latency_ms, quality;
  std::optional<MetricSummary> latency_p99_ms, size_bytes;
  bool on_front = false;  // non-dominated among the feasible configs' points
};
// A config with a deploy section: its int8 network against its float one.
struct OnboardConfig {
  const ConfigSummary* config = nullptr;
  int row = 0;
  // Both formats measured: int8 quality against float's over the seeds, by
  // the experiment's parity rule and margin (CompareQuality: paired when the
  // seeds match), and float latency / int8 latency (SpeedupInterval).
  std::optional<QualityComparison> int8_parity;
  // Paired over the seeds (float / int8 latency of the same trial): the geometric mean and its 95% interval.
  std::optional<Interval> int8_speedup;
  // At parity, and the speed-up interval's low end above 1 (two paired seeds at least).
  bool faster_at_parity = false;
  std::optional<double> quantized_layers, quantized_flop_share;  // means over the int8 seeds
};
// A config on exactly one of the two fronts.
struct RankChange {
  const ConfigSummary* config = nullptr;
  bool onboard = false;              // on the onboard front only (else on the training front only)
  std::vector<std::string> formats;  // onboard: its formats on the onboard front
  std::string text;                  // the change in words, for every renderer
};
struct OnboardView {
  std::string quality_metric;  // the parity metric when it is val_accuracy or val_iou, else the results'
  std::string engine;          // of the first config with a deploy section
  int batch = 0, threads = 0;  // its headline setting
  std::vector<OnboardPoint> points;    // in report order, float before int8
  std::vector<OnboardConfig> configs;  // every config with a deploy section, in report order
  std::vector<RankChange> rank_changes;
};
// nullopt when no config has a deploy section.
std::optional<OnboardView> Onboard(const Report& report);
// One sentence on a config's int8 network against its float one: the
// verdict, the speed-up, whether it is faster onboard at parity, the engine's
// quantized layers and the layers it left in float.
std::string QuantizationLine(const Report& report, const OnboardView& view, const OnboardConfig& config);
// The view's explanation, its rank changes and each config's QuantizationLine.
std::vector<std::string> OnboardNotes(const Report& report, const OnboardView& view);

// The comparison as an aligned text table (every metric, both intervals, the
// difference and the verdict) and as JSON.
std::string RenderComparisonTable(const Report& report, const Comparison& comparison);
nlohmann::json ComparisonToJson(const Report& report, const Comparison& comparison);

}  // namespace frontier
