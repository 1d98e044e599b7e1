#include "search_spaces/metric_catalog.h"

#include <algorithm>
#include <cmath>

namespace frontier {

const std::vector<MetricInfo>& MetricCatalog() {
  // Columns: name, unit, maximize, result path, selectable, quality, test_split, in_progress,
  // report_position, sql_column, sql_type, sql_position, sql_aggregated, sql_spread.
  // clang-format off
  static const std::vector<MetricInfo> kCatalog = {
      {"val_accuracy",     "",          true,  "val_accuracy",             true,  true,  false, true,  0,  "val_accuracy",        SqlType::kReal,       0,  true,  true},
      {"test_accuracy",    "",          true,  "test_accuracy",            true,  true,  true,  false, 1,  "test_accuracy",       SqlType::kReal,       1,  true,  true},
      {"val_iou",          "",          true,  "val_iou",                  true,  true,  false, true,  2,  "val_iou",             SqlType::kReal,       3,  true,  true},
      {"test_iou",         "",          true,  "test_iou",                 true,  true,  true,  false, 3,  "test_iou",            SqlType::kReal,       4,  true,  true},
      {"val_loss",         "",          false, "val_loss",                 true,  true,  false, true,  4,  "val_loss",            SqlType::kReal,       2,  true,  true},
      {"throughput",       "samples/s", true,  "throughput.samples_per_s", true,  false, false, true,  6,  "throughput",          SqlType::kReal,       7,  true,  true},
      {"step_time_ms",     "ms",        false, "step_time_ms.median",      true,  false, false, true,  5,  "median_step_time_ms", SqlType::kReal,       6,  true,  true},
      {"mfu",              "",          true,  "mfu",                      true,  false, false, false, 7,  "mfu",                 SqlType::kReal,       8,  true,  true},
      {"peak_memory_mb",   "MB",        false, "peak_memory_mb",           true,  false, false, false, 8,  "peak_memory_mb",      SqlType::kReal,       9,  true,  true},
      {"params",           "",          false, "params",                   true,  false, false, false, 9,  "params",              SqlType::kBigInteger, 10, true,  false},
      {"time_to_target_s", "s",         false, "time_to_target_s",         true,  false, false, false, 10, "",                    SqlType::kReal,       -1, false, false},
      // Training FLOPs per sample (3 x the counted forward over the batch: docs/trial-output.md, flops), as
      // built-in trials and the SDK's command trials both count them: an architecture's compute, whatever
      // its batch.
      {"flops",            "FLOPs",     false, "flops.train_per_sample",   true,  false, false, false, 11, "",                    SqlType::kReal,       -1, false, false},
      // Inference latency (docs/trial-output.md, Latency): eval-mode forward at the latency batch (default
      // the training batch) and at batch 1; median and p99. SQL columns after `threads` (per trial; mean and
      // spread per config; config_front's goals): PostgreSQL's migration 9 dropped the views to add them, as
      // CREATE OR REPLACE VIEW cannot insert columns before existing ones (server/store/result_views.h).
      {"latency_ms",       "ms",        false, "latency_ms",               true,  false, false, false, 12, "latency_ms",          SqlType::kReal,       12, true,  true},
      {"latency_p99_ms",   "ms",        false, "latency_p99_ms",           true,  false, false, false, -1, "latency_p99_ms",      SqlType::kReal,       13, true,  true},
      {"latency_b1_ms",    "ms",        false, "latency_b1_ms",            true,  false, false, false, -1, "latency_b1_ms",       SqlType::kReal,       14, true,  true},
      {"latency_b1_p99_ms", "ms",       false, "latency_b1_p99_ms",        true,  false, false, false, -1, "latency_b1_p99_ms",   SqlType::kReal,       15, true,  true},
      // Data-parallel trials (docs/distributed.md): the largest rank's median all-reduce time and the part
      // of it the step waited for after backward, that part's share of the slowest rank's step (0 with one
      // rank), global rows per step over the ranks. scaling_efficiency is the report's (per-rank throughput
      // over the 1-rank twin config's throughput, when both ran; 1 at one rank): no single trial has it.
      {"comms_ms",         "ms",        false, "comms_ms",                 true,  false, false, false, -1, "",                    SqlType::kReal,       -1, false, false},
      {"comms_exposed_share", "",       false, "comms_exposed_share",      true,  false, false, false, -1, "",                    SqlType::kReal,       -1, false, false},
      {"per_rank_throughput", "samples/s", true, "throughput.per_rank_samples_per_s", true, false, false, false, -1, "",          SqlType::kReal,       -1, false, false},
      {"scaling_efficiency", "",        true,  "scaling_efficiency",       true,  false, false, false, -1, "",                    SqlType::kReal,       -1, false, false, true},
      // The trial's op variant against its reference at the model's shapes (docs/plugins.md).
      {"op_speedup",       "",          true,  "op.speedup",               true,  false, false, false, -1, "",                    SqlType::kReal,       -1, false, false},
      {"op_bandwidth_share", "",        true,  "op.bandwidth_share",       true,  false, false, false, -1, "",                    SqlType::kReal,       -1, false, false},
      // Onboard inference (docs/trial-output.md, Deploy): the trained network as it would ship, `float` (fp32,
      // batch norms folded, inference mode), `torchscript` (that network traced into a TorchScript graph) and
      // `int8` (post-training static quantization), at the deploy
      // section's first batch and thread count; its size and its validation quality in that format.
      {"deploy.float.latency_ms", "ms",  false, "deploy.float.latency_ms",  true,  false, false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.float.latency_p99_ms", "ms", false, "deploy.float.latency_p99_ms", true, false, false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.float.size_bytes", "B",  false, "deploy.float.size_bytes",  true,  false, false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.float.val_accuracy", "", true, "deploy.float.val_accuracy", true,  true,  false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.float.val_iou", "",      true, "deploy.float.val_iou",      true,  true,  false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.torchscript.latency_ms", "ms",  false, "deploy.torchscript.latency_ms",  true,  false, false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.torchscript.latency_p99_ms", "ms", false, "deploy.torchscript.latency_p99_ms", true, false, false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.torchscript.size_bytes", "B",  false, "deploy.torchscript.size_bytes",  true,  false, false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.torchscript.val_accuracy", "", true, "deploy.torchscript.val_accuracy", true,  true,  false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.torchscript.val_iou", "",      true, "deploy.torchscript.val_iou",      true,  true,  false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.int8.latency_ms", "ms",  false, "deploy.int8.latency_ms",  true,  false, false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.int8.latency_p99_ms", "ms", false, "deploy.int8.latency_p99_ms", true, false, false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.int8.size_bytes", "B",  false, "deploy.int8.size_bytes",  true,  false, false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.int8.val_accuracy", "", true, "deploy.int8.val_accuracy", true,  true,  false, false, -1, "", SqlType::kReal, -1, false, false},
      {"deploy.int8.val_iou", "",      true, "deploy.int8.val_iou",      true,  true,  false, false, -1, "", SqlType::kReal, -1, false, false},
      // Only in the SQL views.
      {"test_loss",        "",          false, "test_loss",                false, false, true,  false, -1, "test_loss",           SqlType::kReal,       5,  true,  true},
      {"threads",          "",          true,  "threads",                  false, false, false, false, -1, "threads",             SqlType::kInteger,    11, false, false},
  };
  // clang-format on
  return kCatalog;
}

bool ReportDerived(std::string_view metric) {
  const MetricInfo* info = FindMetric(metric);
  return info != nullptr && info->report_derived;
}

const MetricInfo* FindMetric(std::string_view name) {
  for (const MetricInfo& metric : MetricCatalog()) {
    if (metric.name == name) return &metric;
  }
  return nullptr;
}

std::vector<const MetricInfo*> SqlMetrics() {
  std::vector<const MetricInfo*> metrics;
  for (const MetricInfo& metric : MetricCatalog()) {
    if (!metric.sql_column.empty()) metrics.push_back(&metric);
  }
  std::sort(metrics.begin(), metrics.end(),
            [](const MetricInfo* a, const MetricInfo* b) { return a->sql_position < b->sql_position; });
  return metrics;
}

std::vector<const MetricInfo*> ReportedMetrics() {
  std::vector<const MetricInfo*> metrics;
  for (const MetricInfo& metric : MetricCatalog()) {
    if (metric.report_position >= 0) metrics.push_back(&metric);
  }
  std::sort(metrics.begin(), metrics.end(),
            [](const MetricInfo* a, const MetricInfo* b) { return a->report_position < b->report_position; });
  return metrics;
}

std::vector<std::string> MetricPath(const std::string& metric) {
  const MetricInfo* info = FindMetric(metric);
  const std::string path = info != nullptr ? std::string(info->result_path) : metric;
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    fields.push_back(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return fields;
    start = dot + 1;
  }
}

std::optional<double> NumberAt(const nlohmann::json& result, const std::vector<std::string>& path) {
  const nlohmann::json* node = &result;
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

std::string StringAt(const nlohmann::json& result, const std::vector<std::string>& path) {
  const nlohmann::json* node = &result;
  for (const std::string& field : path) {
    if (!node->is_object()) return "";
    auto it = node->find(field);
    if (it == node->end()) return "";
    node = &*it;
  }
  return node->is_string() ? node->get<std::string>() : "";
}

std::optional<double> MetricOf(const nlohmann::json& result, const std::string& metric) {
  return NumberAt(result, MetricPath(metric));
}

}  // namespace frontier
