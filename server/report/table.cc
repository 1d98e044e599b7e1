#include "server/report/table.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "server/report/format.h"
#include "server/report/views.h"
#include "server/search/external.h"

namespace frontier {
namespace {

std::string FormatMetric(const ConfigSummary& config, const std::string& metric, const char* format,
                         double scale = 1) {
  auto it = config.metrics.find(metric);
  return it == config.metrics.end() ? "-" : FormatNumber(format, it->second.mean * scale);
}

// "mean±half-width of the 95% interval", the mean alone with fewer than 2 values.
std::string MeanAndHalfWidth(const MetricSummary& s, const char* format) {
  const std::string mean = FormatNumber(format, s.mean);
  return s.n < 2 ? mean : mean + "\u00b1" + FormatNumber(format, (s.ci_high - s.ci_low) / 2);
}

std::string FormatMeanAndHalfWidth(const ConfigSummary& config, const std::string& metric) {
  auto it = config.metrics.find(metric);
  return it == config.metrics.end() ? "-" : MeanAndHalfWidth(it->second, "%.4f");
}

std::string FormatCount(const ConfigSummary& config, const std::string& metric) {
  auto it = config.metrics.find(metric);
  if (it == config.metrics.end()) return "-";
  const double v = it->second.mean;
  if (std::fabs(v) >= kScientificFrom) return FormatNumber("%.2f", v);
  if (std::fabs(v) >= 1e9) return Printf("%.2fG", v / 1e9);
  if (std::fabs(v) >= 1e6) return Printf("%.2fM", v / 1e6);
  if (std::fabs(v) >= 1e3) return Printf("%.1fK", v / 1e3);
  return Printf("%.0f", v);
}

bool HasSpread(const Interval& interval) { return interval.n_variant >= 2 && interval.n_baseline >= 2; }

std::string FormatSpeedup(const ConfigSummary& config) {
  if (!config.speedup) return "-";
  const Interval& s = *config.speedup;
  if (config.is_baseline || !HasSpread(s)) return FormatNumber("%.2fx", s.value);
  return FormatNumber("%.2fx", s.value) + " [" + FormatNumber("%.2f", s.low) + "," +
         FormatNumber("%.2f", s.high) + "]";
}

// The delta and the one-sided bound that decided the parity verdict: "-0.0010 (>=-0.0035)".
std::string FormatQualityDelta(const ConfigSummary& config) {
  if (!config.quality_delta) return "-";
  const Interval& d = *config.quality_delta;
  if (config.is_baseline || !config.parity_bound) return FormatNumber("%+.4f", d.value);
  const ConfigSummary::ParityBound& b = *config.parity_bound;
  return FormatNumber("%+.4f", d.value) + (b.at_least ? " (\u2265" : " (\u2264") + FormatNumber("%+.4f", b.bound) +
         ")";
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

// Display width of UTF-8 text: its code points.
size_t DisplayWidth(const std::string& text) {
  return std::count_if(text.begin(), text.end(),
                       [](char ch) { return (static_cast<unsigned char>(ch) & 0xC0) != 0x80; });
}

// `text` broken at spaces into lines of at most `width` code points (0: one
// line), the lines after the first indented by two spaces; each ends in "\n".
std::string Wrap(const std::string& text, size_t width) {
  if (width == 0 || DisplayWidth(text) <= width) return text + "\n";
  std::string out, line;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && DisplayWidth(line) + 1 + DisplayWidth(word) > width) {
      out += line + "\n";
      line = "  " + word;
    } else {
      line += (line.empty() ? "" : " ") + word;
    }
    start = end + 1;
  }
  return out + line + "\n";
}

// `text` cut to `width` code points, the last one an ellipsis when cut.
std::string Truncate(const std::string& text, size_t width) {
  if (DisplayWidth(text) <= width || width == 0) return text;
  std::string out;
  size_t points = 0;
  for (char ch : text) {
    const bool starts = (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
    if (starts && ++points == width) break;
    out += ch;
  }
  return out + "\u2026";
}

}  // namespace

TextTable BuildTextTable(const Report& report, bool wide) {
  TextTable table;
  const QualityColumns quality = QualityColumnsOf(report);
  // Each column: its header, right-aligned, shown in the narrow table, and its cell.
  struct Column {
    std::string header;
    bool right, narrow;
    std::function<std::string(const ConfigSummary&)> cell;
  };
  std::vector<Column> columns = {
      {"config", false, true, [](const ConfigSummary& c) { return c.label; }},
      {"seeds", true, true, FormatSeeds},
      {quality.val_label, true, true, [&](const ConfigSummary& c) { return FormatMeanAndHalfWidth(c, quality.val); }},
      {quality.test_label, true, false, [&](const ConfigSummary& c) { return FormatMetric(c, quality.test, "%.4f"); }},
      {"step ms", true, false, [](const ConfigSummary& c) { return FormatMetric(c, "step_time_ms", "%.2f"); }},
      {"samples/s", true, true, [](const ConfigSummary& c) { return FormatMetric(c, "throughput", "%.1f"); }},
      {"MFU %", true, false, [](const ConfigSummary& c) { return FormatMetric(c, "mfu", "%.1f", 100); }},
      {"peak MB", true, false, [](const ConfigSummary& c) { return FormatMetric(c, "peak_memory_mb", "%.1f"); }},
      {"params", true, false, [](const ConfigSummary& c) { return FormatCount(c, "params"); }},
      {"FLOPs/sample", true, false, [](const ConfigSummary& c) { return FormatCount(c, "flops"); }},
      {"latency ms", true, false, [](const ConfigSummary& c) { return FormatMetric(c, "latency_ms", "%.2f"); }},
      {"bottleneck", false, false, BottleneckLabel},
      {"speed-up [95% CI]", true, true, FormatSpeedup},
      {"\u0394 " + report.parity.metric, true, true, FormatQualityDelta},
      {"parity", false, true, [](const ConfigSummary& c) { return c.parity; }},
      {"front", false, true, FrontMarker},
  };
  if (report.data_parallel) {  // docs/distributed.md: after samples/s
    const auto at = std::find_if(columns.begin(), columns.end(), [](const Column& c) { return c.header == "samples/s"; });
    columns.insert(at + 1, {{"scaling", true, true,
                             [](const ConfigSummary& c) {
                               if (!c.scaling_efficiency) return std::string(c.ranks > 1 ? "-" : "");
                               return FormatNumber("%.2f", *c.scaling_efficiency);
                             }},
                            {"exposed comms %", true, false, [](const ConfigSummary& c) {
                               return FormatMetric(c, "comms_exposed_share", "%.1f", 100);
                             }}});
  }
  if (report.varies_op) {  // docs/plugins.md: the op variant against its reference, after samples/s
    const auto at =
        std::find_if(columns.begin(), columns.end(), [](const Column& c) { return c.header == "samples/s"; });
    columns.insert(at + 1, {{"op speed-up", true, true,
                             [](const ConfigSummary& c) { return FormatMetric(c, "op_speedup", "%.2fx"); }},
                            {"op BW %", true, false, [](const ConfigSummary& c) {
                               return FormatMetric(c, "op_bandwidth_share", "%.1f", 100);
                             }}});
  }
  table.header.push_back("#");
  table.right_aligned.push_back(true);
  for (const Column& column : columns) {
    if (!wide && !column.narrow) continue;
    table.header.push_back(column.header);
    table.right_aligned.push_back(column.right);
  }
  for (size_t i = 0; i < report.configs.size(); ++i) {
    std::vector<std::string> row = {std::to_string(i + 1)};
    for (const Column& column : columns) {
      if (wide || column.narrow) row.push_back(column.cell(report.configs[i]));
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

namespace {

std::string FormatBytes(double bytes) {
  if (std::fabs(bytes) >= kScientificFrom) return FormatNumber("%.2f B", bytes);
  if (bytes >= 1e9) return Printf("%.2f GB", bytes / 1e9);
  if (bytes >= 1e6) return Printf("%.2f MB", bytes / 1e6);
  if (bytes >= 1e3) return Printf("%.1f kB", bytes / 1e3);
  return Printf("%.0f B", bytes);
}

}  // namespace

TextTable BuildOnboardTable(const Report& report, const OnboardView& view, bool wide) {
  TextTable table;
  const std::string quality = view.quality_metric == "val_iou" ? "val IoU" : view.quality_metric == "val_accuracy" ? "val acc" : view.quality_metric;
  table.header = {"#", "config", "format", "seeds", "latency ms", quality, "onboard", "training", "moved",
                  "int8 vs float"};
  table.right_aligned = {true, false, false, true, true, true, false, false, false, false};
  if (wide) {
    table.header.insert(table.header.begin() + 5, {"p99 ms", "size"});
    table.right_aligned.insert(table.right_aligned.begin() + 5, {true, true});
  }
  for (const OnboardPoint& p : view.points) {
    const ConfigSummary& c = *p.config;
    std::string moved, parity;
    for (const RankChange& change : view.rank_changes) {
      if (change.config == &c) moved = change.onboard ? "onboard only" : "training only";
    }
    for (const OnboardConfig& config : view.configs) {
      if (config.config != &c || p.format != "int8" || !config.int8_parity) continue;
      parity = config.int8_parity->verdict + (config.faster_at_parity ? ", faster" : "");
    }
    std::vector<std::string> row = {std::to_string(p.row),
                                    c.label,
                                    p.format,
                                    std::to_string(p.latency_ms.n),
                                    MeanAndHalfWidth(p.latency_ms, "%.3f"),
                                    MeanAndHalfWidth(p.quality, "%.4f"),
                                    p.on_front ? "o" : c.feasible ? "" : "infeasible",
                                    c.on_front ? "*" : "",
                                    moved,
                                    parity};
    if (wide) {
      row.insert(row.begin() + 5, {p.latency_p99_ms ? FormatNumber("%.3f", p.latency_p99_ms->mean) : "-",
                                   p.size_bytes ? FormatBytes(p.size_bytes->mean) : "-"});
    }
    table.rows.push_back(std::move(row));
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
          report.parity.test == "paired" ? "paired: the per-seed differences where the variant completed the "
                                           "baseline's seeds, else Welch"
                                         : "Welch"),
      "intervals: \u00b1 is the half-width of the two-sided 95% Student-t interval of the mean (of the "
      "difference, Welch, for the \u0394 column); speed-up: mean throughput ratio, 95% interval on the log "
      "scale (delta method, Welch-Satterthwaite degrees of freedom), always positive",
  };
  std::string reference;
  for (double r : report.reference_point) reference += (reference.empty() ? "" : ", ") + Printf("%g", r);
  notes.push_back(Printf("hypervolume: %.6g (reference point (%s)); %s", report.hypervolume,
                         reference.c_str(), report.hypervolume_note.c_str()));
  if (report.time_to_target_goal) {
    notes.push_back(
        Printf("time to target: summed step time until %s first reached %.4g (the baseline's mean "
               "final value, shifted by the margin); trials that never reached it are left out",
               report.parity.metric.c_str(), *report.time_to_target_goal));
  }
  if (report.trials_on_shared_cores > 0) {
    notes.push_back(Printf("timing: %d trial(s) shared their cores with another trial (result placement."
                           "shared_cores): their step times and MFU are not comparable with the others'",
                           report.trials_on_shared_cores));
  }
  for (const ConfigSummary& c : report.configs) {
    if (!c.feasible) notes.push_back("infeasible: " + c.label + ": " + c.infeasible_reason);
  }
  if (report.screening) {  // docs/strategies.md#screening
    const ScreeningSummary& s = *report.screening;
    if (s.in_trial) {
      notes.push_back(
          Printf("screening inside the trials (no screening trials): %d of %zu configs screened out",
                 s.dropped(), s.configs.size()) +
          (s.steps > 0 ? Printf(" by step %d of their first trial", s.steps) : std::string()));
    } else {
      notes.push_back(
          Printf("screening: %zu configs timed for %d steps (%d trials, %.1f device-s, in no other "
                 "figure); %d screened out, %zu kept",
                 s.configs.size(), s.steps, s.trials, s.device_s, s.dropped(),
                 s.configs.size() - static_cast<size_t>(s.dropped())));
    }
    for (const ScreenedConfig& c : s.configs) {
      if (!c.kept) notes.push_back("screened out: " + c.label + ": " + c.reason);
    }
  }
  // Goodput: the measured training steps' share of the device time (docs/report.md#goodput).
  if (const std::string goodput = GoodputLine(TotalCost(report)); !goodput.empty()) notes.push_back(goodput);
  // Why configs failed: the first line of the first failed seed's error (the HTML's hover has all of it).
  for (const ConfigSummary& c : report.configs) {
    if (c.trials_failed > 0 && !c.failure.empty()) {
      notes.push_back(Printf("failed: %s (%d of %d seeds): ", c.label.c_str(), c.trials_failed, c.trials_total) +
                      FirstLineOf(c.failure));
    }
  }
  // An external proposer's rationales and what its calls cost (docs/proposers.md).
  for (const ConfigSummary& c : report.configs) {
    if (!c.rationale.empty()) notes.push_back("proposed by " + c.proposer + ": " + c.label + ": " + c.rationale);
  }
  if (const ProposerCallsSummary& p = report.proposer_calls; p.calls > 0) {
    notes.push_back(Printf("proposer calls: %d (%d failed), %d configurations accepted and %d rejected, "
                           "mean latency %.0f ms; model: %d calls, %lld prompt + %lld completion tokens",
                           p.calls, p.failed, p.accepted, p.rejected, static_cast<double>(p.latency_ms) / p.calls,
                           p.model_calls, static_cast<long long>(p.prompt_tokens),
                           static_cast<long long>(p.completion_tokens)));
    if (!p.last_error.empty()) notes.push_back("last proposer error: " + p.last_error);
  }
  if (const int fallback = FallbackConfigs(report); fallback > 0) {
    std::map<std::string, int> by_proposer;  // every proposer's configurations, the fallback ones apart
    int proposed = 0;
    for (const ConfigSummary& c : report.configs) {
      if (c.is_baseline || c.proposer.empty()) continue;
      ++by_proposer[c.proposer];
      ++proposed;
    }
    std::string counts;
    for (const auto& [proposer, n] : by_proposer) counts += (counts.empty() ? "" : ", ") + proposer + " " + std::to_string(n);
    notes.push_back(Printf("fallback: %d of %d proposed configurations were drawn by a fallback, not by the "
                           "proposer's own method (%s)",
                           fallback, proposed, counts.c_str()));
  }
  if (!report.proposer_calls.paused.empty()) notes.push_back("search paused: " + report.proposer_calls.paused);
  return notes;
}

std::vector<size_t> TextTableWidths(const TextTable& table, size_t max_width, size_t flexible) {
  std::vector<size_t> widths;
  for (const std::string& cell : table.header) widths.push_back(DisplayWidth(cell));
  for (const auto& row : table.rows) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  }
  if (max_width > 0 && flexible < widths.size()) {
    size_t others = 2 * (widths.size() - 1);
    for (size_t i = 0; i < widths.size(); ++i) others += i == flexible ? 0 : widths[i];
    const size_t room = max_width > others ? max_width - others : 0;
    widths[flexible] = std::min(widths[flexible], std::max<size_t>(room, 12));
  }
  return widths;
}

std::string RenderTextTable(const TextTable& table, size_t max_width, size_t flexible) {
  return RenderTextTable(table, TextTableWidths(table, max_width, flexible));
}

std::string RenderTextTable(const TextTable& table, const std::vector<size_t>& widths) {
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string text = Truncate(cells[i], widths[i]);
      const std::string pad(widths[i] - DisplayWidth(text), ' ');
      out += (i == 0 ? "" : "  ") + (table.right_aligned[i] ? pad + text : text + pad);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(table.header);
  std::string rule;
  for (size_t i = 0; i < widths.size(); ++i) rule += (i == 0 ? "" : "  ") + std::string(widths[i], '-');
  out += rule + "\n";
  for (const auto& row : table.rows) out += line(row);
  return out;
}

std::string RenderTable(const Report& report, const TableOptions& options) {
  const TextTable table = BuildTextTable(report, options.wide);
  const size_t max_width = options.wide ? 0 : options.width;
  std::string out = "experiment " + report.experiment_id +
                    (report.name.empty() ? "" : " (" + report.name + ")") +
                    Printf(": %zu configs\n\n", report.configs.size());
  const std::vector<size_t> widths = TextTableWidths(table, max_width, 1);
  out += RenderTextTable(table, widths);
  // Labels the narrow table had to shorten, in full.
  std::string shortened;
  const size_t label_width = widths[1];
  for (const ConfigSummary& c : report.configs) {
    if (max_width > 0 && DisplayWidth(c.label) > label_width) {
      shortened += Printf("%4zu  %s\n", static_cast<size_t>(&c - report.configs.data()) + 1, c.label.c_str());
    }
  }
  if (!shortened.empty()) out += "\nconfigs in full:\n" + shortened;
  out += "\n";
  for (const std::string& note : ReportNotes(report)) out += Wrap(note, max_width);
  if (const std::optional<OnboardView> onboard = Onboard(report)) {  // docs/report.md#the-onboard-front
    out += "\nonboard front:\n" + RenderTextTable(BuildOnboardTable(report, *onboard, options.wide), max_width, 1);
    for (const std::string& note : OnboardNotes(report, *onboard)) out += Wrap(note, max_width);
  }
  if (!options.wide) out += "(--wide: every column)\n";
  return out;
}

}  // namespace frontier
