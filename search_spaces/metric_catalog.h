// The metric catalog: every metric a trial result carries that spaces,
// strategies, reports, the CLI and the SQL views name, with its unit, its
// direction, where it sits in a trial result (docs/trial-output.md) and its
// column in the stores' `results` and `config_results` views
// (docs/sql-views.md). The one place a new metric is added. Torch-free and
// yaml-free: the runner-only build has it too.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace frontier {

// How a metric's values are stored in the SQL views.
enum class SqlType {
  kReal,        // double precision
  kInteger,     // a small count (int in PostgreSQL)
  kBigInteger,  // a count that may pass 2^31 (bigint in PostgreSQL)
};

struct MetricInfo {
  std::string_view name;  // as spaces, reports and progress events name it, e.g. "step_time_ms"
  std::string_view unit;  // for people: "ms", "samples/s", "MB", "s"; "" for ratios and counts
  bool maximize;          // higher is better; an objective on it takes this goal unless it says otherwise
  std::string_view result_path;  // dotted path of its number in a trial result, e.g. "step_time_ms.median"
  bool selectable;               // a space's objectives and constraints may name it
  bool quality;                  // a parity rule may compare it
  bool test_split;               // measured on the test split: reported, never selected on
  bool in_progress;  // evaluations during training carry it (or it follows from them): early stopping
                     // compares trials on it at rungs
  // Its place among the metrics every report summarizes per configuration (ReportMetrics, the report's
  // CSV columns), which is not this list's order; -1 when reports show it only when a space names it.
  int report_position;
  // Its column in the `results` view (one row per trial) and, when `sql_aggregated`, its mean (and, with
  // `sql_spread`, its sample standard deviation as <column>_std) in `config_results`; "" when the views
  // do not show it. `sql_position` is the column's place among the metric columns: the views' column
  // order was fixed by the migrations that created them, so it is recorded here, not taken from this list.
  std::string_view sql_column;
  SqlType sql_type;
  int sql_position;
  bool sql_aggregated;
  bool sql_spread;
  // Computed by the report per configuration from other configurations'
  // results, in no trial result (scaling_efficiency: a config against its
  // 1-rank twin): the report's front and feasibility use it; strategies and
  // adaptive seeds, which score configurations from their own trials, leave
  // it out (docs/distributed.md).
  bool report_derived = false;
};

// Whether `metric` is one the report derives (MetricInfo::report_derived).
bool ReportDerived(std::string_view metric);

// Every metric, in the order spaces list them (validation messages), then
// the ones only the SQL views show.
const std::vector<MetricInfo>& MetricCatalog();

// The catalog entry named `name`, or nullptr.
const MetricInfo* FindMetric(std::string_view name);

// The entries with a column in the SQL views, by sql_position.
std::vector<const MetricInfo*> SqlMetrics();

// The entries every report summarizes, by report_position.
std::vector<const MetricInfo*> ReportedMetrics();

// The names of the entries that satisfy `keep`, in catalog order.
template <typename Predicate>
std::vector<std::string> MetricNames(Predicate keep) {
  std::vector<std::string> names;
  for (const MetricInfo& metric : MetricCatalog()) {
    if (keep(metric)) names.emplace_back(metric.name);
  }
  return names;
}

// The fields of a metric's path in a trial result: the catalog's path for a
// catalog metric, any other name read as a dotted path
// ("throughput.end_to_end_samples_per_s", or a progress event's "step").
std::vector<std::string> MetricPath(const std::string& metric);

// The finite number at `path` in `result`; nullopt when absent, null, not a
// number or not finite.
std::optional<double> NumberAt(const nlohmann::json& result, const std::vector<std::string>& path);

// The string at `path` in `result` (a trial result, a progress event: JSON a
// worker sent); "" when absent or not a string, so that a field of another
// type reads as absent instead of throwing.
std::string StringAt(const nlohmann::json& result, const std::vector<std::string>& path);

// The value of `metric` in a trial result (or a progress event):
// NumberAt(result, MetricPath(metric)).
std::optional<double> MetricOf(const nlohmann::json& result, const std::string& metric);

}  // namespace frontier
