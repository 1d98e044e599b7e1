// Experiment reports: statistics over seeds per configuration, the Pareto
// front on the experiment's objectives, its hypervolume, and each variant
// against the baseline (speed-up, quality delta, parity verdict), built from
// the stored trials (the statistics themselves are server/analysis/) and
// rendered as a terminal table (table.cc), CSV (csv.cc), JSON (json.cc) or a
// self-contained HTML page (html.cc) with an SVG plot (svg.cc). Pure
// functions of the stored trials; no I/O. Definitions: docs/report.md.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/metric_catalog.h"
#include "search_spaces/search_space.h"
#include "server/analysis/statistics.h"
#include "server/report/labels.h"

namespace frontier {

// One finished (or failed) trial as the report sees it.
struct TrialRecord {
  std::string trial_id;
  std::string config_key;  // ConfigKey(config)
  Config config;           // {} for the baseline
  bool is_baseline = false;
  int64_t seed = 0;
  std::string state;      // "completed", "diverged", "failed", "pending", "running", "stopped", "cancelled"
  nlohmann::json result;  // the trial result (docs/trial-output.md) when completed or diverged
  // When the trial's lease began and its attempt ended (Unix ms; 0 when it
  // never ran): the device time it cost, for "what the search cost".
  int64_t started_ms = 0, finished_ms = 0;
  // Who proposed its configuration and why (an external proposer: docs/proposers.md);
  // kScreenProposer (server/search/screen.h) for a screening trial.
  std::string proposer, rationale;
  std::string error;  // why it failed, when it did (a screening trial's drop reason reads it)
};

// One point of a config's learning curve: its seeds' evaluation number i,
// averaged over the seeds that have it.
struct CurvePoint {
  double train_time_s = 0;  // summed step time until the evaluation
  double value = 0;         // the parity metric
  int n = 0;                // seeds averaged
};

// Device-seconds a config's trials held a device (lease start to the
// attempt's end, every state), and how they were spent.
struct SearchCost {
  int trials_run = 0;
  double device_s = 0;   // all of it
  double train_s = 0;    // summed step time of completed trials
  double profile_s = 0;  // their profiled steps
  double other_s = 0;    // the rest of completed trials: start-up, data, evaluations
  double stopped_s = 0;  // trials stopped early by the strategy
  double failed_s = 0;   // failed and diverged trials
  // Where completed trials' time went, from their results' phases
  // (docs/trial-output.md, Phases): by ReportedPhases() name, summed over the
  // trials_with_phases completed trials that have them, whose device-seconds
  // are phased_device_s (results of older workers have none).
  std::map<std::string, double> phases;
  int trials_with_phases = 0;
  double phased_device_s = 0;
};

// How a table shows a stored error (why a trial or a config failed): its
// first line, control characters as spaces, at most `max_bytes` (cut at a
// UTF-8 boundary, "..." added). The CSV, the JSON and the HTML's hover keep
// the full text.
std::string FirstLineOf(const std::string& text, size_t max_bytes = 160);

// The names of a result's phases the report sums: kTrialPhases
// (search_spaces/trial_phases.h), then "other" and "wall".
const std::vector<std::string>& ReportedPhases();

// The trained network as it would ship (a result's `deploy` section,
// docs/trial-output.md), over a config's completed seeds: per format
// ("float", "int8") every number of the format's object by field
// ("latency_ms", "latency_p99_ms", "size_bytes", "val_accuracy" or
// "val_iou", "quantized_layers", "quantized_flop_share", ...) and seed; the
// engine, headline setting and quality metric of the first seed with a deploy
// section; the int8 layers left in float ([{name, why}]) of the first seed
// that names them. The onboard view (views.h, Onboard) reads it.
struct DeployFormat {
  std::map<std::string, std::map<int64_t, double>> by_seed;
  nlohmann::json float_layers;  // null when no seed named them
};
struct DeploySummary {
  std::string engine, quality_metric;
  int batch = 0, threads = 0;
  std::map<std::string, DeployFormat> formats;
};

struct ConfigSummary {
  std::string config_key;
  Config config;
  std::string label;                  // what differs from the baseline (labels.h); "baseline" for it
  std::vector<ConfigChange> changes;  // the same, one entry per dimension
  nlohmann::json choices;             // every dimension's choice, the baseline's where unset
  bool is_baseline = false;
  int seeds_completed = 0;
  int trials_total = 0;
  int trials_failed = 0;                         // failed or diverged
  std::string failure;  // why: the first failed or diverged seed's error as stored; "" when none did
  int trials_stopped = 0;                        // stopped early by the strategy (asha)
  std::map<std::string, MetricSummary> metrics;  // see ReportMetrics()
  bool feasible = true;                          // meets every constraint (on means)
  std::string infeasible_reason;
  bool on_front = false;                  // non-dominated among feasible configs on the objectives (means)
  std::optional<Interval> speedup;        // throughput ratio variant / baseline
  std::optional<Interval> quality_delta;  // parity metric, variant - baseline
  // The one-sided bound of variant - baseline that decided the parity verdict, at the verdict's
  // quantile (95%, or split over the looks of adaptive seeds): the delta is at least `bound`
  // (`at_least`) or at most it. For "at parity" and "inconclusive" the bound on the side of a loss
  // (the delta's low end, its high end for a lower-is-better metric), for "worse" the other.
  // nullopt for the baseline and whenever a side had fewer than 2 values.
  struct ParityBound {
    double bound = 0;
    bool at_least = true;
    double quantile = 0.95;
  };
  std::optional<ParityBound> parity_bound;
  std::string parity;  // "baseline", "at parity", "worse", "inconclusive", "stopped early" (every trial
                       // stopped by the strategy) or "no data"
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
  // The completed seeds' mean share of profiled time by operator class
  // (profile.by_class[*].share), for the stacked bar; empty when none was profiled.
  std::map<std::string, double> profile_shares;
  std::vector<CurvePoint> curve;  // the parity metric against summed step time
  SearchCost cost;
  // Who proposed it (the strategy, or an external proposer such as
  // "optuna:tpe") and the rationale it gave: of its first trial that has one.
  std::string proposer, rationale;
  // Data-parallel spaces (docs/distributed.md): this config's ranks, and at
  // ranks > 1 its per-rank throughput over the throughput of its 1-rank twin
  // (the config with every other choice equal), when both have completed seeds.
  int ranks = 1;
  std::optional<double> scaling_efficiency;
  std::optional<DeploySummary> deploy;  // only when a completed seed has a deploy section
};

// An external proposer's calls over the experiment (docs/proposers.md),
// summed from the store's proposer_calls; all 0 for the built-in strategies.
struct ProposerCallsSummary {
  int calls = 0, failed = 0, accepted = 0, rejected = 0, model_calls = 0;
  int64_t latency_ms = 0;  // summed, as the coordinator measured the calls
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::string last_error;  // of the latest call that failed ("" when none did)
  std::string paused;      // why the search is paused now ("" when it is not)
};


// The bottleneck column: the verdict all completed seeds share, or the counts
// when they differ ("compute-bound 1, memory-bound 1"); "" when none has one.
std::string BottleneckLabel(const ConfigSummary& config);

// One trial's files in the coordinator's artifact store (server/store/artifact_store.h).
struct TrialArtifacts {
  std::string trial_id;
  std::string profile_of;  // a profile run's (`frontier profile`) trial; empty otherwise
  std::vector<std::pair<std::string, int64_t>> files;  // name, bytes
};

// Speed-first screening (docs/strategies.md#screening): each screened config
// with the drop rule's verdict over the stored screening trials, and what
// the screening cost. Screening trials are in no other figure of the report.
struct ScreenedConfig {
  std::string config_key;
  std::string label;
  bool kept = true;
  std::string reason;  // why it was dropped; empty when kept
};
struct ScreeningSummary {
  int steps = 0;
  // Screened inside the trials (screen.in_trial, strategy asha): no
  // screening trials; a dropped config's first trial was stopped at the
  // screened step, its reason in its error. `kept` then means "not screened
  // out": a config stopped or failed before the step was never measured.
  bool in_trial = false;
  int trials = 0;       // screening trials, the baseline's included
  double device_s = 0;  // their lease start to end, summed
  std::vector<ScreenedConfig> configs;  // every screened config but the baseline, in the order screened
  int dropped() const;
};

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
  int trials_on_shared_cores = 0;       // completed trials whose cores another trial used meanwhile (placement)
  // Time to target: the summed step time until a trial's validation first
  // reached `time_to_target_goal` (the baseline's mean final parity metric
  // minus the margin, plus it for a loss), from the evaluations each result
  // carries; trials that never reached it are left out (see the metric's n).
  std::optional<double> time_to_target_goal;
  // The space as the views need it: its dimensions (empty for a space read
  // back from goals only), the strategy, seeds per config and the full grid's size.
  std::vector<ReportDimension> dimensions;
  StrategySpec strategy;
  int repeats = 0;
  size_t grid_size = 0;  // 0 when the space has no dimensions
  ProposerCallsSummary proposer_calls;  // set by whoever reads the store (server/rpc/stored_report.cc)
  bool data_parallel = false;  // the space varies runtime.ranks or its baseline has ranks > 1
  // The space has an op dimension (ops.attention_kernel, ops.bev_pool): the
  // configs' op_speedup and op_bandwidth_share are summarized and shown.
  bool varies_op = false;
  // The trials' stored artifacts, for the HTML page's links (set by whoever
  // reads the store, server/rpc/stored_report.cc): each file linked as
  // artifacts_href/EXPERIMENT/TRIAL/NAME, or with an empty href named by the
  // command that fetches it.
  std::vector<TrialArtifacts> artifacts;
  std::string artifacts_href;
  std::optional<ScreeningSummary> screening;  // only when the experiment screened
};

// How many configurations a proposer drew as a fallback (IsFallbackProposer,
// server/search/external.h), not by its own method.
int FallbackConfigs(const Report& report);

// Metrics summarized per configuration, by name as they appear in reports:
// the catalog's reported metrics (search_spaces/metric_catalog.h), by their
// report_position: val_accuracy, test_accuracy, val_iou, test_iou (BEV task), val_loss,
// step_time_ms (median step time), throughput (samples/s), mfu,
// peak_memory_mb, params, time_to_target_s, flops (training FLOPs per sample),
// latency_ms (median inference latency at the latency batch). A report metric's value in a trial
// result is MetricOf (metric_catalog.h).
const std::vector<std::string>& ReportMetrics();

// ReportMetrics() followed by any other metric the objectives, constraints or
// parity rule name, then, for a space that varies an op (`varies_op`: an op
// dimension, IsOpDimension), op_speedup and op_bandwidth_share: the metrics a
// report on such a space summarizes.
std::vector<std::string> SummarizedMetrics(const std::vector<Objective>& objectives,
                                           const std::vector<Constraint>& constraints,
                                           const ParityRule& parity, bool varies_op = false);


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
struct ResultFacts;  // what a report reads of one trial result (result_reader.h)

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
  void AddScreening(const TrialRecord& trial, nlohmann::json result);
  std::unique_ptr<State> state_;
};

Report BuildReport(const std::string& experiment_id, const SearchSpace& space,
                   std::vector<TrialRecord> trials);

// Seconds of summed step time until the evaluations in `result` ("evals":
// [{val_accuracy, val_loss, train_time_s}]) first reach `goal` on `metric`;
// nullopt when they never do.
std::optional<double> TimeToGoal(const nlohmann::json& result, const std::string& metric, double goal,
                                 bool lower_is_better);

// The renderers, one file each.
// Every field of the report; absent intervals and constraint bounds are null.
nlohmann::json ReportToJson(const Report& report);
// ReportToJson(report).dump(2), the same bytes, built one config at a time: the whole tree of a
// report of 100,000 configs took 2 GB and most of its 9 s (docs/report.md#at-100000-trials).
std::string RenderJson(const Report& report);
// An aligned plain-text table, one row per config, followed by notes (rules,
// hypervolume, infeasible configs). By default the columns that matter, the
// config label cut to fit `width` columns (the full labels listed below);
// `wide`: every column, nothing cut.
struct TableOptions {
  bool wide = false;
  size_t width = 120;
};
std::string RenderTable(const Report& report, const TableOptions& options = {});
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
