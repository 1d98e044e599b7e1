// Experiment analysis: statistics over seeds per configuration, the Pareto
// front on the experiment's objectives, its hypervolume, and each variant
// against the baseline (speed-up, quality delta, parity verdict), rendered as
// a terminal table, CSV, JSON or a self-contained HTML page with an SVG plot.
// Pure functions of the stored trials; no I/O. Definitions: docs/report.md.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"

namespace frontier {

// One finished (or failed) trial as the report sees it.
struct TrialRecord {
  std::string trial_id;
  std::string config_key;  // ConfigKey(config)
  Config config;           // {} for the baseline
  bool is_baseline = false;
  int64_t seed = 0;
  std::string state;       // "completed", "diverged", "failed", "pending", "running", "stopped", "cancelled"
  nlohmann::json result;   // the trial result (docs/trial-output.md) when completed or diverged
};

// Mean and spread of one metric over the seeds of a configuration.
struct MetricSummary {
  int n = 0;
  double mean = 0;
  double std = 0;       // sample standard deviation (0 when n < 2)
  double ci_low = 0;    // two-sided 95% Student-t interval of the mean
  double ci_high = 0;   // (equal to the mean when n < 2)
};

// An estimate with a 95% interval.
struct Interval {
  double value = 0, low = 0, high = 0;
  int n_variant = 0, n_baseline = 0;
};

struct ConfigSummary {
  std::string config_key;
  Config config;
  bool is_baseline = false;
  int seeds_completed = 0;
  int trials_total = 0;
  int trials_failed = 0;    // failed or diverged
  int trials_stopped = 0;   // stopped early by the strategy (asha)
  std::map<std::string, MetricSummary> metrics;  // see ReportMetrics()
  bool feasible = true;     // meets every constraint (on means)
  std::string infeasible_reason;
  bool on_front = false;    // non-dominated among feasible configs on the objectives (means)
  std::optional<Interval> speedup;        // throughput ratio variant / baseline
  std::optional<Interval> quality_delta;  // parity metric, variant - baseline
  std::string parity;       // "baseline", "at parity", "worse", "inconclusive", "stopped early" (every trial stopped by the strategy) or "no data"
  // How the parity verdict and quality delta were computed: "paired" (the
  // variant and the baseline completed the same seeds, at least 2: differences
  // per seed) or "welch" (unpaired); empty for the baseline and without data.
  std::string parity_test;
  std::map<int64_t, double> parity_by_seed;  // the parity metric of each completed seed
  // Where the step time goes (docs/profiling.md): each completed seed's
  // bottleneck verdict, counted; one seed's one-line summary; and the seeds
  // that were profiled: {trial_id, host, trace, top_operators [{name, class, share}]}.
  std::map<std::string, int> bottleneck_verdicts;
  std::string bottleneck_summary;
  nlohmann::json profiles = nlohmann::json::array();
};

// The bottleneck column: the verdict all completed seeds share, or the counts
// when they differ ("compute-bound 1, memory-bound 1"); "" when none has one.
std::string BottleneckLabel(const ConfigSummary& config);

struct Report {
  std::string experiment_id;
  std::string name;
  std::vector<Objective> objectives;
  std::vector<Constraint> constraints;
  ParityRule parity;
  std::vector<ConfigSummary> configs;  // baseline first, then by config key
  double hypervolume = 0;
  std::vector<double> reference_point;  // in baseline-normalized objective space
  std::string hypervolume_note;         // how it was computed, for people
  // Time to target: the summed step time until a trial's validation first
  // reached `time_to_target_goal` (the baseline's mean final parity metric
  // minus the margin, plus it for a loss), from the evaluations each result
  // carries; trials that never reached it are left out (see the metric's n).
  std::optional<double> time_to_target_goal;
};

// Metrics summarized per configuration, by name as they appear in reports:
// val_accuracy, test_accuracy, val_iou, test_iou (BEV task), val_loss, step_time_ms (median step time),
// throughput (samples/s), mfu, peak_memory_mb, params, time_to_target_s.
const std::vector<std::string>& ReportMetrics();

// The value of a report metric in a trial result; nullopt when absent or null.
std::optional<double> MetricOf(const nlohmann::json& result, const std::string& metric);

// Mean, sample standard deviation and 95% Student-t interval of the mean.
MetricSummary SummarizeMetric(const std::vector<double>& values);

// Quantile of Student's t distribution with `df` degrees of freedom (p in (0,1)).
// `df` may be fractional, or +infinity for the normal quantile. Throws
// std::invalid_argument unless 0 < p < 1 and df > 0.
double StudentTQuantile(double p, double df);

// Throughput ratio variant / baseline with a two-sided 95% interval: the delta
// method on the ratio of means, SE = R * sqrt(s_v^2 / (n_v m_v^2) + s_b^2 / (n_b m_b^2)),
// with Welch-Satterthwaite degrees of freedom on those two terms. The interval
// is the point value when either side has fewer than 2 values (no variance) or
// both have zero spread. nullopt when the baseline mean is not positive.
// Requires n >= 1 on both sides (throws std::invalid_argument otherwise).
std::optional<Interval> SpeedupInterval(const MetricSummary& variant, const MetricSummary& baseline);

// Difference of means variant - baseline with Welch's two-sided 95% interval
// (the point value when either side has fewer than 2 values or both have zero
// spread). Requires n >= 1 on both sides (throws std::invalid_argument otherwise).
Interval DifferenceInterval(const MetricSummary& variant, const MetricSummary& baseline);

// Non-inferiority verdict of a variant's quality metric against the baseline's:
// with gain = variant - baseline (baseline - variant when `lower_is_better`),
// "at parity" when the one-sided 95% Welch lower bound of the gain is above
// -margin, "worse" when the one-sided 95% upper bound is below -margin,
// "inconclusive" otherwise and whenever either side has fewer than 2 values.
// Requires n >= 1 on both sides (throws std::invalid_argument otherwise).
std::string ParityVerdict(const MetricSummary& variant, const MetricSummary& baseline, double margin,
                          bool lower_is_better);

// Paired by seed: the differences variant - baseline over seeds both sides
// completed. nullopt unless both completed exactly the same seeds, at least 2.
// The interval is two-sided 95% (Student t on the differences, n - 1 degrees
// of freedom); the point value when the differences have no spread.
std::optional<Interval> PairedDifferenceInterval(const std::map<int64_t, double>& variant,
                                                 const std::map<int64_t, double>& baseline);
// The parity verdict on paired differences (same rule as ParityVerdict, with
// one-sided 95% bounds of the mean difference); "inconclusive" unless
// PairedDifferenceInterval applies.
std::string PairedParityVerdict(const std::map<int64_t, double>& variant, const std::map<int64_t, double>& baseline,
                                double margin, bool lower_is_better);

// Indices of the non-dominated points; `maximize[i]` says the direction of objective i.
// A point dominates another when it is at least as good in every objective and
// strictly better in one, so identical points are all kept. Indices ascend.
// Throws std::invalid_argument when a point's size differs from maximize's.
std::vector<size_t> ParetoFront(const std::vector<std::vector<double>>& points, const std::vector<bool>& maximize);

// Hypervolume dominated by `points` (all objectives to maximize) above `reference`.
// Exact: a sweep for 2 objectives, recursive slicing (HSO) for more. Points not
// strictly above the reference in every objective add nothing. Throws
// std::invalid_argument when the reference is empty or a point's size differs.
double Hypervolume(const std::vector<std::vector<double>>& points, const std::vector<double>& reference);

// Groups trials (one fidelity) by config key and summarizes each group over
// its completed trials: every ReportMetrics() metric plus any other metric the
// space's objectives, constraints or parity rule name; feasibility on means; the
// front; baseline-normalized hypervolume; speed-up, quality delta and parity
// against the baseline (the first group, by key, with a trial flagged is_baseline).
//
// Trials are handed over one at a time and of each only what the report reads
// is kept (its metric values, the parity metric's evaluations for time to
// target, its bottleneck verdict, a profiled seed's summary), so a report over
// 100,000 trials never holds 100,000 parsed results at once.
struct ResultFacts;  // what a report reads of one trial result (report.cc)

class ReportBuilder {
 public:
  ReportBuilder(std::string experiment_id, const SearchSpace& space);
  ~ReportBuilder();
  ReportBuilder(const ReportBuilder&) = delete;
  ReportBuilder& operator=(const ReportBuilder&) = delete;

  // `trial.config_key` must be ConfigKey(trial.config); a null `config` is
  // taken from the key (a stored config key is the config's JSON).
  void Add(TrialRecord trial);
  // The same with the result as stored, JSON text (`trial.result` unused):
  // read without building a document.
  void Add(TrialRecord trial, std::string_view result_json);
  // The report; with `front_only`, only the baseline and the front configs are
  // summarized in full and kept (the front and hypervolume are the same).
  Report Build(bool front_only = false);

 private:
  struct State;
  void AddFacts(TrialRecord trial, ResultFacts facts);
  std::unique_ptr<State> state_;
};

Report BuildReport(const std::string& experiment_id, const SearchSpace& space, std::vector<TrialRecord> trials);

// Seconds of summed step time until the evaluations in `result` ("evals":
// [{val_accuracy, val_loss, train_time_s}]) first reach `goal` on `metric`;
// nullopt when they never do.
std::optional<double> TimeToGoal(const nlohmann::json& result, const std::string& metric, double goal,
                                 bool lower_is_better);

// Every field of the report; absent intervals and constraint bounds are null.
nlohmann::json ReportToJson(const Report& report);
// An aligned plain-text table, one row per config, followed by notes (rules,
// hypervolume, infeasible configs).
std::string RenderTable(const Report& report);
// One row per config after a header; RFC 4180 (CRLF line ends, quoted fields
// where needed); numbers round-trip; empty cells where a value is absent.
std::string RenderCsv(const Report& report);
// One self-contained HTML page (inline CSS and SVG, no scripts or external
// resources): a throughput-vs-parity-metric scatter with 95% error bars, one
// <circle class="config" data-config="KEY"> per config with both values, the
// front as <polyline class="front">, the baseline ringed (class "baseline");
// then the table and the notes.
std::string RenderHtml(const Report& report);

}  // namespace frontier
