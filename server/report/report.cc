#include "server/report/report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace frontier {
namespace {

using nlohmann::json;

constexpr double kTwoSidedQuantile = 0.975;  // two-sided 95% intervals
constexpr double kOneSidedQuantile = 0.95;   // one-sided 95% bounds (parity)
// Beyond this many degrees of freedom the t quantile is the normal one (they
// differ by less than 1e-6 there).
constexpr double kNormalDegreesOfFreedom = 1e7;

// ---------------------------------------------------------------------------
// Distributions

// Continued fraction of the incomplete beta function, modified Lentz method
// (Numerical Recipes, betacf). Converges fast for x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr int kMaxIterations = 200000;
  constexpr double kEpsilon = 1e-15;
  constexpr double kTiny = 1e-300;
  auto guard = [](double v) { return std::fabs(v) < kTiny ? kTiny : v; };
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1;
  double d = 1 / guard(1 - qab * x / qap);
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 / guard(1 + aa * d);
    c = guard(1 + aa / c);
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 / guard(1 + aa * d);
    c = guard(1 + aa / c);
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < kEpsilon) break;
  }
  return h;
}

// Regularized incomplete beta function I_x(a, b).
double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

double StudentTQuantileUncached(double p, double df);

// P(T > t) for t >= 0 and Student's t with `df` degrees of freedom.
double StudentTUpperTail(double t, double df) {
  if (df > kNormalDegreesOfFreedom) return 0.5 * std::erfc(t / std::sqrt(2.0));
  return 0.5 * RegularizedIncompleteBeta(df / 2, 0.5, 1 / (1 + t * t / df));
}

// ---------------------------------------------------------------------------
// Comparisons with the baseline

// Welch-Satterthwaite degrees of freedom of a sum of two variance terms, each
// estimated from n - 1 degrees of freedom.
double WelchDegreesOfFreedom(double term_v, int n_v, double term_b, int n_b) {
  const double sum = term_v + term_b;
  return sum * sum / (term_v * term_v / (n_v - 1) + term_b * term_b / (n_b - 1));
}

// A symmetric interval value ± t(quantile, df) * se; the point when se == 0.
Interval SymmetricInterval(double value, double se, double df, double quantile, int n_v, int n_b) {
  const double half = se > 0 ? StudentTQuantile(quantile, df) * se : 0;
  return Interval{value, value - half, value + half, n_v, n_b};
}

void RequireData(const MetricSummary& variant, const MetricSummary& baseline) {
  if (variant.n < 1 || baseline.n < 1) throw std::invalid_argument("a comparison needs n >= 1 on both sides");
}

// Difference variant - baseline with Welch's standard error, degrees of freedom
// and one-sided or two-sided `quantile`.
Interval WelchInterval(const MetricSummary& variant, const MetricSummary& baseline, double quantile) {
  RequireData(variant, baseline);
  const double diff = variant.mean - baseline.mean;
  if (variant.n < 2 || baseline.n < 2) return Interval{diff, diff, diff, variant.n, baseline.n};
  const double term_v = variant.std * variant.std / variant.n;
  const double term_b = baseline.std * baseline.std / baseline.n;
  if (term_v + term_b == 0) return Interval{diff, diff, diff, variant.n, baseline.n};
  return SymmetricInterval(diff, std::sqrt(term_v + term_b),
                           WelchDegreesOfFreedom(term_v, variant.n, term_b, baseline.n), quantile, variant.n,
                           baseline.n);
}

// Direction of the parity metric: an objective's goal when the space has one
// on that metric, else lower is better exactly for losses.
bool LowerIsBetter(const std::string& metric, const std::vector<Objective>& objectives) {
  for (const Objective& objective : objectives) {
    if (objective.metric == metric) return !objective.maximize;
  }
  const std::string suffix = "_loss";
  return metric.size() >= suffix.size() &&
         metric.compare(metric.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// ---------------------------------------------------------------------------
// Hypervolume

// Hypervolume of `points` (all strictly above `reference`) in their first `dims`
// coordinates.
double HypervolumeAbove(std::vector<std::vector<double>> points, const std::vector<double>& reference,
                        size_t dims) {
  if (points.empty()) return 0;
  if (dims == 1) {
    double best = reference[0];
    for (const auto& p : points) best = std::max(best, p[0]);
    return best - reference[0];
  }
  if (dims == 2) {
    // Sweep by the first coordinate, descending: each new best in the second
    // adds a strip as wide as the point's first coordinate reaches.
    std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a[0] > b[0]; });
    double volume = 0, covered = reference[1];
    for (const auto& p : points) {
      if (p[1] > covered) {
        volume += (p[0] - reference[0]) * (p[1] - covered);
        covered = p[1];
      }
    }
    return volume;
  }
  // Slice along the last coordinate, descending: between consecutive levels the
  // slab's cross-section is the (dims-1)-volume of the points at or above it.
  const size_t last = dims - 1;
  std::sort(points.begin(), points.end(), [last](const auto& a, const auto& b) { return a[last] > b[last]; });
  double volume = 0;
  std::vector<std::vector<double>> slice;
  for (size_t i = 0; i < points.size(); ++i) {
    slice.push_back(points[i]);
    const double next = i + 1 < points.size() ? points[i + 1][last] : reference[last];
    const double depth = points[i][last] - next;
    if (depth > 0) volume += depth * HypervolumeAbove(slice, reference, dims - 1);
  }
  return volume;
}

// ---------------------------------------------------------------------------
// Building the report

// The fields of a metric's path in a trial result: report names of nested
// fields (step_time_ms, throughput), any other name a dotted path.
std::vector<std::string> MetricPath(const std::string& metric) {
  std::string path = metric;
  if (metric == "step_time_ms") path = "step_time_ms.median";
  if (metric == "throughput") path = "throughput.samples_per_s";
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    fields.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return fields;
    start = dot + 1;
  }
}

// The finite number at `path` in `result`, or nullopt.
std::optional<double> ValueAt(const json& result, const std::vector<std::string>& path) {
  const json* node = &result;
  for (const std::string& field : path) {
    if (!node->is_object()) return std::nullopt;
    auto it = node->find(field);
    if (it == node->end()) return std::nullopt;
    node = &*it;
  }
  if (!node->is_number()) return std::nullopt;
  const double value = node->get<double>();
  if (!std::isfinite(value)) return std::nullopt;
  return value;
}

// ReportMetrics() followed by any other metric the objectives, constraints or
// parity rule name.
std::vector<std::string> SummarizedMetrics(const std::vector<Objective>& objectives,
                                           const std::vector<Constraint>& constraints,
                                           const ParityRule& parity) {
  std::vector<std::string> metrics = ReportMetrics();
  auto add = [&metrics](const std::string& metric) {
    if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) metrics.push_back(metric);
  };
  for (const Objective& objective : objectives) add(objective.metric);
  for (const Constraint& constraint : constraints) add(constraint.metric);
  add(parity.metric);
  return metrics;
}

std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* format, ...) {
  char buffer[256];
  va_list args;
  va_start(args, format);
  const int size = std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  if (size < static_cast<int>(sizeof(buffer))) return std::string(buffer, size > 0 ? size : 0);
  std::string out(size + 1, '\0');
  va_start(args, format);
  std::vsnprintf(out.data(), out.size(), format, args);
  va_end(args);
  out.resize(size);
  return out;
}

// Feasible when the config has completed trials and every constraint holds on
// the metric's mean; otherwise the reasons, joined by "; ".
void CheckConstraints(const std::vector<Constraint>& constraints, ConfigSummary& summary) {
  std::vector<std::string> reasons;
  if (summary.seeds_completed == 0) {
    reasons.push_back(summary.trials_stopped > 0 ? "stopped early by the strategy (no completed trials)"
                                                 : "no completed trials");
  } else {
    for (const Constraint& constraint : constraints) {
      auto it = summary.metrics.find(constraint.metric);
      if (it == summary.metrics.end()) {
        reasons.push_back(constraint.metric + " not measured");
        continue;
      }
      const double mean = it->second.mean;
      if (constraint.min && mean < *constraint.min) {
        reasons.push_back(Printf("%s mean %g < min %g", constraint.metric.c_str(), mean, *constraint.min));
      }
      if (constraint.max && mean > *constraint.max) {
        reasons.push_back(Printf("%s mean %g > max %g", constraint.metric.c_str(), mean, *constraint.max));
      }
    }
  }
  summary.feasible = reasons.empty();
  summary.infeasible_reason.clear();
  for (const std::string& reason : reasons) {
    summary.infeasible_reason += (summary.infeasible_reason.empty() ? "" : "; ") + reason;
  }
}

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

// Hypervolume of the front in baseline-normalized objective space, reference
// point the origin; on failure 0 and the reason in the note.
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
  report.hypervolume = Hypervolume(points, report.reference_point);
  report.hypervolume_note = Printf(
      "exact hypervolume of the %zu front configs in baseline-normalized objective space: each objective "
      "mean divided by the baseline's (inverted, baseline / value, for objectives to minimize), so higher "
      "is better and the baseline alone scores 1; reference point the origin",
      points.size());
}

void CompareWithBaseline(const Report& report, const ConfigSummary* baseline, ConfigSummary& config) {
  const std::string& quality = report.parity.metric;
  auto find = [](const ConfigSummary& summary, const std::string& metric) -> const MetricSummary* {
    auto it = summary.metrics.find(metric);
    return it == summary.metrics.end() ? nullptr : &it->second;
  };
  if (config.seeds_completed == 0) {
    config.parity = config.trials_stopped > 0 ? "stopped early" : "no data";
    return;
  }
  if (config.is_baseline) {
    config.parity = "baseline";
    if (const MetricSummary* throughput = find(config, "throughput")) {
      config.speedup = Interval{1, 1, 1, throughput->n, throughput->n};
    }
    if (const MetricSummary* q = find(config, quality)) config.quality_delta = Interval{0, 0, 0, q->n, q->n};
    return;
  }
  config.parity = "inconclusive";
  if (baseline == nullptr) return;
  const MetricSummary* throughput = find(config, "throughput");
  const MetricSummary* baseline_throughput = find(*baseline, "throughput");
  if (throughput != nullptr && baseline_throughput != nullptr) {
    config.speedup = SpeedupInterval(*throughput, *baseline_throughput);
  }
  const MetricSummary* q = find(config, quality);
  const MetricSummary* baseline_q = find(*baseline, quality);
  const bool lower = LowerIsBetter(quality, report.objectives);
  std::optional<Interval> paired;
  if (report.parity.test == "paired") paired = PairedDifferenceInterval(config.parity_by_seed, baseline->parity_by_seed);
  if (paired) {
    // Same seeds on both sides (same data order and initialization): the
    // per-seed differences carry the comparison.
    config.parity_test = "paired";
    config.quality_delta = paired;
    config.parity = PairedParityVerdict(config.parity_by_seed, baseline->parity_by_seed, report.parity.margin, lower);
  } else if (q != nullptr && baseline_q != nullptr) {
    config.parity_test = "welch";
    config.quality_delta = DifferenceInterval(*q, *baseline_q);
    config.parity = ParityVerdict(*q, *baseline_q, report.parity.margin, lower);
  }
}

// ---------------------------------------------------------------------------
// Rendering

std::string FormatMetric(const ConfigSummary& config, const std::string& metric, const char* format,
                         double scale = 1) {
  auto it = config.metrics.find(metric);
  return it == config.metrics.end() ? "-" : Printf(format, it->second.mean * scale);
}

std::string FormatMeanAndHalfWidth(const ConfigSummary& config, const std::string& metric) {
  auto it = config.metrics.find(metric);
  if (it == config.metrics.end()) return "-";
  const MetricSummary& s = it->second;
  if (s.n < 2) return Printf("%.4f", s.mean);
  return Printf("%.4f\u00b1%.4f", s.mean, (s.ci_high - s.ci_low) / 2);
}

std::string FormatCount(const ConfigSummary& config, const std::string& metric) {
  auto it = config.metrics.find(metric);
  if (it == config.metrics.end()) return "-";
  const double v = it->second.mean;
  if (std::fabs(v) >= 1e9) return Printf("%.2fG", v / 1e9);
  if (std::fabs(v) >= 1e6) return Printf("%.2fM", v / 1e6);
  if (std::fabs(v) >= 1e3) return Printf("%.1fK", v / 1e3);
  return Printf("%.0f", v);
}

bool HasSpread(const Interval& interval) { return interval.n_variant >= 2 && interval.n_baseline >= 2; }

std::string FormatSpeedup(const ConfigSummary& config) {
  if (!config.speedup) return "-";
  const Interval& s = *config.speedup;
  if (config.is_baseline || !HasSpread(s)) return Printf("%.2fx", s.value);
  return Printf("%.2fx [%.2f, %.2f]", s.value, s.low, s.high);
}

std::string FormatQualityDelta(const ConfigSummary& config) {
  if (!config.quality_delta) return "-";
  const Interval& d = *config.quality_delta;
  if (config.is_baseline || !HasSpread(d)) return Printf("%+.4f", d.value);
  return Printf("%+.4f\u00b1%.4f", d.value, (d.high - d.low) / 2);
}

std::string FormatSeeds(const ConfigSummary& config) {
  std::string text = std::to_string(config.seeds_completed);
  if (config.trials_failed > 0) text += Printf(" (%d failed)", config.trials_failed);
  if (config.trials_stopped > 0) text += Printf(" (%d stopped)", config.trials_stopped);
  return text;
}

// "*" on the front; "infeasible" for a config with data that breaks a constraint.
std::string FrontMarker(const ConfigSummary& config) {
  if (config.on_front) return "*";
  return config.seeds_completed > 0 && !config.feasible ? "infeasible" : "";
}

// The report as rows of text cells, shared by the terminal and HTML tables.
struct TextTable {
  std::vector<std::string> header;
  std::vector<bool> right_aligned;
  std::vector<std::vector<std::string>> rows;
};

// The task's quality metric pair: BEV occupancy reports IoU, classification accuracy.
struct QualityColumns {
  std::string val, test, val_label, test_label;
};

QualityColumns QualityColumnsOf(const Report& report) {
  bool iou = report.parity.metric.find("iou") != std::string::npos;
  for (const Objective& o : report.objectives) iou = iou || o.metric.find("iou") != std::string::npos;
  if (iou) return {"val_iou", "test_iou", "val IoU", "test IoU"};
  return {"val_accuracy", "test_accuracy", "val acc", "test acc"};
}

TextTable BuildTextTable(const Report& report) {
  TextTable table;
  const QualityColumns quality = QualityColumnsOf(report);
  table.header = {"config",
                  "seeds",
                  quality.val_label,
                  quality.test_label,
                  "step ms",
                  "samples/s",
                  "MFU %",
                  "peak MB",
                  "params",
                  "bottleneck",
                  "speed-up [95% CI]",
                  "\u0394 " + report.parity.metric,
                  "parity",
                  "front"};
  table.right_aligned = {false, true, true, true, true, true, true, true, false, true, true, false, false};
  for (const ConfigSummary& c : report.configs) {
    table.rows.push_back({c.is_baseline ? "baseline" : c.config_key, FormatSeeds(c),
                          FormatMeanAndHalfWidth(c, quality.val), FormatMetric(c, quality.test, "%.4f"),
                          FormatMetric(c, "step_time_ms", "%.2f"), FormatMetric(c, "throughput", "%.1f"),
                          FormatMetric(c, "mfu", "%.1f", 100), FormatMetric(c, "peak_memory_mb", "%.1f"),
                          FormatCount(c, "params"), BottleneckLabel(c), FormatSpeedup(c), FormatQualityDelta(c),
                          c.parity, FrontMarker(c)});
  }
  return table;
}

std::string DescribeObjectives(const std::vector<Objective>& objectives) {
  std::string out;
  for (const Objective& o : objectives) {
    out += (out.empty() ? "" : ", ") + o.metric + (o.maximize ? " (maximize)" : " (minimize)");
  }
  return out.empty() ? "none" : out;
}

std::string DescribeConstraints(const std::vector<Constraint>& constraints) {
  std::string out;
  for (const Constraint& c : constraints) {
    std::string bounds;
    if (c.min) bounds += Printf(" >= %g", *c.min);
    if (c.max) bounds += (bounds.empty() ? "" : " and") + Printf(" <= %g", *c.max);
    out += (out.empty() ? "" : ", ") + c.metric + bounds;
  }
  return out.empty() ? "none" : out;
}

// Lines explaining the table: the rules behind each figure, the hypervolume and
// why each infeasible config is.
std::vector<std::string> ReportNotes(const Report& report) {
  std::vector<std::string> notes = {
      "objectives: " + DescribeObjectives(report.objectives) +
          "; front (*): non-dominated among feasible configs on the objectives' means",
      "constraints (on means): " + DescribeConstraints(report.constraints),
      Printf(
          "parity: %s, margin %g; at parity when the one-sided 95%% lower bound of the quality gain over the "
          "baseline is above -margin, worse when its one-sided 95%% upper bound is below -margin "
          "(%s; fewer than 2 seeds on either side: inconclusive)",
          report.parity.metric.c_str(), report.parity.margin,
          report.parity.test == "paired"
              ? "paired: the per-seed differences where the variant completed the baseline's seeds, else Welch"
              : "Welch"),
      "intervals: \u00b1 is the half-width of the two-sided 95% Student-t interval of the mean (of the "
      "difference, Welch, for the \u0394 column); speed-up: mean throughput ratio, 95% delta-method interval "
      "with Welch-Satterthwaite degrees of freedom",
  };
  std::string reference;
  for (double r : report.reference_point) reference += (reference.empty() ? "" : ", ") + Printf("%g", r);
  notes.push_back(Printf("hypervolume: %.6g (reference point (%s)); %s", report.hypervolume,
                         reference.c_str(), report.hypervolume_note.c_str()));
  if (report.time_to_target_goal) {
    notes.push_back(Printf("time to target: summed step time until %s first reached %.4g (the baseline's mean "
                           "final value, shifted by the margin); trials that never reached it are left out",
                           report.parity.metric.c_str(), *report.time_to_target_goal));
  }
  for (const ConfigSummary& c : report.configs) {
    if (!c.feasible) notes.push_back("infeasible: " + c.config_key + ": " + c.infeasible_reason);
  }
  return notes;
}

// Display width of UTF-8 text: its code points.
size_t DisplayWidth(const std::string& text) {
  return std::count_if(text.begin(), text.end(),
                       [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; });
}

std::string EscapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string CsvField(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char ch : field) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

// The shortest text that reads back as the same double.
std::string CsvNumber(double value) { return json(value).dump(); }

json IntervalToJson(const std::optional<Interval>& interval) {
  if (!interval) return nullptr;
  return {{"value", interval->value},
          {"low", interval->low},
          {"high", interval->high},
          {"n_variant", interval->n_variant},
          {"n_baseline", interval->n_baseline}};
}

json OptionalToJson(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }

// A linear plot axis with round ticks.
struct Axis {
  double low = 0, high = 1, step = 0.2;
  double ToPixel(double v, double pixel_low, double pixel_high) const {
    return pixel_low + (v - low) / (high - low) * (pixel_high - pixel_low);
  }
};

// An axis covering [low, high] with about five ticks at 1, 2 or 5 times a power of ten.
Axis NiceAxis(double low, double high) {
  if (!(high > low)) {
    const double pad = low != 0 ? std::fabs(low) * 0.05 : 1;
    low -= pad;
    high += pad;
  }
  const double pad = (high - low) * 0.04;
  low -= pad;
  high += pad;
  const double raw = (high - low) / 5;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double fraction = raw / magnitude;
  const double step = (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * magnitude;
  return Axis{std::floor(low / step) * step, std::ceil(high / step) * step, step};
}

// One plotted config: means and 95% intervals of throughput (x) and quality (y).
struct PlotPoint {
  const ConfigSummary* config;
  int row;  // 1-based row in the table
  MetricSummary x, y;
};

std::string Px(double v) { return Printf("%.2f", v); }

std::string RenderSvg(const Report& report, const std::vector<PlotPoint>& points) {
  constexpr double kWidth = 820, kHeight = 500;
  constexpr double kLeft = 80, kRight = 600, kTop = 20, kBottom = 440;  // plot area
  const bool lower_is_better = LowerIsBetter(report.parity.metric, report.objectives);

  double x_low = 0, x_high = 1, y_low = 0, y_high = 1;
  if (!points.empty()) {
    x_low = y_low = std::numeric_limits<double>::infinity();
    x_high = y_high = -std::numeric_limits<double>::infinity();
    for (const PlotPoint& p : points) {
      x_low = std::min(x_low, p.x.ci_low);
      x_high = std::max(x_high, p.x.ci_high);
      y_low = std::min(y_low, p.y.ci_low);
      y_high = std::max(y_high, p.y.ci_high);
    }
  }
  const Axis x_axis = NiceAxis(x_low, x_high), y_axis = NiceAxis(y_low, y_high);
  auto px = [&](double v) { return x_axis.ToPixel(v, kLeft, kRight); };
  auto py = [&](double v) { return y_axis.ToPixel(v, kBottom, kTop); };

  std::string svg = Printf(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" "
      "role=\"img\" aria-label=\"throughput versus %s\">\n",
      kWidth, kHeight, kWidth, kHeight, EscapeHtml(report.parity.metric).c_str());
  svg += "<g class=\"axes\">\n";
  for (int i = 0; x_axis.low + i * x_axis.step <= x_axis.high + x_axis.step * 1e-9; ++i) {
    const double v = x_axis.low + i * x_axis.step, x = px(v);
    svg += "<line class=\"grid\" x1=\"" + Px(x) + "\" y1=\"" + Px(kTop) + "\" x2=\"" + Px(x) + "\" y2=\"" +
           Px(kBottom) + "\"/>";
    svg += "<line class=\"tick\" x1=\"" + Px(x) + "\" y1=\"" + Px(kBottom) + "\" x2=\"" + Px(x) + "\" y2=\"" +
           Px(kBottom + 5) + "\"/>";
    svg += "<text class=\"tick-label\" x=\"" + Px(x) + "\" y=\"" + Px(kBottom + 18) +
           "\" text-anchor=\"middle\">" + Printf("%g", std::fabs(v) < x_axis.step * 1e-9 ? 0.0 : v) +
           "</text>\n";
  }
  for (int i = 0; y_axis.low + i * y_axis.step <= y_axis.high + y_axis.step * 1e-9; ++i) {
    const double v = y_axis.low + i * y_axis.step, y = py(v);
    svg += "<line class=\"grid\" x1=\"" + Px(kLeft) + "\" y1=\"" + Px(y) + "\" x2=\"" + Px(kRight) +
           "\" y2=\"" + Px(y) + "\"/>";
    svg += "<line class=\"tick\" x1=\"" + Px(kLeft - 5) + "\" y1=\"" + Px(y) + "\" x2=\"" + Px(kLeft) +
           "\" y2=\"" + Px(y) + "\"/>";
    svg += "<text class=\"tick-label\" x=\"" + Px(kLeft - 8) + "\" y=\"" + Px(y + 4) +
           "\" text-anchor=\"end\">" + Printf("%g", std::fabs(v) < y_axis.step * 1e-9 ? 0.0 : v) +
           "</text>\n";
  }
  svg += "<line class=\"axis\" x1=\"" + Px(kLeft) + "\" y1=\"" + Px(kBottom) + "\" x2=\"" + Px(kRight) +
         "\" y2=\"" + Px(kBottom) + "\"/>";
  svg += "<line class=\"axis\" x1=\"" + Px(kLeft) + "\" y1=\"" + Px(kTop) + "\" x2=\"" + Px(kLeft) +
         "\" y2=\"" + Px(kBottom) + "\"/>\n";
  svg += "<text class=\"axis-label\" x=\"" + Px((kLeft + kRight) / 2) + "\" y=\"" + Px(kBottom + 45) +
         "\" text-anchor=\"middle\">throughput (samples/s)</text>\n";
  svg += "<text class=\"axis-label\" transform=\"rotate(-90)\" x=\"" + Px(-(kTop + kBottom) / 2) + "\" y=\"" +
         Px(22) + "\" text-anchor=\"middle\">" + EscapeHtml(report.parity.metric) +
         (lower_is_better ? " (lower is better)" : " (higher is better)") + "</text>\n";
  svg += "</g>\n";

  std::vector<const PlotPoint*> front;
  for (const PlotPoint& p : points) {
    if (p.config->on_front) front.push_back(&p);
  }
  std::sort(front.begin(), front.end(),
            [](const PlotPoint* a, const PlotPoint* b) { return a->x.mean < b->x.mean; });
  std::string front_points;
  for (const PlotPoint* p : front) {
    front_points += (front_points.empty() ? "" : " ") + Px(px(p->x.mean)) + "," + Px(py(p->y.mean));
  }
  svg += "<polyline class=\"front\" points=\"" + front_points + "\"/>\n";

  svg += "<g class=\"errorbars\">\n";
  for (const PlotPoint& p : points) {
    const double x = px(p.x.mean), y = py(p.y.mean);
    svg += "<line class=\"errorbar\" x1=\"" + Px(px(p.x.ci_low)) + "\" y1=\"" + Px(y) + "\" x2=\"" +
           Px(px(p.x.ci_high)) + "\" y2=\"" + Px(y) + "\"/>";
    svg += "<line class=\"errorbar\" x1=\"" + Px(x) + "\" y1=\"" + Px(py(p.y.ci_low)) + "\" x2=\"" + Px(x) +
           "\" y2=\"" + Px(py(p.y.ci_high)) + "\"/>\n";
  }
  svg += "</g>\n<g class=\"points\">\n";
  for (const PlotPoint& p : points) {
    const double x = px(p.x.mean), y = py(p.y.mean);
    const ConfigSummary& c = *p.config;
    if (c.is_baseline) {
      svg += "<circle class=\"baseline\" cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"10\"/>";
    }
    svg += "<circle class=\"config\" data-config=\"" + EscapeHtml(c.config_key) + "\" data-front=\"" +
           (c.on_front ? "true" : "false") + "\" data-feasible=\"" + (c.feasible ? "true" : "false") +
           "\" data-baseline=\"" + (c.is_baseline ? "true" : "false") + "\" cx=\"" + Px(x) + "\" cy=\"" +
           Px(y) + "\" r=\"5\"><title>" +
           EscapeHtml(Printf("#%d %s: throughput %.1f [%.1f, %.1f] (n=%d), %s %.4f [%.4f, %.4f] (n=%d)",
                             p.row, c.is_baseline ? "baseline" : c.config_key.c_str(), p.x.mean, p.x.ci_low,
                             p.x.ci_high, p.x.n, report.parity.metric.c_str(), p.y.mean, p.y.ci_low,
                             p.y.ci_high, p.y.n)) +
           "</title></circle>";
    svg += "<text class=\"point-label\" x=\"" + Px(x + 7) + "\" y=\"" + Px(y - 7) + "\">" +
           (c.is_baseline ? std::string("baseline") : std::to_string(p.row)) + "</text>\n";
  }
  if (points.empty()) {
    svg += "<text class=\"empty\" x=\"" + Px((kLeft + kRight) / 2) + "\" y=\"" + Px((kTop + kBottom) / 2) +
           "\" text-anchor=\"middle\">no configs with both throughput and " +
           EscapeHtml(report.parity.metric) + "</text>\n";
  }
  svg += "</g>\n";

  // Legend, right of the plot; its markers carry "key" classes, never "config".
  const double lx = kRight + 30;
  double ly = kTop + 10;
  auto entry = [&](const std::string& marker, const std::string& label) {
    svg += marker + "<text class=\"legend-label\" x=\"" + Px(lx + 18) + "\" y=\"" + Px(ly + 4) + "\">" +
           label + "</text>\n";
    ly += 24;
  };
  svg += "<g class=\"legend\">\n";
  const std::string at = "cx=\"" + Px(lx) + "\" r=\"5\" ";
  entry("<circle class=\"key key-front\" " + at + "cy=\"" + Px(ly) + "\"/>", "on the Pareto front");
  entry("<circle class=\"key key-dominated\" " + at + "cy=\"" + Px(ly) + "\"/>", "feasible, dominated");
  entry("<circle class=\"key key-infeasible\" " + at + "cy=\"" + Px(ly) + "\"/>", "infeasible");
  entry("<circle class=\"key key-baseline\" cx=\"" + Px(lx) + "\" cy=\"" + Px(ly) + "\" r=\"10\"/>",
        "baseline");
  entry("<line class=\"key key-front-line\" x1=\"" + Px(lx - 10) + "\" y1=\"" + Px(ly) + "\" x2=\"" +
            Px(lx + 10) + "\" y2=\"" + Px(ly) + "\"/>",
        "front (by throughput)");
  entry("<line class=\"key key-errorbar\" x1=\"" + Px(lx - 10) + "\" y1=\"" + Px(ly) + "\" x2=\"" +
            Px(lx + 10) + "\" y2=\"" + Px(ly) + "\"/>",
        "95% interval of the mean");
  svg += "</g>\n</svg>\n";
  return svg;
}

constexpr const char* kHtmlStyle = R"(
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #1b1f24; }
h1 { font-size: 20px; margin: 0 0 4px; }
p.meta { color: #57606a; margin: 0 0 16px; }
figure { margin: 0 0 16px; }
figcaption { color: #57606a; }
svg { max-width: 100%; height: auto; font-size: 12px; }
svg .grid { stroke: #eaeef2; }
svg .axis, svg .tick { stroke: #57606a; }
svg .tick-label, svg .legend-label, svg .point-label { fill: #1b1f24; }
svg .axis-label { fill: #1b1f24; font-weight: 600; }
svg polyline.front, svg line.key-front-line {
  fill: none; stroke: #0969da; stroke-width: 2; stroke-dasharray: 6 3;
}
svg line.errorbar, svg line.key-errorbar { stroke: #8c959f; stroke-width: 1.2; }
svg circle.config, svg circle.key-dominated { fill: #8c959f; stroke: #fff; }
svg circle.config[data-front="true"], svg circle.key-front { fill: #0969da; }
svg circle.config[data-feasible="false"], svg circle.key-infeasible {
  fill: #fff; stroke: #cf222e; stroke-width: 2;
}
svg circle.baseline, svg circle.key-baseline { fill: none; stroke: #bf8700; stroke-width: 2.5; }
table { border-collapse: collapse; margin: 8px 0 16px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #d0d7de; white-space: nowrap; }
th { background: #f6f8fa; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.baseline td { font-weight: 600; }
tr.infeasible td { color: #8c959f; }
ul.notes { color: #57606a; padding-left: 20px; }
)";

}  // namespace

// ---------------------------------------------------------------------------
// Public API

std::string BottleneckLabel(const ConfigSummary& config) {
  if (config.bottleneck_verdicts.size() == 1) return config.bottleneck_verdicts.begin()->first;
  std::string label;
  for (const auto& [verdict, n] : config.bottleneck_verdicts) {
    label += (label.empty() ? "" : ", ") + verdict + " " + std::to_string(n);
  }
  return label;
}

const std::vector<std::string>& ReportMetrics() {
  static const std::vector<std::string> kMetrics = {"val_accuracy",   "test_accuracy", "val_iou", "test_iou", "val_loss",
                                                    "step_time_ms",   "throughput",    "mfu",
                                                    "peak_memory_mb", "params",        "time_to_target_s"};
  return kMetrics;
}

std::optional<double> MetricOf(const nlohmann::json& result, const std::string& metric) {
  return ValueAt(result, MetricPath(metric));
}

namespace {

// Half-width of the Student-t bound at quantile p of a summary's mean (n - 1
// degrees of freedom); 0 without spread.
double HalfWidth(const MetricSummary& s, double p) {
  return s.n < 2 || s.std == 0 ? 0 : StudentTQuantile(p, s.n - 1) * s.std / std::sqrt(static_cast<double>(s.n));
}

// The non-inferiority verdict from one-sided bounds of variant - baseline: the
// gain in quality, negated when lower is better, against -margin.
std::string VerdictFromBounds(const Interval& bounds, double margin, bool lower_is_better) {
  const double gain_low = lower_is_better ? -bounds.high : bounds.low;
  const double gain_high = lower_is_better ? -bounds.low : bounds.high;
  if (gain_low > -margin) return "at parity";
  if (gain_high < -margin) return "worse";
  return "inconclusive";
}

}  // namespace

MetricSummary SummarizeMetric(const std::vector<double>& values) {
  MetricSummary summary;
  summary.n = static_cast<int>(values.size());
  if (values.empty()) return summary;
  double sum = 0;
  for (double v : values) sum += v;
  summary.mean = sum / summary.n;
  summary.ci_low = summary.ci_high = summary.mean;
  if (summary.n < 2) return summary;
  double squares = 0;
  for (double v : values) squares += (v - summary.mean) * (v - summary.mean);
  summary.std = std::sqrt(squares / (summary.n - 1));
  const double half = HalfWidth(summary, kTwoSidedQuantile);
  summary.ci_low = summary.mean - half;
  summary.ci_high = summary.mean + half;
  return summary;
}

double StudentTQuantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) {
    throw std::invalid_argument(Printf("StudentTQuantile needs 0 < p < 1 and df > 0 (p=%g, df=%g)", p, df));
  }
  if (p == 0.5) return 0;
  // Summaries over seeds ask for the same few (p, integer df) again and again.
  thread_local std::map<std::pair<double, double>, double> memo;
  const bool memoize = df == std::floor(df) && df <= 10000;
  if (memoize) {
    auto it = memo.find({p, df});
    if (it != memo.end()) return it->second;
  }
  const double t = StudentTQuantileUncached(p, df);
  if (memoize && memo.size() < 4096) memo.emplace(std::make_pair(p, df), t);
  return t;
}

namespace {

double StudentTQuantileUncached(double p, double df) {
  // Solve P(T > t) = tail for t >= 0 by bisection; the tail is decreasing in t.
  const double tail = p < 0.5 ? p : 1 - p;
  double low = 0, high = 1;
  while (StudentTUpperTail(high, df) > tail) {
    low = high;
    high *= 2;
  }
  for (int i = 0; i < 200 && high - low > 1e-14 * high; ++i) {
    const double mid = (low + high) / 2;
    if (StudentTUpperTail(mid, df) > tail) {
      low = mid;
    } else {
      high = mid;
    }
  }
  const double t = (low + high) / 2;
  return p < 0.5 ? -t : t;
}

}  // namespace

std::optional<Interval> SpeedupInterval(const MetricSummary& variant, const MetricSummary& baseline) {
  RequireData(variant, baseline);
  if (!(baseline.mean > 0)) return std::nullopt;
  const double ratio = variant.mean / baseline.mean;
  if (variant.n < 2 || baseline.n < 2 || variant.mean == 0) {
    return Interval{ratio, ratio, ratio, variant.n, baseline.n};
  }
  // Squared coefficients of variation of the two means.
  const double term_v = variant.std * variant.std / (variant.n * variant.mean * variant.mean);
  const double term_b = baseline.std * baseline.std / (baseline.n * baseline.mean * baseline.mean);
  if (term_v + term_b == 0) return Interval{ratio, ratio, ratio, variant.n, baseline.n};
  return SymmetricInterval(ratio, std::fabs(ratio) * std::sqrt(term_v + term_b),
                           WelchDegreesOfFreedom(term_v, variant.n, term_b, baseline.n), kTwoSidedQuantile,
                           variant.n, baseline.n);
}

Interval DifferenceInterval(const MetricSummary& variant, const MetricSummary& baseline) {
  return WelchInterval(variant, baseline, kTwoSidedQuantile);
}

namespace {

// The per-seed differences variant - baseline, when both completed the same seeds (at least 2).
std::optional<std::vector<double>> PairedDifferences(const std::map<int64_t, double>& variant,
                                                     const std::map<int64_t, double>& baseline) {
  if (variant.size() < 2 || variant.size() != baseline.size()) return std::nullopt;
  std::vector<double> d;
  for (const auto& [seed, value] : variant) {
    auto b = baseline.find(seed);
    if (b == baseline.end()) return std::nullopt;
    d.push_back(value - b->second);
  }
  return d;
}

}  // namespace

std::optional<Interval> PairedDifferenceInterval(const std::map<int64_t, double>& variant,
                                                 const std::map<int64_t, double>& baseline) {
  const std::optional<std::vector<double>> d = PairedDifferences(variant, baseline);
  if (!d) return std::nullopt;
  const MetricSummary s = SummarizeMetric(*d);
  return Interval{s.mean, s.ci_low, s.ci_high, s.n, s.n};
}

std::string PairedParityVerdict(const std::map<int64_t, double>& variant, const std::map<int64_t, double>& baseline,
                                double margin, bool lower_is_better) {
  const std::optional<std::vector<double>> d = PairedDifferences(variant, baseline);
  if (!d) return "inconclusive";
  const MetricSummary s = SummarizeMetric(*d);
  const double half = HalfWidth(s, kOneSidedQuantile);
  return VerdictFromBounds(Interval{s.mean, s.mean - half, s.mean + half, s.n, s.n}, margin, lower_is_better);
}

std::string ParityVerdict(const MetricSummary& variant, const MetricSummary& baseline, double margin,
                          bool lower_is_better) {
  const Interval bounds = WelchInterval(variant, baseline, kOneSidedQuantile);  // its ends: one-sided bounds
  if (variant.n < 2 || baseline.n < 2) return "inconclusive";
  return VerdictFromBounds(bounds, margin, lower_is_better);
}

std::vector<size_t> ParetoFront(const std::vector<std::vector<double>>& points,
                                const std::vector<bool>& maximize) {
  for (const auto& p : points) {
    if (p.size() != maximize.size())
      throw std::invalid_argument("ParetoFront: point size differs from objectives");
  }
  // In "higher is better" coordinates and sorted lexicographically descending,
  // every point that dominates another comes before it.
  const size_t dims = maximize.size();
  auto at = [&](size_t i, size_t d) { return maximize[d] ? points[i][d] : -points[i][d]; };
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    for (size_t d = 0; d < dims; ++d) {
      if (at(a, d) != at(b, d)) return at(a, d) > at(b, d);
    }
    return a < b;
  });
  // a dominates b: at least as good everywhere, strictly better somewhere.
  auto dominates = [&](size_t a, size_t b) {
    bool better = false;
    for (size_t d = 0; d < dims; ++d) {
      if (at(a, d) < at(b, d)) return false;
      if (at(a, d) > at(b, d)) better = true;
    }
    return better;
  };
  std::vector<size_t> front;
  if (dims == 2) {
    // Dominated exactly when an earlier point with a greater first coordinate
    // is at least as good in the second, or one with an equal first coordinate
    // is better in the second (the first of its run of equal first coordinates).
    double best_before_run = -std::numeric_limits<double>::infinity();
    size_t run_start = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const size_t i = order[k];
      if (k > 0 && at(i, 0) != at(order[k - 1], 0)) {
        for (size_t r = run_start; r < k; ++r) best_before_run = std::max(best_before_run, at(order[r], 1));
        run_start = k;
      }
      const bool dominated = best_before_run >= at(i, 1) || at(order[run_start], 1) > at(i, 1);
      if (!dominated) front.push_back(i);
    }
  } else {
    // A point dominated by anything is dominated by a front point found before it.
    for (size_t i : order) {
      if (std::none_of(front.begin(), front.end(), [&](size_t f) { return dominates(f, i); })) front.push_back(i);
    }
  }
  std::sort(front.begin(), front.end());
  return front;
}

double Hypervolume(const std::vector<std::vector<double>>& points, const std::vector<double>& reference) {
  if (reference.empty()) throw std::invalid_argument("Hypervolume: empty reference point");
  std::vector<std::vector<double>> above;
  for (const auto& p : points) {
    if (p.size() != reference.size())
      throw std::invalid_argument("Hypervolume: point size differs from reference");
    bool strictly_above = true;
    for (size_t i = 0; i < p.size(); ++i) strictly_above = strictly_above && p[i] > reference[i];
    if (strictly_above) above.push_back(p);
  }
  return HypervolumeAbove(std::move(above), reference, reference.size());
}

namespace {

// The train_time_s of the first (train_time_s, value) evaluation in [begin, end)
// whose value reaches `goal`.
template <typename It>
std::optional<double> FirstReaching(It begin, It end, double goal, bool lower_is_better) {
  for (It e = begin; e != end; ++e) {
    if (lower_is_better ? e->second <= goal : e->second >= goal) return e->first;
  }
  return std::nullopt;
}

}  // namespace

std::optional<double> TimeToGoal(const nlohmann::json& result, const std::string& metric, double goal,
                                 bool lower_is_better) {
  if (!result.is_object() || !result.contains("evals") || !result["evals"].is_array()) return std::nullopt;
  std::vector<std::pair<double, double>> evals;
  for (const json& e : result["evals"]) {
    if (!e.contains(metric) || !e[metric].is_number() || !e.contains("train_time_s")) continue;
    evals.emplace_back(e["train_time_s"].get<double>(), e[metric].get<double>());
  }
  return FirstReaching(evals.begin(), evals.end(), goal, lower_is_better);
}

struct ReportBuilder::State {
  // What the report keeps of one trial; its metric values are in `values`.
  struct Trial {
    int64_t seed = 0;
    bool completed = false;
    bool failed = false;  // failed or diverged
    bool stopped = false;  // stopped early by the strategy
    // Completed without a time_to_target_s of its own: its evaluations of the
    // parity metric, (train_time_s, value), are evals[evals_begin, evals_end).
    bool needs_time_to_target = false;
    uint32_t evals_begin = 0, evals_end = 0;
  };
  struct Group {
    Config config;  // null until Build when the trials came without one
    bool baseline = false;
    std::vector<uint32_t> trials;
    std::map<std::string, int> verdicts;
    std::string bottleneck_summary;
    json profiles = json::array();
  };

  std::string experiment_id;
  std::string name;
  std::vector<Objective> objectives;
  std::vector<Constraint> constraints;
  ParityRule parity;
  std::vector<std::string> metrics;  // SummarizedMetrics
  std::vector<std::vector<std::string>> paths;  // MetricPath of each
  size_t parity_index = 0, time_to_target_index = 0;
  std::vector<std::string> parity_path;

  std::vector<Trial> trials;
  std::vector<double> values;  // trial-major, metrics.size() per trial; NaN where absent
  std::vector<std::pair<double, double>> evals;
  std::vector<double> baseline_parity;  // flagged baseline trials' parity metric
  std::map<std::string, Group> groups;  // by config key, in key order

  double& Value(size_t trial, size_t metric) { return values[trial * metrics.size() + metric]; }

  // The summaries of the metrics `which` (indices into `metrics`) over the
  // group's completed trials, and its trial counts.
  ConfigSummary Summarize(const std::string& key, const Group& group, const std::vector<size_t>& which) {
    ConfigSummary summary;
    summary.config_key = key;
    summary.is_baseline = group.baseline;
    summary.trials_total = static_cast<int>(group.trials.size());
    for (uint32_t t : group.trials) {
      if (trials[t].failed) ++summary.trials_failed;
      if (trials[t].stopped) ++summary.trials_stopped;
      if (trials[t].completed) ++summary.seeds_completed;
    }
    std::vector<double> column;
    for (size_t m : which) {
      column.clear();
      for (uint32_t t : group.trials) {
        if (trials[t].completed && !std::isnan(Value(t, m))) column.push_back(Value(t, m));
      }
      if (!column.empty()) summary.metrics.emplace(metrics[m], SummarizeMetric(column));
    }
    return summary;
  }

  // Everything else the report shows of a config; consumes the group.
  void Complete(const std::string& key, Group& group, ConfigSummary& summary) {
    summary.config = group.config.is_null() ? json::parse(key) : std::move(group.config);
    for (uint32_t t : group.trials) {
      if (trials[t].completed && !std::isnan(Value(t, parity_index))) {
        summary.parity_by_seed[trials[t].seed] = Value(t, parity_index);
      }
    }
    summary.bottleneck_verdicts = std::move(group.verdicts);
    summary.bottleneck_summary = std::move(group.bottleneck_summary);
    summary.profiles = std::move(group.profiles);
  }

  // Time to target of the trials without their own, against the baseline's
  // mean final parity metric minus the margin (plus it for a loss).
  std::optional<double> AddTimeToTarget() {
    if (baseline_parity.empty()) return std::nullopt;
    const bool lower = LowerIsBetter(parity.metric, objectives);
    const double mean = std::accumulate(baseline_parity.begin(), baseline_parity.end(), 0.0) / baseline_parity.size();
    const double goal = lower ? mean + parity.margin : mean - parity.margin;
    for (size_t t = 0; t < trials.size(); ++t) {
      if (!trials[t].needs_time_to_target) continue;
      const auto seconds = FirstReaching(evals.begin() + trials[t].evals_begin, evals.begin() + trials[t].evals_end,
                                         goal, lower);
      if (seconds) Value(t, time_to_target_index) = *seconds;
    }
    return goal;
  }
};

ReportBuilder::ReportBuilder(std::string experiment_id, const SearchSpace& space) : state_(new State) {
  State& s = *state_;
  s.experiment_id = std::move(experiment_id);
  s.name = space.name;
  s.objectives = space.objectives;
  s.constraints = space.constraints;
  s.parity = space.parity;
  s.metrics = SummarizedMetrics(space.objectives, space.constraints, space.parity);
  for (const std::string& metric : s.metrics) s.paths.push_back(MetricPath(metric));
  auto index_of = [&s](const std::string& metric) {
    return static_cast<size_t>(std::find(s.metrics.begin(), s.metrics.end(), metric) - s.metrics.begin());
  };
  s.parity_index = index_of(space.parity.metric);
  s.time_to_target_index = index_of("time_to_target_s");
  s.parity_path = {space.parity.metric};
}

ReportBuilder::~ReportBuilder() = default;

// What the report reads of one trial result.
struct ResultFacts {
  std::vector<double> values;  // by metric index; NaN when absent
  bool has_evals = false;      // "evals" is a list
  std::vector<std::pair<double, double>> evals;  // (train_time_s, parity metric) per evaluation with both
  std::optional<std::string> verdict;
  std::string bottleneck_summary;
  json profile;  // the profiled seed's entry in ConfigSummary::profiles; null when not profiled
};

namespace {

// The profiles entry of a result's "profile" section.
json ProfileEntry(const std::string& trial_id, const json& profile) {
  json top = json::array();
  for (const json& op : profile.value("top_operators", json::array())) {
    if (top.size() == 5) break;
    top.push_back({{"name", op.value("name", "")}, {"class", op.value("class", "")}, {"share", op.value("share", 0.0)}});
  }
  json entry = {{"trial_id", trial_id},
                {"tool", profile.value("tool", "")},
                {"host", profile.value("host", "")},
                {"trace", profile.value("trace", profile.value("report", ""))},
                {"top_operators", top}};
  if (profile.contains("error")) entry["error"] = profile["error"];
  return entry;
}

void ReadFacts(const json& result, const std::vector<std::vector<std::string>>& paths,
               const std::vector<std::string>& parity_path, const std::string& trial_id, ResultFacts& facts) {
  if (!result.is_object()) return;
  for (size_t m = 0; m < paths.size(); ++m) {
    if (std::optional<double> v = ValueAt(result, paths[m])) facts.values[m] = *v;
  }
  auto evals = result.find("evals");
  if (evals != result.end() && evals->is_array()) {
    facts.has_evals = true;
    for (const json& e : *evals) {
      const std::optional<double> value = ValueAt(e, parity_path);
      auto seconds = e.is_object() ? e.find("train_time_s") : e.end();
      if (value && seconds != e.end() && seconds->is_number()) facts.evals.emplace_back(seconds->get<double>(), *value);
    }
  }
  const json& bottleneck = result.value("bottleneck", json());
  if (bottleneck.is_object() && bottleneck.value("verdict", json()).is_string()) {
    facts.verdict = bottleneck["verdict"].get<std::string>();
    facts.bottleneck_summary = bottleneck.value("summary", "");
  }
  const json& profile = result.value("profile", json());
  if (profile.is_object()) facts.profile = ProfileEntry(trial_id, profile);
}

// ReadFacts on the JSON text without building the document: a SAX pass that
// keeps the numbers at the metrics' paths, the evaluations' parity metric and
// time, and the bottleneck verdict.
class FactsReader final : public nlohmann::json_sax<json> {
 public:
  FactsReader(const std::vector<std::vector<std::string>>& paths, const std::string& parity_metric,
              ResultFacts& facts)
      : paths_(paths), parity_metric_(parity_metric), facts_(facts) {}

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t v) override { return Number(static_cast<double>(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Number(static_cast<double>(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Number(v); }
  bool string(string_t& v) override {
    if (levels_.size() == 2 && !levels_[1].array && levels_[0].key == "bottleneck") {
      if (levels_[1].key == "verdict") facts_.verdict = v;
      if (levels_[1].key == "summary") facts_.bottleneck_summary = v;
    }
    return true;
  }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    levels_.push_back({false, {}});
    if (InEvaluation()) evaluation_ = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::quiet_NaN()};
    return true;
  }
  bool key(string_t& k) override {
    levels_.back().key = k;
    return true;
  }
  bool end_object() override {
    if (InEvaluation() && !std::isnan(evaluation_.first) && !std::isnan(evaluation_.second)) {
      facts_.evals.push_back(evaluation_);
    }
    levels_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (levels_.size() == 1 && levels_[0].key == "evals") facts_.has_evals = true;
    levels_.push_back({true, {}});
    return true;
  }
  bool end_array() override {
    levels_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) override {
    throw std::invalid_argument("trial result is not valid JSON at byte " + std::to_string(position) + " ('" +
                                token + "'): " + e.what());
  }

 private:
  struct Level {
    bool array;
    std::string key;  // objects: the key of the value being read
  };

  // Inside an element of the top-level "evals" list.
  bool InEvaluation() const {
    return levels_.size() == 3 && !levels_[0].array && levels_[0].key == "evals" && levels_[1].array &&
           !levels_[2].array;
  }

  bool Number(double v) {
    if (InEvaluation()) {
      if (levels_[2].key == "train_time_s") evaluation_.first = v;
      if (levels_[2].key == parity_metric_ && std::isfinite(v)) evaluation_.second = v;
      return true;
    }
    if (!std::isfinite(v)) return true;
    for (size_t m = 0; m < paths_.size(); ++m) {
      const std::vector<std::string>& path = paths_[m];
      if (path.size() != levels_.size()) continue;
      bool match = true;
      for (size_t i = 0; i < path.size() && match; ++i) match = !levels_[i].array && levels_[i].key == path[i];
      if (match) facts_.values[m] = v;
    }
    return true;
  }

  const std::vector<std::vector<std::string>>& paths_;
  const std::string& parity_metric_;
  ResultFacts& facts_;
  std::vector<Level> levels_;
  std::pair<double, double> evaluation_;
};

}  // namespace

void ReportBuilder::Add(TrialRecord trial) {
  ResultFacts facts;
  facts.values.assign(state_->metrics.size(), std::numeric_limits<double>::quiet_NaN());
  if (trial.state == "completed") ReadFacts(trial.result, state_->paths, state_->parity_path, trial.trial_id, facts);
  trial.result = json();
  AddFacts(std::move(trial), std::move(facts));
}

void ReportBuilder::Add(TrialRecord trial, std::string_view result_json) {
  ResultFacts facts;
  facts.values.assign(state_->metrics.size(), std::numeric_limits<double>::quiet_NaN());
  if (trial.state == "completed" && !result_json.empty()) {
    if (result_json.find("\"profile\"") != std::string_view::npos) {
      // Profiled seeds (few) keep a summary of their profile: read the document.
      ReadFacts(json::parse(result_json), state_->paths, state_->parity_path, trial.trial_id, facts);
    } else {
      FactsReader reader(state_->paths, state_->parity.metric, facts);
      json::sax_parse(result_json, &reader);
    }
  }
  AddFacts(std::move(trial), std::move(facts));
}

void ReportBuilder::AddFacts(TrialRecord trial, ResultFacts facts) {
  State& s = *state_;
  const uint32_t index = static_cast<uint32_t>(s.trials.size());
  State::Trial t;
  t.seed = trial.seed;
  t.completed = trial.state == "completed";
  t.failed = trial.state == "failed" || trial.state == "diverged";
  t.stopped = trial.state == "stopped";
  auto [it, inserted] = s.groups.try_emplace(std::move(trial.config_key));
  State::Group& group = it->second;
  if (inserted) group.config = std::move(trial.config);
  group.baseline = group.baseline || trial.is_baseline;
  group.trials.push_back(index);
  s.values.insert(s.values.end(), facts.values.begin(), facts.values.end());
  if (t.completed) {
    const double parity = s.Value(index, s.parity_index);
    if (trial.is_baseline && !std::isnan(parity)) s.baseline_parity.push_back(parity);
    if (std::isnan(s.Value(index, s.time_to_target_index)) && facts.has_evals) {
      t.needs_time_to_target = true;
      t.evals_begin = static_cast<uint32_t>(s.evals.size());
      s.evals.insert(s.evals.end(), facts.evals.begin(), facts.evals.end());
      t.evals_end = static_cast<uint32_t>(s.evals.size());
    }
    if (facts.verdict) {
      ++group.verdicts[*facts.verdict];
      if (group.bottleneck_summary.empty()) group.bottleneck_summary = std::move(facts.bottleneck_summary);
    }
    if (!facts.profile.is_null()) group.profiles.push_back(std::move(facts.profile));
  }
  s.trials.push_back(t);
}

Report ReportBuilder::Build(bool front_only) {
  State& s = *state_;
  Report report;
  report.experiment_id = s.experiment_id;
  report.name = s.name;
  report.objectives = s.objectives;
  report.constraints = s.constraints;
  report.parity = s.parity;
  report.time_to_target_goal = s.AddTimeToTarget();

  // The baseline (the first group, by key, with a flagged trial) first, then by key.
  std::vector<std::pair<const std::string*, State::Group*>> order;
  order.reserve(s.groups.size());
  for (auto& [key, group] : s.groups) {
    if (group.baseline && (order.empty() || !order.front().second->baseline)) {
      order.insert(order.begin(), {&key, &group});
    } else {
      group.baseline = false;
      order.emplace_back(&key, &group);
    }
  }
  const bool has_baseline = !order.empty() && order.front().second->baseline;

  // Feasibility and the front need only the objectives' and constraints' means.
  std::vector<size_t> deciding, all(s.metrics.size());
  std::iota(all.begin(), all.end(), 0);
  for (size_t m = 0; m < s.metrics.size(); ++m) {
    auto named = [&](const auto& list) {
      return std::any_of(list.begin(), list.end(), [&](const auto& x) { return x.metric == s.metrics[m]; });
    };
    if (named(s.objectives) || named(s.constraints)) deciding.push_back(m);
  }
  std::vector<ConfigSummary> configs;
  configs.reserve(order.size());
  for (const auto& [key, group] : order) configs.push_back(s.Summarize(*key, *group, deciding));
  for (ConfigSummary& config : configs) CheckConstraints(s.constraints, config);
  MarkFront(s.objectives, configs);

  for (size_t i = 0; i < configs.size(); ++i) {
    ConfigSummary& config = configs[i];
    if (front_only && !config.is_baseline && !config.on_front) continue;
    ConfigSummary full = s.Summarize(*order[i].first, *order[i].second, all);
    s.Complete(*order[i].first, *order[i].second, full);
    full.feasible = config.feasible;
    full.infeasible_reason = std::move(config.infeasible_reason);
    full.on_front = config.on_front;
    report.configs.push_back(std::move(full));
  }
  configs = std::vector<ConfigSummary>();
  s.groups.clear();

  ComputeHypervolume(report);
  const ConfigSummary* baseline =
      has_baseline && report.configs.front().seeds_completed > 0 ? &report.configs.front() : nullptr;
  for (ConfigSummary& config : report.configs) CompareWithBaseline(report, baseline, config);
  return report;
}

Report BuildReport(const std::string& experiment_id, const SearchSpace& space, std::vector<TrialRecord> trials) {
  ReportBuilder builder(experiment_id, space);
  for (TrialRecord& trial : trials) builder.Add(std::move(trial));
  return builder.Build();
}

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
    configs.push_back({{"config_key", c.config_key},
                       {"config", c.config},
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
                       {"bottleneck",
                        {{"verdicts", c.bottleneck_verdicts},
                         {"summary", c.bottleneck_summary},
                         {"profiles", c.profiles}}}});
  }
  return {{"experiment_id", report.experiment_id},
          {"name", report.name},
          {"objectives", objectives},
          {"constraints", constraints},
          {"parity", {{"metric", report.parity.metric}, {"margin", report.parity.margin}, {"test", report.parity.test}}},
          {"configs", configs},
          {"hypervolume", report.hypervolume},
          {"reference_point", report.reference_point},
          {"hypervolume_note", report.hypervolume_note},
          {"time_to_target_goal", report.time_to_target_goal ? json(*report.time_to_target_goal) : json(nullptr)}};
}

std::string RenderTable(const Report& report) {
  const TextTable table = BuildTextTable(report);
  std::vector<size_t> widths;
  for (const std::string& cell : table.header) widths.push_back(DisplayWidth(cell));
  for (const auto& row : table.rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string pad(widths[i] - DisplayWidth(cells[i]), ' ');
      std::string cell = table.right_aligned[i] ? pad + cells[i] : cells[i] + pad;
      out += (i == 0 ? "" : "  ") + cell;
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = "experiment " + report.experiment_id +
                    (report.name.empty() ? "" : " (" + report.name + ")") +
                    Printf(": %zu configs\n\n", report.configs.size());
  out += line(table.header);
  std::string rule;
  for (size_t i = 0; i < widths.size(); ++i) rule += (i == 0 ? "" : "  ") + std::string(widths[i], '-');
  out += rule + "\n";
  for (const auto& row : table.rows) out += line(row);
  out += "\n";
  for (const std::string& note : ReportNotes(report)) out += note + "\n";
  return out;
}

std::string RenderCsv(const Report& report) {
  const std::vector<std::string> metrics =
      SummarizedMetrics(report.objectives, report.constraints, report.parity);
  std::vector<std::string> header = {"config_key",    "is_baseline", "seeds_completed",   "trials_total",
                                     "trials_failed", "feasible",    "infeasible_reason", "on_front"};
  for (const std::string& m : metrics) {
    for (const char* stat : {"_n", "_mean", "_std", "_ci_low", "_ci_high"}) header.push_back(m + stat);
  }
  for (const char* interval : {"speedup", "quality_delta"}) {
    for (const char* part : {"", "_low", "_high", "_n_variant", "_n_baseline"}) {
      header.push_back(std::string(interval) + part);
    }
  }
  header.push_back("parity");

  auto join = [](const std::vector<std::string>& fields) {
    std::string out;
    for (size_t i = 0; i < fields.size(); ++i) out += (i == 0 ? "" : ",") + CsvField(fields[i]);
    return out + "\r\n";
  };
  auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  std::string out = join(header);
  for (const ConfigSummary& c : report.configs) {
    std::vector<std::string> row = {c.config_key,
                                    flag(c.is_baseline),
                                    std::to_string(c.seeds_completed),
                                    std::to_string(c.trials_total),
                                    std::to_string(c.trials_failed),
                                    flag(c.feasible),
                                    c.infeasible_reason,
                                    flag(c.on_front)};
    for (const std::string& m : metrics) {
      auto it = c.metrics.find(m);
      if (it == c.metrics.end()) {
        row.insert(row.end(), {"0", "", "", "", ""});
        continue;
      }
      const MetricSummary& s = it->second;
      row.insert(row.end(), {std::to_string(s.n), CsvNumber(s.mean), CsvNumber(s.std), CsvNumber(s.ci_low),
                             CsvNumber(s.ci_high)});
    }
    for (const std::optional<Interval>& interval : {c.speedup, c.quality_delta}) {
      if (!interval) {
        row.insert(row.end(), {"", "", "", "", ""});
        continue;
      }
      row.insert(row.end(), {CsvNumber(interval->value), CsvNumber(interval->low), CsvNumber(interval->high),
                             std::to_string(interval->n_variant), std::to_string(interval->n_baseline)});
    }
    row.push_back(c.parity);
    out += join(row);
  }
  return out;
}

namespace {

// "Where the step time goes": each config's verdict and summary, and the
// profiled seeds' traces and top operators (docs/profiling.md).
std::string BottleneckSection(const Report& report) {
  std::string html;
  for (const ConfigSummary& c : report.configs) {
    if (c.bottleneck_verdicts.empty() && c.profiles.empty()) continue;
    html += "<li class=\"bottleneck\" data-config=\"" + EscapeHtml(c.config_key) + "\"><b>" +
            EscapeHtml(c.is_baseline ? "baseline" : c.config_key) + "</b>: " + EscapeHtml(BottleneckLabel(c)) +
            (c.bottleneck_summary.empty() ? "" : " &mdash; " + EscapeHtml(c.bottleneck_summary));
    for (const json& p : c.profiles) {
      html += "<br>profile of " + EscapeHtml(p.value("trial_id", "")) + " (" + EscapeHtml(p.value("tool", "")) +
              "): " + EscapeHtml(p.value("host", "") + ":" + p.value("trace", ""));
      if (p.contains("error")) html += " &mdash; " + EscapeHtml(p["error"].dump());
      std::string ops;
      for (const json& op : p.value("top_operators", json::array())) {
        ops += (ops.empty() ? "" : ", ") + op.value("name", "") + Printf(" %.0f%%", 100 * op.value("share", 0.0));
      }
      if (!ops.empty()) html += "<br>top operators: " + EscapeHtml(ops);
    }
    html += "</li>\n";
  }
  if (html.empty()) return "";
  return "<h2>Where the step time goes</h2>\n<ul class=\"bottlenecks\">\n" + html + "</ul>\n";
}

}  // namespace

std::string RenderHtml(const Report& report) {
  std::vector<PlotPoint> points;
  for (size_t i = 0; i < report.configs.size(); ++i) {
    const ConfigSummary& c = report.configs[i];
    auto x = c.metrics.find("throughput");
    auto y = c.metrics.find(report.parity.metric);
    if (x != c.metrics.end() && y != c.metrics.end()) {
      points.push_back(PlotPoint{&c, static_cast<int>(i) + 1, x->second, y->second});
    }
  }
  const std::string title =
      "Frontier report: " + report.experiment_id + (report.name.empty() ? "" : " (" + report.name + ")");
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
                     EscapeHtml(title) + "</title>\n<style>" + kHtmlStyle + "</style>\n</head>\n<body>\n";
  html += "<h1>" + EscapeHtml(title) + "</h1>\n";
  html += "<p class=\"meta\">" +
          EscapeHtml(Printf("%zu configs; objectives: ", report.configs.size()) +
                     DescribeObjectives(report.objectives) +
                     "; constraints: " + DescribeConstraints(report.constraints)) +
          "</p>\n";
  html += "<figure>\n" + RenderSvg(report, points) + "<figcaption>" +
          EscapeHtml("Mean throughput versus mean " + report.parity.metric +
                     " per config, with 95% intervals of both means; numbers are table rows.") +
          "</figcaption>\n</figure>\n";

  const TextTable table = BuildTextTable(report);
  html += "<table>\n<thead><tr><th>#</th>";
  for (const std::string& cell : table.header) html += "<th>" + EscapeHtml(cell) + "</th>";
  html += "</tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const ConfigSummary& c = report.configs[i];
    const char* row_class = c.is_baseline ? " class=\"baseline\""
                            : !c.feasible ? " class=\"infeasible\""
                                          : "";
    html += Printf("<tr%s><td class=\"num\">%zu</td>", row_class, i + 1);
    for (size_t j = 0; j < table.rows[i].size(); ++j) {
      html += std::string(table.right_aligned[j] ? "<td class=\"num\">" : "<td>") +
              EscapeHtml(table.rows[i][j]) + "</td>";
    }
    html += "</tr>\n";
  }
  html += "</tbody>\n</table>\n<ul class=\"notes\">\n";
  for (const std::string& note : ReportNotes(report)) html += "<li>" + EscapeHtml(note) + "</li>\n";
  html += "</ul>\n" + BottleneckSection(report) + "</body>\n</html>\n";
  return html;
}

}  // namespace frontier
