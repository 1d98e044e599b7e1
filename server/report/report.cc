#include "server/report/report.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "search_spaces/trial_phases.h"
#include "search_spaces/trial_spec.h"
#include "server/analysis/parity.h"
#include "server/report/format.h"
#include "server/report/front.h"
#include "server/report/result_reader.h"
#include "server/search/external.h"
#include "server/search/screen.h"

namespace frontier {
namespace {

const char* const kUnknownVerdict = "unknown";  // no profile, not input-bound (worker/profile/bottleneck.h)

using nlohmann::json;

// Read of every result beside the reported metrics, for the views (the step
// time's spread, the profile by operator class, what the trials cost); only
// the step-time quantiles stay in ConfigSummary::metrics.
const std::vector<std::string> kInternalMetrics = [] {
  std::vector<std::string> metrics = {
    "step_time_ms.p10",
    "step_time_ms.p90",
    "train_time_s",
    "profile.window_ms",
    "profile.by_class.compute.share",
    "profile.by_class.normalization.share",
    "profile.by_class.elementwise.share",
    "profile.by_class.reduction.share",
    "profile.by_class.data_movement.share",
    "profile.by_class.view.share",
    "profile.by_class.autograd.share",
    "profile.by_class.other.share",
  };
  for (const std::string& phase : ReportedPhases()) metrics.push_back("phases." + phase + "_s");
  return metrics;
}();

// Metrics that are ratios of two timings (an op variant's speed-up over its
// reference): summarized with their interval on the log scale (SummarizeRatio).
// scaling_efficiency, the other ratio, is one value per config, no interval.
bool IsRatioMetric(const std::string& metric) { return metric == "op_speedup"; }

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

// One completed seed's deploy section (docs/trial-output.md) into its config's:
// every finite number of each format's object, the first seed's engine,
// headline setting and quality metric, the first float_layers list.
void AddDeploy(const json& section, int64_t seed, std::optional<DeploySummary>& into) {
  if (!into) {
    into.emplace();
    const auto text = [&](const char* key) {
      const json& v = section.value(key, json());
      return v.is_string() ? v.get<std::string>() : std::string();
    };
    const auto count = [&](const char* key) {
      const json& v = section.value(key, json());
      return v.is_number_integer() ? v.get<int>() : 0;
    };
    into->engine = text("engine");
    into->quality_metric = text("quality_metric");
    into->batch = count("batch");
    into->threads = count("threads");
  }
  for (const char* format : kDeployFormats) {
    const json& measured = section.value(format, json());
    if (!measured.is_object()) continue;
    DeployFormat& out = into->formats[format];
    for (const auto& [field, value] : measured.items()) {
      if (value.is_number() && std::isfinite(value.get<double>())) out.by_seed[field][seed] = value.get<double>();
    }
    const json& layers = measured.value("float_layers", json());
    if (out.float_layers.is_null() && layers.is_array()) out.float_layers = layers;
  }
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
  const bool lower = LowerIsBetter(quality, report.objectives);
  const double quantile = SequentialOneSidedQuantile(report.parity.looks);
  QualityComparison comparison = CompareQuality(config.parity_by_seed, baseline->parity_by_seed,
                                                report.parity.test == "paired", report.parity.margin, lower, quantile);
  if (comparison.test.empty()) return;
  config.parity_test = comparison.test;
  config.quality_delta = comparison.delta;
  config.parity = comparison.verdict;
  if (comparison.bounds) {
    // The loss side decides "at parity" (and leaves "inconclusive"); the other side "worse".
    const bool loss_side = comparison.verdict != "worse";
    const bool low = loss_side != lower;  // the delta's low end: a loss side when higher is better
    config.parity_bound =
        ConfigSummary::ParityBound{low ? comparison.bounds->low : comparison.bounds->high, low, quantile};
  }
}

}  // namespace

std::vector<std::string> SummarizedMetrics(const std::vector<Objective>& objectives,
                                           const std::vector<Constraint>& constraints,
                                           const ParityRule& parity, bool varies_op) {
  std::vector<std::string> metrics = ReportMetrics();
  auto add = [&metrics](const std::string& metric) {
    if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) metrics.push_back(metric);
  };
  for (const Objective& objective : objectives) add(objective.metric);
  for (const Constraint& constraint : constraints) add(constraint.metric);
  add(parity.metric);
  if (varies_op) {
    add("op_speedup");
    add("op_bandwidth_share");
  }
  return metrics;
}

std::string BottleneckLabel(const ConfigSummary& config) {
  if (config.bottleneck_verdicts.size() == 1) return config.bottleneck_verdicts.begin()->first;
  std::string label;
  for (const auto& [verdict, n] : config.bottleneck_verdicts) {
    label += (label.empty() ? "" : ", ") + verdict + " " + std::to_string(n);
  }
  return label;
}

const std::vector<std::string>& ReportedPhases() {
  static const std::vector<std::string> kPhases = [] {
    std::vector<std::string> names(kTrialPhases.begin(), kTrialPhases.end());
    names.insert(names.end(), {"other", "wall"});
    return names;
  }();
  return kPhases;
}

const std::vector<std::string>& ReportMetrics() {
  static const std::vector<std::string> kMetrics = [] {
    std::vector<std::string> names;
    for (const MetricInfo* m : ReportedMetrics()) names.emplace_back(m->name);
    return names;
  }();
  return kMetrics;
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
  explicit State(const SearchSpace& space) : labeler(space) {}
  // What the report keeps of one trial; its metric values are in `values`.
  struct Trial {
    int64_t seed = 0;
    double device_s = 0;  // lease start to the attempt's end; 0 when it never ran
    bool completed = false;
    bool failed = false;   // failed or diverged
    bool stopped = false;  // stopped early by the strategy
    // Completed without a time_to_target_s of its own: its evaluations of the
    // parity metric, (train_time_s, value), are evals[evals_begin, evals_end).
    bool needs_time_to_target = false;
    uint32_t evals_begin = 0, evals_end = 0;  // its evaluations of the parity metric in `evals`
  };
  struct Group {
    Config config;  // null until Build when the trials came without one
    bool baseline = false;
    std::vector<uint32_t> trials;
    std::map<std::string, int> verdicts;
    std::string bottleneck_summary;
    bool summary_known = false;  // bottleneck_summary is of a verdict other than "unknown"
    json profiles = json::array();
    std::string proposer, rationale;  // of the first trial with a rationale (else the first one's proposer)
    std::string failure;              // the first failed or diverged trial's error
    std::optional<DeploySummary> deploy;  // its completed seeds' deploy sections
  };

  std::string experiment_id;
  std::string name;
  int trials_on_shared_cores = 0;
  std::vector<Objective> objectives;
  std::vector<Constraint> constraints;
  ParityRule parity;
  std::vector<std::string> metrics;             // SummarizedMetrics, then kInternalMetrics
  std::vector<std::vector<std::string>> paths;  // MetricPath of each
  size_t parity_index = 0, time_to_target_index = 0;
  ConfigLabeler labeler;
  // Screening trials, kept apart from every figure (screen.h).
  struct Screened {
    std::string config_key;
    json config;
    bool is_baseline = false;
    double device_s = 0;
    ScreenMeasurement measurement;
  };
  std::vector<Screened> screened;
  std::map<std::string, std::string> screened_out_in_trial;  // config key -> reason (screen.in_trial)
  ScreenSpec screen;  // the space's; steps from the trials for a space read back from goals
  SearchSpace space_facts;  // the strategy, repeats and grid size, for Report
  bool data_parallel = false;
  bool varies_op = false;        // an op dimension (IsOpDimension)
  bool scaling_decides = false;  // an objective or constraint names scaling_efficiency
  std::string ranks_dimension;  // the dimension on runtime.ranks; "" when none
  int base_ranks = 1;

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
      if (column.empty()) continue;
      // A ratio's interval is on the log scale, never below 0 (docs/report.md).
      summary.metrics.emplace(metrics[m],
                              IsRatioMetric(metrics[m]) ? SummarizeRatio(column) : SummarizeMetric(column));
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
    if (group.verdicts.size() > 1) group.verdicts.erase(kUnknownVerdict);
    summary.bottleneck_verdicts = std::move(group.verdicts);
    summary.bottleneck_summary = std::move(group.bottleneck_summary);
    summary.profiles = std::move(group.profiles);
    summary.proposer = std::move(group.proposer);
    summary.rationale = std::move(group.rationale);
    summary.failure = std::move(group.failure);
    summary.deploy = std::move(group.deploy);
    summary.changes = labeler.Changes(summary.config);
    summary.label = summary.is_baseline ? "baseline" : JoinLabel(summary.changes);
    summary.choices = labeler.EffectiveChoices(summary.config);
    summary.curve = Curve(group);
    summary.cost = Cost(group);
    // The internal metrics leave `metrics` for the fields they feed.
    for (const std::string& metric : kInternalMetrics) {
      auto it = summary.metrics.find(metric);
      if (it == summary.metrics.end()) continue;
      const std::string prefix = "profile.by_class.";
      if (metric.rfind(prefix, 0) == 0) {
        summary.profile_shares[metric.substr(prefix.size(), metric.size() - prefix.size() - 6)] =
            it->second.mean;
      }
      if (metric.rfind("step_time_ms.", 0) != 0) summary.metrics.erase(it);
    }
  }

  // The seeds' evaluations averaged by their position.
  std::vector<CurvePoint> Curve(const Group& group) const {
    std::vector<CurvePoint> curve;
    for (uint32_t t : group.trials) {
      if (!trials[t].completed) continue;
      for (uint32_t e = trials[t].evals_begin; e < trials[t].evals_end; ++e) {
        const size_t i = e - trials[t].evals_begin;
        if (curve.size() <= i) curve.resize(i + 1);
        curve[i].train_time_s += evals[e].first;
        curve[i].value += evals[e].second;
        ++curve[i].n;
      }
    }
    for (CurvePoint& p : curve) {
      p.train_time_s /= p.n;
      p.value /= p.n;
    }
    return curve;
  }

  SearchCost Cost(const Group& group) {
    SearchCost cost;
    const size_t train = Index("train_time_s"), profile = Index("profile.window_ms");
    for (uint32_t t : group.trials) {
      const Trial& trial = trials[t];
      if (trial.device_s <= 0) continue;
      ++cost.trials_run;
      cost.device_s += trial.device_s;
      if (trial.stopped) {
        cost.stopped_s += trial.device_s;
      } else if (trial.failed) {
        cost.failed_s += trial.device_s;
      } else if (trial.completed) {
        const double train_s = std::isnan(Value(t, train)) ? 0 : Value(t, train);
        const double profile_s = std::isnan(Value(t, profile)) ? 0 : Value(t, profile) / 1000;
        cost.train_s += train_s;
        cost.profile_s += profile_s;
        cost.other_s += std::max(0.0, trial.device_s - train_s - profile_s);
        if (const double wall = Value(t, Index("phases.wall_s")); !std::isnan(wall)) {
          ++cost.trials_with_phases;
          cost.phased_device_s += trial.device_s;
          for (const std::string& phase : ReportedPhases()) {
            const double seconds = Value(t, Index("phases." + phase + "_s"));
            cost.phases[phase] += std::isnan(seconds) ? 0 : seconds;
          }
        }
      } else {
        cost.other_s += trial.device_s;  // cancelled while running
      }
    }
    return cost;
  }

  size_t Index(const std::string& metric) const {
    return static_cast<size_t>(std::find(metrics.begin(), metrics.end(), metric) - metrics.begin());
  }

  // Time to target of the trials without their own, against the baseline's
  // mean final parity metric minus the margin (plus it for a loss).
  std::optional<double> AddTimeToTarget() {
    if (baseline_parity.empty()) return std::nullopt;
    const bool lower = LowerIsBetter(parity.metric, objectives);
    const double mean =
        std::accumulate(baseline_parity.begin(), baseline_parity.end(), 0.0) / baseline_parity.size();
    const double goal = lower ? mean + parity.margin : mean - parity.margin;
    for (size_t t = 0; t < trials.size(); ++t) {
      if (!trials[t].needs_time_to_target) continue;
      const auto seconds = FirstReaching(evals.begin() + trials[t].evals_begin,
                                         evals.begin() + trials[t].evals_end, goal, lower);
      if (seconds) Value(t, time_to_target_index) = *seconds;
    }
    return goal;
  }
};

ReportBuilder::ReportBuilder(std::string experiment_id, const SearchSpace& space)
    : state_(new State(space)) {
  State& s = *state_;
  s.space_facts.strategy = space.strategy;
  s.space_facts.repeats = space.repeats;
  s.space_facts.dimensions = space.dimensions;
  s.experiment_id = std::move(experiment_id);
  s.name = space.name;
  s.objectives = space.objectives;
  s.constraints = space.constraints;
  s.parity = space.parity;
  s.screen = space.screen;
  s.varies_op = std::any_of(space.dimensions.begin(), space.dimensions.end(), IsOpDimension);
  s.metrics = SummarizedMetrics(space.objectives, space.constraints, space.parity, s.varies_op);
  // A data-parallel space: ranks vary, or the baseline has more than one.
  for (const Dimension& d : space.dimensions) {
    if (std::find(d.paths.begin(), d.paths.end(), "runtime.ranks") != d.paths.end()) s.ranks_dimension = d.name;
  }
  const json base_ranks = space.base.contains("/runtime/ranks"_json_pointer) ? space.base["runtime"]["ranks"] : json(1);
  s.data_parallel = !s.ranks_dimension.empty() || (base_ranks.is_number_integer() && base_ranks.get<int>() > 1);
  s.base_ranks = base_ranks.is_number_integer() ? base_ranks.get<int>() : 1;
  for (const Objective& o : space.objectives) s.scaling_decides = s.scaling_decides || o.metric == "scaling_efficiency";
  for (const Constraint& c : space.constraints) s.scaling_decides = s.scaling_decides || c.metric == "scaling_efficiency";
  if (s.data_parallel || s.scaling_decides) {
    for (const char* metric : {"per_rank_throughput", "comms_ms", "comms_exposed_share"}) {
      if (std::find(s.metrics.begin(), s.metrics.end(), metric) == s.metrics.end()) s.metrics.push_back(metric);
    }
  }
  for (const std::string& metric : kInternalMetrics) {
    if (std::find(s.metrics.begin(), s.metrics.end(), metric) == s.metrics.end()) s.metrics.push_back(metric);
  }
  for (const std::string& metric : s.metrics) s.paths.push_back(MetricPath(metric));
  auto index_of = [&s](const std::string& metric) {
    return static_cast<size_t>(std::find(s.metrics.begin(), s.metrics.end(), metric) - s.metrics.begin());
  };
  s.parity_index = index_of(space.parity.metric);
  s.time_to_target_index = index_of("time_to_target_s");
}

ReportBuilder::~ReportBuilder() = default;

int ScreeningSummary::dropped() const {
  return static_cast<int>(std::count_if(configs.begin(), configs.end(), [](const ScreenedConfig& c) { return !c.kept; }));
}

void ReportBuilder::AddScreening(const TrialRecord& trial, json result) {
  State& s = *state_;
  State::Screened screened;
  screened.config_key = trial.config_key;
  screened.config = trial.config.is_null() ? json::parse(trial.config_key, nullptr, false) : trial.config;
  screened.is_baseline = trial.is_baseline;
  if (trial.started_ms > 0 && trial.finished_ms >= trial.started_ms) {
    screened.device_s = (trial.finished_ms - trial.started_ms) / 1000.0;
  }
  if (result.is_object() && result.contains("screen") && result["screen"].is_object()) {
    s.screen.steps = result["screen"].value("steps", s.screen.steps);
  }
  screened.measurement = MeasureScreened(trial.config_key, trial.state, result, trial.error);
  s.screened.push_back(std::move(screened));
}

void ReportBuilder::Add(TrialRecord trial) {
  if (trial.proposer == kScreenProposer) return AddScreening(trial, std::move(trial.result));
  ResultFacts facts;
  facts.values.assign(state_->metrics.size(), std::numeric_limits<double>::quiet_NaN());
  if (trial.state == "completed") {
    ReadResultFacts(trial.result, state_->paths, state_->parity.metric, trial.trial_id, facts);
  }
  trial.result = json();
  AddFacts(std::move(trial), std::move(facts));
}

void ReportBuilder::Add(TrialRecord trial, std::string_view result_json) {
  if (trial.proposer == kScreenProposer) {
    return AddScreening(trial, json::parse(result_json.begin(), result_json.end(), nullptr, false));
  }
  ResultFacts facts;
  facts.values.assign(state_->metrics.size(), std::numeric_limits<double>::quiet_NaN());
  if (trial.state == "completed" && !result_json.empty()) {
    ReadResultFactsText(result_json, state_->paths, state_->parity.metric, trial.trial_id, facts);
  }
  AddFacts(std::move(trial), std::move(facts));
}

void ReportBuilder::AddFacts(TrialRecord trial, ResultFacts facts) {
  State& s = *state_;
  // A configuration screened out inside its trial (EarlyStopping): the worker ended the trial
  // "stopped: " + the stop reply's reason.
  static const std::string kStoppedScreenedOut = "stopped: " + std::string(kScreenedOut);
  if (trial.state == "stopped" && trial.error.rfind(kStoppedScreenedOut, 0) == 0) {
    s.screened_out_in_trial[trial.config_key] = trial.error.substr(kStoppedScreenedOut.size());
  }
  if (facts.shared_cores) ++s.trials_on_shared_cores;
  const uint32_t index = static_cast<uint32_t>(s.trials.size());
  State::Trial t;
  t.seed = trial.seed;
  t.completed = trial.state == "completed";
  t.failed = trial.state == "failed" || trial.state == "diverged";
  t.stopped = trial.state == "stopped";
  if (trial.started_ms > 0 && trial.finished_ms >= trial.started_ms) {
    t.device_s = (trial.finished_ms - trial.started_ms) / 1000.0;
  }
  auto [it, inserted] = s.groups.try_emplace(std::move(trial.config_key));
  State::Group& group = it->second;
  if (inserted) group.config = std::move(trial.config);
  group.baseline = group.baseline || trial.is_baseline;
  if (group.rationale.empty() && !trial.rationale.empty()) {
    group.proposer = std::move(trial.proposer);
    group.rationale = std::move(trial.rationale);
  } else if (group.proposer.empty()) {
    group.proposer = std::move(trial.proposer);
  }
  group.trials.push_back(index);
  if (t.failed && group.failure.empty()) group.failure = trial.error.substr(0, 4000);
  s.values.insert(s.values.end(), facts.values.begin(), facts.values.end());
  if (t.completed) {
    const double parity = s.Value(index, s.parity_index);
    if (trial.is_baseline && !std::isnan(parity)) s.baseline_parity.push_back(parity);
    if (facts.has_evals) {
      t.needs_time_to_target = std::isnan(s.Value(index, s.time_to_target_index));
      t.evals_begin = static_cast<uint32_t>(s.evals.size());
      s.evals.insert(s.evals.end(), facts.evals.begin(), facts.evals.end());
      t.evals_end = static_cast<uint32_t>(s.evals.size());
    }
    if (facts.verdict) {
      // A seed that was not profiled (by default only seed 1 is, docs/profiling.md) judges "unknown":
      // the summary is a seed's that could tell, and "unknown" counts only where no seed could.
      const bool known = *facts.verdict != kUnknownVerdict;
      ++group.verdicts[*facts.verdict];
      if (group.bottleneck_summary.empty() || (known && !group.summary_known)) {
        group.bottleneck_summary = std::move(facts.bottleneck_summary);
        group.summary_known = known;
      }
    }
    if (!facts.profile.is_null()) group.profiles.push_back(std::move(facts.profile));
    if (facts.deploy.is_object()) AddDeploy(facts.deploy, trial.seed, group.deploy);
  }
  s.trials.push_back(t);
}

namespace {

// Each config's ranks and its scaling efficiency: at ranks > 1 its per-rank
// throughput over its 1-rank twin's throughput (means over completed seeds),
// at 1 rank 1; also as the metric "scaling_efficiency" (one value per config).
void AddScalingEfficiency(const std::string& ranks_dimension, int base_ranks, std::vector<ConfigSummary>& configs) {
  const auto ranks_of = [&](const ConfigSummary& c) {
    const json choice =
        ranks_dimension.empty() || !c.choices.is_object() ? json(base_ranks) : c.choices.value(ranks_dimension, json(base_ranks));
    return choice.is_number_integer() ? choice.get<int>() : 1;
  };
  const auto without_ranks = [&](const ConfigSummary& c) {
    json others = c.choices;
    if (others.is_object() && !ranks_dimension.empty()) others.erase(ranks_dimension);
    return others;
  };
  for (ConfigSummary& config : configs) config.ranks = ranks_of(config);
  for (ConfigSummary& config : configs) {
    if (config.ranks == 1) {
      if (config.metrics.count("throughput")) config.scaling_efficiency = 1.0;
    } else if (const auto per_rank = config.metrics.find("per_rank_throughput"); per_rank != config.metrics.end()) {
      const json others = without_ranks(config);
      for (const ConfigSummary& twin : configs) {
        const auto throughput = twin.metrics.find("throughput");
        if (twin.ranks != 1 || throughput == twin.metrics.end() || throughput->second.mean <= 0) continue;
        if (without_ranks(twin) != others) continue;
        config.scaling_efficiency = per_rank->second.mean / throughput->second.mean;
        break;
      }
    }
    if (config.scaling_efficiency) {
      const double e = *config.scaling_efficiency;
      config.metrics["scaling_efficiency"] = MetricSummary{1, e, 0, e, e};
    }
  }
}

}  // namespace

Report ReportBuilder::Build(bool front_only) {
  State& s = *state_;
  Report report;
  report.experiment_id = s.experiment_id;
  report.name = s.name;
  report.trials_on_shared_cores = s.trials_on_shared_cores;
  report.objectives = s.objectives;
  report.constraints = s.constraints;
  report.parity = s.parity;
  report.time_to_target_goal = s.AddTimeToTarget();
  report.dimensions = s.labeler.dimensions();
  report.strategy = s.space_facts.strategy;
  report.repeats = s.space_facts.repeats;
  report.grid_size = s.space_facts.dimensions.empty() ? 0 : GridSize(s.space_facts);

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
    // scaling_efficiency follows from two throughputs (AddScalingEfficiency).
    const bool feeds_scaling = s.metrics[m] == "throughput" || s.metrics[m] == "per_rank_throughput";
    if (named(s.objectives) || named(s.constraints) || (feeds_scaling && s.scaling_decides)) deciding.push_back(m);
  }
  std::vector<ConfigSummary> configs;
  configs.reserve(order.size());
  for (const auto& [key, group] : order) {
    configs.push_back(s.Summarize(*key, *group, deciding));
    if (s.scaling_decides) {
      configs.back().choices =
          s.labeler.EffectiveChoices(group->config.is_null() ? json::parse(*key) : group->config);
    }
  }
  if (s.scaling_decides) AddScalingEfficiency(s.ranks_dimension, s.base_ranks, configs);
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
  // Screened inside the trials: every config's verdict, front_only or not.
  std::optional<ScreeningSummary> in_trial;
  if (s.screened.empty() && (s.screen.in_trial || !s.screened_out_in_trial.empty())) {
    in_trial.emplace();
    in_trial->steps = s.screen.steps;
    in_trial->in_trial = true;
    for (size_t i = 0; i < configs.size(); ++i) {
      if (configs[i].is_baseline) continue;
      const std::string& key = *order[i].first;
      const json& config = order[i].second->config.is_object() ? order[i].second->config : json::parse(key);
      const auto out = s.screened_out_in_trial.find(key);
      const bool kept = out == s.screened_out_in_trial.end();
      in_trial->configs.push_back({key, JoinLabel(s.labeler.Changes(config)), kept, kept ? "" : out->second});
    }
  }
  configs = std::vector<ConfigSummary>();
  s.groups.clear();

  report.data_parallel = s.data_parallel;
  report.varies_op = s.varies_op;
  if (s.data_parallel || s.scaling_decides) AddScalingEfficiency(s.ranks_dimension, s.base_ranks, report.configs);
  ComputeHypervolume(report);
  if (!s.screened.empty()) {
    ScreeningSummary summary;
    summary.steps = s.screen.steps;
    ScreenMeasurement baseline;
    std::vector<ScreenMeasurement> measured;
    std::vector<const State::Screened*> judged;
    for (const State::Screened& t : s.screened) {
      ++summary.trials;
      summary.device_s += t.device_s;
      if (t.is_baseline) {
        baseline = t.measurement;
      } else {
        measured.push_back(t.measurement);
        judged.push_back(&t);
      }
    }
    const std::vector<ScreenVerdict> verdicts = ScreenOut(s.objectives, s.constraints, s.screen, baseline, measured);
    for (size_t i = 0; i < verdicts.size(); ++i) {
      const json& config = judged[i]->config.is_object() ? judged[i]->config : json::object();
      summary.configs.push_back({verdicts[i].config_key, JoinLabel(s.labeler.Changes(config)), verdicts[i].kept,
                                 verdicts[i].reason});
    }
    report.screening = std::move(summary);
    s.screened.clear();
  } else if (in_trial) {
    report.screening = std::move(in_trial);
  }
  const ConfigSummary* baseline =
      has_baseline && report.configs.front().seeds_completed > 0 ? &report.configs.front() : nullptr;
  for (ConfigSummary& config : report.configs) CompareWithBaseline(report, baseline, config);
  return report;
}

Report BuildReport(const std::string& experiment_id, const SearchSpace& space,
                   std::vector<TrialRecord> trials) {
  ReportBuilder builder(experiment_id, space);
  for (TrialRecord& trial : trials) builder.Add(std::move(trial));
  return builder.Build();
}

int FallbackConfigs(const Report& report) {
  return static_cast<int>(std::count_if(report.configs.begin(), report.configs.end(),
                                        [](const ConfigSummary& c) { return IsFallbackProposer(c.proposer); }));
}

}  // namespace frontier
