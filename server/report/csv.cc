#include "server/report/csv.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"
#include "server/report/report.h"
#include "server/report/views.h"

namespace frontier {

std::string CsvField(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char ch : field) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

namespace {

// The shortest text that reads back as the same double.
std::string CsvNumber(double value) { return nlohmann::json(value).dump(); }


std::string CsvFlag(bool b) { return b ? "true" : "false"; }

std::string CsvRow(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) out += (i == 0 ? "" : ",") + CsvField(fields[i]);
  return out + "\r\n";
}

std::vector<std::string> CsvHeader(const Report& report, const std::vector<std::string>& metrics,
                                const std::optional<OnboardView>& onboard) {
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
  header.push_back("label");
  header.push_back("proposer");   // who proposed the config (docs/proposers.md); empty for the baseline
  header.push_back("rationale");  // the reason it gave, if any
  header.push_back("failure");    // the first failed seed's error, if any
  // Why screening dropped a config (docs/strategies.md#screening), only when the experiment screened.
  if (report.screening) header.push_back("screened_out");
  // The onboard front (docs/report.md#the-onboard-front), only when a config has a deploy section.
  if (onboard) {
    for (const char* format : kDeployFormats) {
      header.push_back("onboard_" + std::string(format) + "_latency_ms");
      header.push_back("onboard_" + std::string(format) + "_quality");
    }
    for (const char* column : {"onboard_front", "onboard_rank_change", "int8_parity", "int8_faster_at_parity"}) {
      header.push_back(column);
    }
  }
  if (report.data_parallel) {  // docs/distributed.md
    for (const char* column : {"ranks", "scaling_efficiency", "per_rank_throughput_mean", "comms_ms_mean",
                               "comms_exposed_share_mean"}) {
      header.push_back(column);
    }
  }
  return header;
}

// The config's columns up to `failure`: counts, each metric's summary, the speed-up and quality intervals.
std::vector<std::string> CsvSummaryColumns(const ConfigSummary& c, const std::vector<std::string>& metrics) {
  std::vector<std::string> row = {c.config_key,
                                  CsvFlag(c.is_baseline),
                                  std::to_string(c.seeds_completed),
                                  std::to_string(c.trials_total),
                                  std::to_string(c.trials_failed),
                                  CsvFlag(c.feasible),
                                  c.infeasible_reason,
                                  CsvFlag(c.on_front)};
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
  row.insert(row.end(), {c.parity, c.label, c.proposer, c.rationale, c.failure});
  return row;
}

void AddCsvOnboardColumns(const ConfigSummary& c, const OnboardView& onboard, std::vector<std::string>* row) {
  std::string on_front;
  for (const char* format : kDeployFormats) {
    const auto point = std::find_if(onboard.points.begin(), onboard.points.end(), [&](const OnboardPoint& p) {
      return p.config == &c && p.format == format;
    });
    const bool found = point != onboard.points.end();
    row->push_back(found ? CsvNumber(point->latency_ms.mean) : "");
    row->push_back(found ? CsvNumber(point->quality.mean) : "");
    if (found && point->on_front) on_front += (on_front.empty() ? "" : " ") + std::string(format);
  }
  row->push_back(on_front);
  const auto change = std::find_if(onboard.rank_changes.begin(), onboard.rank_changes.end(),
                                   [&](const RankChange& r) { return r.config == &c; });
  row->push_back(change == onboard.rank_changes.end() ? "" : change->text);
  const auto config = std::find_if(onboard.configs.begin(), onboard.configs.end(),
                                   [&](const OnboardConfig& o) { return o.config == &c; });
  const bool judged = config != onboard.configs.end() && config->int8_parity;
  row->push_back(judged ? config->int8_parity->verdict : "");
  row->push_back(judged ? CsvFlag(config->faster_at_parity) : "");
}

void AddCsvDataParallelColumns(const ConfigSummary& c, std::vector<std::string>* row) {
  row->push_back(std::to_string(c.ranks));
  row->push_back(c.scaling_efficiency ? CsvNumber(*c.scaling_efficiency) : "");
  for (const char* metric : {"per_rank_throughput", "comms_ms", "comms_exposed_share"}) {
    const auto it = c.metrics.find(metric);
    row->push_back(it == c.metrics.end() ? "" : CsvNumber(it->second.mean));
  }
}

// A config screened out by a screening trial never ran otherwise: a row with its key, label and reason only.
std::string CsvScreenedOutRows(const Report& report, const std::vector<std::string>& header) {
  std::string out;
  const size_t label = std::find(header.begin(), header.end(), "label") - header.begin();
  const size_t reason = std::find(header.begin(), header.end(), "screened_out") - header.begin();
  for (const ScreenedConfig& c : report.screening->configs) {
    if (c.kept) continue;
    std::vector<std::string> row(header.size());
    row[0] = c.config_key;
    row[1] = CsvFlag(false);
    row[2] = row[3] = row[4] = "0";
    row[label] = c.label;
    row[reason] = c.reason;
    out += CsvRow(row);
  }
  return out;
}

}  // namespace

std::string RenderCsv(const Report& report) {
  const std::vector<std::string> metrics =
      SummarizedMetrics(report.objectives, report.constraints, report.parity, report.varies_op);
  const std::optional<OnboardView> onboard = Onboard(report);
  const std::vector<std::string> header = CsvHeader(report, metrics, onboard);
  std::string out = CsvRow(header);
  std::map<std::string, std::string> screened_out_in_trial;  // config key -> reason, screened inside its trial
  if (report.screening && report.screening->in_trial) {
    for (const ScreenedConfig& c : report.screening->configs) {
      if (!c.kept) screened_out_in_trial[c.config_key] = c.reason;
    }
  }
  for (const ConfigSummary& c : report.configs) {
    std::vector<std::string> row = CsvSummaryColumns(c, metrics);
    if (report.screening) {
      // Screened out inside its trial: a config of the table, with its reason here.
      const auto reason = screened_out_in_trial.find(c.config_key);
      row.push_back(reason == screened_out_in_trial.end() ? "" : reason->second);
    }
    if (onboard) AddCsvOnboardColumns(c, *onboard, &row);
    if (report.data_parallel) AddCsvDataParallelColumns(c, &row);
    out += CsvRow(row);
  }
  if (report.screening && !report.screening->in_trial) out += CsvScreenedOutRows(report, header);
  return out;
}

}  // namespace frontier
