#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/report/format.h"
#include "server/report/report.h"
#include "server/report/svg.h"
#include "server/report/table.h"
#include "server/report/views.h"

namespace frontier {
namespace {

using nlohmann::json;

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
h2 { font-size: 17px; margin: 28px 0 6px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 16px 0 4px; }
p.explain, p.empty { color: #57606a; margin: 4px 0 8px; max-width: 70em; }
div.scroll { overflow-x: auto; max-width: 100%; }
table { font-size: 13px; }
td.label details summary { cursor: pointer; }
td.label code { display: block; white-space: pre-wrap; max-width: 40em; font-size: 12px; color: #57606a; }
td.effect.gain { color: #1a7f37; }
td.effect.loss { color: #cf222e; }
tr.total td { font-weight: 600; border-top: 2px solid #8c959f; }
svg .point-label { font-size: 12px; paint-order: stroke; stroke: #fff; stroke-width: 3px; }
svg line.leader { stroke: #8c959f; stroke-width: 0.8; }
svg path.clipped { fill: #57606a; }
svg polyline.curve { fill: none; stroke-width: 2; }
svg line.target { stroke: #cf222e; stroke-width: 1.5; stroke-dasharray: 5 4; }
svg text.target-label { fill: #cf222e; }
svg circle.ttt { fill: #fff; stroke-width: 2.5; }
svg rect.spread { fill: #9ec5fe; stroke: #0969da; }
svg line.median { stroke: #0a3069; stroke-width: 2.5; }
svg .row-label { fill: #1b1f24; }
)";

// Only on a page with the onboard view, so other pages keep their bytes.
constexpr const char* kOnboardStyle = R"(svg polyline.onboard-front, svg line.key-onboard-front-line {
  fill: none; stroke: #8250df; stroke-width: 2; stroke-dasharray: 6 3;
}
svg circle.onboard-point.float, svg circle.key-onboard.float { fill: #56b4e9; stroke: #fff; }
svg circle.onboard-point.int8, svg circle.key-onboard.int8 { fill: #e69f00; stroke: #fff; }
svg circle.onboard-point.torchscript, svg circle.key-onboard.torchscript { fill: #009e73; stroke: #fff; }
svg circle.onboard-point[data-front="true"], svg circle.key-onboard-front { stroke: #8250df; stroke-width: 2.5; }
svg circle.key-onboard-front { fill: #fff; }
svg circle.onboard-point[data-feasible="false"], svg circle.key-onboard-infeasible {
  fill: #fff; stroke: #cf222e; stroke-width: 2;
}
svg circle.moved-ring { fill: none; stroke-width: 2; stroke-dasharray: 3 2; }
svg circle.moved-ring.onboard { stroke: #1a7f37; }
svg circle.moved-ring.training { stroke: #cf222e; }
tr.moved td { background: #fff8c5; }
)";

// A link to a trial's uploaded trace.json when the report links artifacts
// (--artifacts-href) and the coordinator kept one; "" otherwise.
std::string TraceLink(const Report& report, const std::string& trial_id) {
  if (report.artifacts_href.empty()) return "";
  for (const TrialArtifacts& trial : report.artifacts) {
    if (trial.trial_id != trial_id) continue;
    for (const auto& [name, bytes] : trial.files) {
      if (name != "trace.json") continue;
      return " (<a class=\"trace\" href=\"" +
             EscapeHtml(report.artifacts_href + "/" + report.experiment_id + "/" + trial_id + "/" + name) +
             "\">trace.json</a>, opens in https://ui.perfetto.dev)";
    }
  }
  return "";
}

// Each config's bottleneck verdict and summary, and the profiled seeds'
// traces and top operators (docs/profiling.md).
std::string BottleneckSection(const Report& report) {
  std::string html;
  for (const ConfigSummary& c : report.configs) {
    if (c.bottleneck_verdicts.empty() && c.profiles.empty()) continue;
    html += "<li class=\"bottleneck\" data-config=\"" + EscapeHtml(c.config_key) + "\"><b>" +
            EscapeHtml(c.label) +
            "</b>: " + EscapeHtml(BottleneckLabel(c)) +
            (c.bottleneck_summary.empty() ? "" : " &mdash; " + EscapeHtml(c.bottleneck_summary));
    for (const json& p : c.profiles) {
      html += "<br>profile of " + EscapeHtml(p.value("trial_id", "")) + " (" +
              EscapeHtml(p.value("tool", "")) +
              "): " + EscapeHtml(p.value("host", "") + ":" + p.value("trace", ""));
      html += TraceLink(report, p.value("trial_id", ""));
      if (p.contains("error")) html += " &mdash; " + EscapeHtml(p["error"].dump());
      std::string ops;
      for (const json& op : p.value("top_operators", json::array())) {
        ops += (ops.empty() ? "" : ", ") + op.value("name", "") +
               Printf(" %.0f%%", 100 * op.value("share", 0.0));
      }
      if (!ops.empty()) html += "<br>top operators: " + EscapeHtml(ops);
    }
    html += "</li>\n";
  }
  if (html.empty()) return "";
  return "<ul class=\"bottlenecks\">\n" + html + "</ul>\n";
}

// "+12.3% [+5.0%, +19.6%]" or "+0.0123 [-0.0020, +0.0266]", in a cell whose
// class says whether the interval shows a gain, a loss or neither.
std::string EffectCell(const Report& report, const std::optional<Effect>& effect) {
  if (!effect) return "<td class=\"num\">-</td>";
  const Interval& i = effect->interval;
  const bool lower = LowerIsBetter(effect->metric, report.objectives);
  const bool spread = i.n_variant >= 2 && i.n_baseline >= 2;
  const char* verdict = !spread                            ? "unclear"
                        : (lower ? i.high < 0 : i.low > 0) ? "gain"
                        : (lower ? i.low > 0 : i.high < 0) ? "loss"
                                                           : "unclear";
  const double scale = effect->relative ? 100 : 1;
  const char* format = effect->relative ? "%+.1f%%" : "%+.4f";
  std::string text = Printf(format, i.value * scale);
  if (spread) text += " [" + Printf(format, i.low * scale) + ", " + Printf(format, i.high * scale) + "]";
  return std::string("<td class=\"num effect ") + verdict + "\">" + EscapeHtml(text) + "</td>";
}

std::string EffectHeader(const Report& report, const std::string& metric) {
  const bool quality = metric == report.parity.metric || (FindMetric(metric) && FindMetric(metric)->quality);
  return "<th>" + EscapeHtml((quality ? "\u0394 " : "change of ") + metric) + " [95% CI]</th>";
}

// The configs the page draws one by one (a point, a table row, a step-time bar, a cost row): every
// one up to kPageConfigs; beyond, the baseline, every config on the front and the others evenly
// spaced in the report's order, kPageConfigs in all, and the page says so. Statistics, the front,
// the effects and the totals are always over every config.
constexpr size_t kPageConfigs = 1000;

struct DrawnConfigs {
  std::vector<bool> drawn;  // per config of the report; empty: every config
  size_t count = 0;
  std::string note;         // what was drawn, when not every config
  bool Drawn(size_t i) const { return drawn.empty() || drawn[i]; }
};

DrawnConfigs DrawnOf(const Report& report) {
  DrawnConfigs out;
  const size_t n = report.configs.size();
  out.count = n;
  if (n <= kPageConfigs) return out;
  out.drawn.assign(n, false);
  size_t kept = 0, front = 0;
  for (size_t i = 0; i < n; ++i) {
    const ConfigSummary& c = report.configs[i];
    if (c.is_baseline || c.on_front) {
      out.drawn[i] = true;
      ++kept;
      front += c.on_front;
    }
  }
  const size_t others = n - kept, room = kPageConfigs > kept ? kPageConfigs - kept : 0;
  const size_t stride = room == 0 ? others + 1 : (others + room - 1) / room;
  for (size_t i = 0, other = 0; i < n; ++i) {
    if (out.drawn[i]) continue;
    if (other++ % stride == 0 && kept < kPageConfigs) {
      out.drawn[i] = true;
      ++kept;
    }
  }
  out.count = kept;
  out.note = Printf("This page draws %zu of the %zu configs one by one (points, rows, bars): the baseline, the "
                    "%zu on the Pareto front and one in %zu of the others (evenly spaced in the report's order), so that it "
                    "stays readable. The statistics, the front, the effects and the totals are over every "
                    "config; every config's row: frontier report %s --output csv.",
                    kept, n, front, stride, report.experiment_id.c_str());
  return out;
}

std::string ConfigCell(const ConfigSummary& c) {
  return "<td class=\"label\"><details><summary title=\"" + EscapeHtml(c.config_key) + "\">" +
         EscapeHtml(c.label) + "</summary><code>" + EscapeHtml(c.config.dump()) + "</code></details></td>";
}

std::string MainEffectsSection(const Report& report) {
  const std::vector<MainEffect> effects = MainEffects(report);
  std::string html =
      "<section id=\"main-effects\" class=\"view\">\n<h2>Main effects: what each choice changes</h2>\n"
      "<p class=\"explain\">For each choice of each dimension, the change of each objective against the "
      "baseline's choice: the mean over pairs of configs equal in every other dimension (Student-t over the "
      "pairs), or for a single pair its seeds' Welch interval. Green: the interval shows a gain, red: a "
      "loss.</p>\n";
  if (effects.empty()) {
    return html + "<p class=\"empty\">no pair of configs differs in exactly one dimension.</p>\n</section>\n";
  }
  const std::vector<std::string> metrics = EffectMetrics(report);
  html += "<table class=\"effects\">\n<thead><tr><th>dimension</th><th>choice</th><th>pairs</th>";
  for (const std::string& m : metrics) html += EffectHeader(report, m);
  html += "</tr></thead>\n<tbody>\n";
  for (const MainEffect& e : effects) {
    html += "<tr><td>" + EscapeHtml(e.short_name) + "</td><td>" + EscapeHtml(e.choice) +
            Printf("</td><td class=\"num\">%d</td>", e.pairs);
    for (const std::string& m : metrics) {
      std::optional<Effect> found;
      for (const Effect& effect : e.effects) {
        if (effect.metric == m) found = effect;
      }
      html += EffectCell(report, found);
    }
    html += "</tr>\n";
  }
  return html + "</tbody>\n</table>\n</section>\n";
}

std::string AblationSection(const Report& report) {
  const std::vector<const ConfigSummary*> one_factor = OneFactorConfigs(report);
  std::string html =
      "<section id=\"ablation\" class=\"view\">\n<h2>Ablation: one change at a time</h2>\n"
      "<p class=\"explain\">Every config that differs from the baseline in exactly one dimension, against "
      "the baseline (seeds' intervals).</p>\n";
  if (one_factor.empty() || report.configs.empty() || !report.configs.front().is_baseline) {
    return html + "<p class=\"empty\">no one-factor configs in this experiment.</p>\n</section>\n";
  }
  const ConfigSummary& baseline = report.configs.front();
  const std::vector<std::string> metrics = EffectMetrics(report);
  // One row per config, each against its reference.
  auto table = [&](const std::vector<const ConfigSummary*>& rows,
                   const std::vector<const ConfigSummary*>& references) {
    std::string out = "<table class=\"ablation\">\n<thead><tr><th>change</th><th>seeds</th>";
    for (const std::string& m : metrics) out += EffectHeader(report, m);
    out += "<th>parity</th></tr></thead>\n<tbody>\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const ConfigSummary& c = *rows[i];
      out += "<tr>" + ConfigCell(c) + Printf("<td class=\"num\">%d</td>", c.seeds_completed);
      for (const std::string& m : metrics) out += EffectCell(report, ChangeOf(c, *references[i], m));
      out += "<td>" + EscapeHtml(c.parity) + "</td></tr>\n";
    }
    return out + "</tbody>\n</table>\n";
  };
  html += table(one_factor, std::vector<const ConfigSummary*>(one_factor.size(), &baseline));
  const std::vector<const ConfigSummary*> path = CumulativePath(report);
  if (!path.empty()) {
    html += "<h3>The cumulative path</h3>\n<p class=\"explain\">Each step keeps the best change so far and "
            "adds one more; changes against the step before (parity against the baseline).</p>\n";
    html += table(std::vector<const ConfigSummary*>(path.begin() + 1, path.end()),
                  std::vector<const ConfigSummary*>(path.begin(), path.end() - 1));
  }
  return html + "</section>\n";
}

// docs/strategies.md#screening: every screened config, kept or dropped, and why.
std::string ScreeningSection(const ScreeningSummary& screening) {
  const std::string explain =
      screening.in_trial
          ? Printf(
                "Screened inside the trials, as ASHA ran them (no screening trials): %d of %zu configs were "
                "screened out by step %d of their first trial and stopped there; the others were not (a "
                "config "
                "stopped or failed before that step was never measured).",
                screening.dropped(), screening.configs.size(), screening.steps)
          : Printf(
                "Every config was timed for %d steps (one seed, no evaluation) before the search; %d of %zu "
                "were screened out and never run. %.1f device-s.",
                screening.steps, screening.dropped(), screening.configs.size(), screening.device_s);
  std::string html =
      "<section id=\"screening\" class=\"view\">\n<h2>Screening: speed first</h2>\n<p class=\"explain\">" +
      EscapeHtml(explain) +
      "</p>\n<table class=\"screening\">\n<thead><tr><th>config</th><th>screen</th><th>why</th></tr>"
      "</thead>\n<tbody>\n";
  for (const ScreenedConfig& c : screening.configs) {
    html += "<tr data-config=\"" + EscapeHtml(c.config_key) + "\"><td>" + EscapeHtml(c.label) + "</td><td>" +
            (c.kept ? "kept" : "screened out") + "</td><td>" + EscapeHtml(c.reason) + "</td></tr>\n";
  }
  return html + "</tbody>\n</table>\n</section>\n";
}

std::string CostSection(const Report& report, const DrawnConfigs& drawn) {
  const CostTotals totals = TotalCost(report);
  std::string html =
      "<section id=\"cost\" class=\"view\">\n<h2>What the search cost</h2>\n"
      "<p class=\"explain\">Device-seconds each config's trials held a device (lease start to the "
      "attempt's end), split into the summed training step time, the profiled steps, the rest of completed "
      "trials (start-up, data, evaluations) and trials stopped early or failed.</p>\n"
      "<table class=\"cost\">\n<thead><tr><th>config</th><th>trials run</th><th>device-s</th><th>training</th>"
      "<th>profiling</th><th>start-up, data, evaluation</th><th>stopped early</th><th>failed</th></tr></thead>\n"
      "<tbody>\n";
  auto cells = [](const SearchCost& s) {
    return Printf("<td class=\"num\">%d</td><td class=\"num\">%.1f</td><td class=\"num\">%.1f</td><td "
                  "class=\"num\">%.1f</td><td class=\"num\">%.1f</td><td class=\"num\">%.1f</td><td "
                  "class=\"num\">%.1f</td>",
                  s.trials_run, s.device_s, s.train_s, s.profile_s, s.other_s, s.stopped_s, s.failed_s);
  };
  for (size_t i = 0; i < report.configs.size(); ++i) {
    if (drawn.Drawn(i)) html += "<tr>" + ConfigCell(report.configs[i]) + cells(report.configs[i].cost) + "</tr>\n";
  }
  if (!drawn.note.empty()) {
    html += Printf("<tr class=\"sampled\"><td colspan=\"8\">%zu of %zu configs drawn (see the top of the page); "
                   "the total is over every config</td></tr>\n",
                   drawn.count, report.configs.size());
  }
  html += "<tr class=\"total\"><td>total</td>" + cells(totals.total) + "</tr>\n</tbody>\n</table>\n<ul class=\"notes\">\n";
  html += "<li>" +
          EscapeHtml(Printf("%d trials completed, %.1f device-s each on average; %.1f device-s in all (%.2f device-h)",
                            totals.trials_completed, totals.mean_completed_s, totals.total.device_s,
                            totals.total.device_s / 3600)) +
          "</li>\n";
  if (const std::string goodput = GoodputLine(totals); !goodput.empty()) {
    html += "<li>" + EscapeHtml(goodput) + "</li>\n";
  }
  if (totals.trials_stopped > 0) {
    html += "<li>" +
            EscapeHtml(Printf("early stopping: %d trials stopped after %.1f device-s; run to the end they would "
                              "have taken about %.1f device-s more (estimated at their config's mean completed "
                              "trial, else the experiment's)",
                              totals.trials_stopped, totals.total.stopped_s, totals.early_stopping_saved_s)) +
            "</li>\n";
  }
  const double screening_s = report.screening ? report.screening->device_s : 0;
  if (report.screening && !report.screening->in_trial) {
    html += "<li>" +
            EscapeHtml(Printf("screening: %d trials of %d steps, %.1f device-s (not in the table above; "
                              "included in what this search used)",
                              report.screening->trials, report.screening->steps, screening_s)) +
            "</li>\n";
  }
  if (totals.full_grid_s > 0) {
    html += "<li>" +
            EscapeHtml(Printf("the full grid, %s configs x %d seeds, would take about %.1f device-s at the mean "
                              "completed trial (estimated): this search used %.0f%% of it",
                              GridCountText(report.grid_size).c_str(), std::max(1, report.repeats), totals.full_grid_s,
                              100 * (totals.total.device_s + screening_s) / totals.full_grid_s)) +
            "</li>\n";
  }
  return html + "</ul>\n</section>\n";
}

std::string ArtifactsSection(const Report& report) {
  std::string html =
      "<section id=\"artifacts\" class=\"view\">\n<h2>Artifacts</h2>\n<p class=\"explain\">" +
      EscapeHtml(report.artifacts_href.empty()
                     ? "Files the trials wrote (profiles' traces and operator tables, a command trial's own files), "
                       "kept by the coordinator; fetch one with the command beside it."
                     : "Files the trials wrote (profiles' traces and operator tables, a command trial's own files), "
                       "kept by the coordinator. A trace opens in https://ui.perfetto.dev.") +
      "</p>\n<ul class=\"artifacts\">\n";
  for (const TrialArtifacts& trial : report.artifacts) {
    html += "<li data-trial=\"" + EscapeHtml(trial.trial_id) + "\">" + EscapeHtml(trial.trial_id) +
            (trial.profile_of.empty() ? "" : EscapeHtml(" (profile run of " + trial.profile_of + ")")) + ": ";
    for (size_t i = 0; i < trial.files.size(); ++i) {
      const auto& [name, bytes] = trial.files[i];
      if (i > 0) html += ", ";
      const std::string size = bytes < 1000    ? Printf(" (%lld B)", static_cast<long long>(bytes))
                               : bytes < 1000000 ? Printf(" (%.1f kB)", static_cast<double>(bytes) / 1e3)
                                                 : Printf(" (%.1f MB)", static_cast<double>(bytes) / 1e6);
      if (report.artifacts_href.empty()) {
        html += "<code>" +
                EscapeHtml("frontier artifacts " + report.experiment_id + " --trial " + trial.trial_id + " --get " +
                           name) +
                "</code>" + EscapeHtml(size);
      } else {
        html += "<a href=\"" +
                EscapeHtml(report.artifacts_href + "/" + report.experiment_id + "/" + trial.trial_id + "/" + name) +
                "\">" + EscapeHtml(name) + "</a>" + EscapeHtml(size);
      }
    }
    html += "</li>\n";
  }
  return html + "</ul>\n</section>\n";
}

// docs/report.md#the-onboard-front: the deployed networks' latency against
// quality, the configs that change rank between the two fronts, and each
// config's int8 network against its float one.
std::string OnboardSection(const Report& report, const OnboardView& view) {
  std::string html =
      "<section id=\"onboard\" class=\"view\">\n<h2>Onboard: latency against " + EscapeHtml(view.quality_metric) +
      " as deployed</h2>\n<p class=\"explain\">" +
      EscapeHtml(Printf("Each config's trained network as it would ship, in float and in int8 (engine %s), one "
                        "point per format: mean latency at batch %d, %d thread%s against mean %s in that format, "
                        "with 95%% intervals over seeds. The onboard front runs through the points of feasible "
                        "configs that no other point beats on both; a dashed ring marks a config on one front only "
                        "(green: the onboard front, red: the training front). Hover a point for its figures.",
                        view.engine.empty() ? "-" : view.engine.c_str(), view.batch, view.threads,
                        view.threads == 1 ? "" : "s", view.quality_metric.c_str())) +
      "</p>\n<figure>\n" + RenderOnboardSvg(report, view) + "</figure>\n<ul class=\"rank-changes\">\n";
  if (view.rank_changes.empty()) html += "<li>the same configs lead both fronts</li>\n";
  for (const RankChange& change : view.rank_changes) {
    html += "<li class=\"rank-change\" data-config=\"" + EscapeHtml(change.config->config_key) + "\" data-front=\"" +
            (change.onboard ? "onboard" : "training") + "\"><b>" + EscapeHtml(change.text) + "</b></li>\n";
  }
  html += "</ul>\n";
  const TextTable table = BuildOnboardTable(report, view, true);
  html += "<div class=\"scroll\"><table class=\"onboard\">\n<thead><tr>";
  for (const std::string& cell : table.header) html += "<th>" + EscapeHtml(cell) + "</th>";
  html += "</tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const OnboardPoint& p = view.points[i];
    const bool moved = std::any_of(view.rank_changes.begin(), view.rank_changes.end(),
                                   [&](const RankChange& r) { return r.config == p.config; });
    html += std::string("<tr") + (moved ? " class=\"moved\"" : "") + " data-row=\"" + std::to_string(p.row) +
            "\" data-format=\"" + EscapeHtml(p.format) + "\">";
    for (size_t j = 0; j < table.rows[i].size(); ++j) {
      if (table.header[j] == "config") {
        html += ConfigCell(*p.config);
        continue;
      }
      html += std::string(table.right_aligned[j] ? "<td class=\"num\"" : "<td") + " data-column=\"" +
              EscapeHtml(table.header[j]) + "\">" + EscapeHtml(table.rows[i][j]) + "</td>";
    }
    html += "</tr>\n";
  }
  html += "</tbody>\n</table></div>\n<h3>Parity after quantization</h3>\n<ul class=\"notes quantization\">\n";
  for (const OnboardConfig& config : view.configs) {
    html += "<li data-config=\"" + EscapeHtml(config.config->config_key) + "\" data-faster-at-parity=\"" +
            (config.faster_at_parity ? "true" : "false") + "\">" + EscapeHtml(QuantizationLine(report, view, config)) +
            "</li>\n";
  }
  return html + "</ul>\n</section>\n";
}

}  // namespace

std::string RenderHtml(const Report& report) {
  const DrawnConfigs drawn = DrawnOf(report);
  std::vector<PlotPoint> points;
  for (size_t i = 0; i < report.configs.size(); ++i) {
    if (!drawn.Drawn(i)) continue;
    const ConfigSummary& c = report.configs[i];
    auto x = c.metrics.find("throughput");
    auto y = c.metrics.find(report.parity.metric);
    if (x != c.metrics.end() && y != c.metrics.end()) {
      points.push_back(PlotPoint{&c, static_cast<int>(i) + 1, x->second, y->second});
    }
  }
  const std::optional<OnboardView> onboard = Onboard(report);
  const std::string title =
      "Frontier report: " + report.experiment_id + (report.name.empty() ? "" : " (" + report.name + ")");
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
                     EscapeHtml(title) + "</title>\n<style>" + kHtmlStyle + (onboard ? kOnboardStyle : "") +
                     "</style>\n</head>\n<body>\n";
  html += "<h1>" + EscapeHtml(title) + "</h1>\n";
  html += "<p class=\"meta\">" +
          EscapeHtml(Printf("%zu configs; objectives: ", report.configs.size()) +
                     DescribeObjectives(report.objectives) +
                     "; constraints: " + DescribeConstraints(report.constraints)) +
          "</p>\n";
  if (!drawn.note.empty()) html += "<p class=\"meta sampled\">" + EscapeHtml(drawn.note) + "</p>\n";
  html += "<section id=\"front\" class=\"view\">\n<h2>Throughput against " + EscapeHtml(report.parity.metric) +
          "</h2>\n<figure>\n" + RenderSvg(report, points) + "<figcaption>" +
          EscapeHtml("Mean throughput versus mean " + report.parity.metric +
                     " per config, with 95% intervals of both means. The front and the baseline are labelled; "
                     "hover a point for every metric, its interval and its parity verdict." +
                     (drawn.note.empty() ? "" : Printf(" %zu of the %zu configs drawn (see above).", drawn.count,
                                                       report.configs.size()))) +
          "</figcaption>\n</figure>\n</section>\n";

  const TextTable table = BuildTextTable(report, true);
  html += "<section id=\"configs\" class=\"view\">\n<h2>" +
          (drawn.note.empty() ? std::string("Every config")
                              : Printf("%zu of %zu configs (see above)", drawn.count, report.configs.size())) +
          "</h2>\n<div class=\"scroll\"><table class=\"configs\">\n<thead><tr>";
  for (const std::string& cell : table.header) html += "<th>" + EscapeHtml(cell) + "</th>";
  html += "</tr></thead>\n<tbody>\n";
  for (size_t i = 0; i < table.rows.size(); ++i) {
    if (!drawn.Drawn(i)) continue;
    const ConfigSummary& c = report.configs[i];
    const char* row_class = c.is_baseline ? " class=\"baseline\""
                            : !c.feasible ? " class=\"infeasible\""
                                          : "";
    html += Printf("<tr%s data-row=\"%zu\">", row_class, i + 1);
    for (size_t j = 0; j < table.rows[i].size(); ++j) {
      if (table.header[j] == "config") {
        html += ConfigCell(c);
        continue;
      }
      // Why seeds failed, on hover over their count (the notes have its first line).
      const std::string why =
          table.header[j] == "seeds" && !c.failure.empty() ? " title=\"" + EscapeHtml(c.failure) + "\"" : "";
      html += std::string(table.right_aligned[j] ? "<td class=\"num\"" : "<td") + " data-column=\"" +
              EscapeHtml(table.header[j]) + "\"" + why + ">" + EscapeHtml(table.rows[i][j]) + "</td>";
    }
    html += "</tr>\n";
  }
  html += "</tbody>\n</table></div>\n<ul class=\"notes\">\n";
  for (const std::string& note : ReportNotes(report)) html += "<li>" + EscapeHtml(note) + "</li>\n";
  html += "</ul>\n</section>\n";
  if (onboard) html += OnboardSection(report, *onboard);

  html += MainEffectsSection(report);
  const std::string curves = RenderLearningCurves(report);
  html += "<section id=\"learning-curves\" class=\"view\">\n<h2>Learning curves</h2>\n<p class=\"explain\">" +
          EscapeHtml(report.parity.metric +
                     " at each evaluation against the summed step time so far, for the front configs and the "
                     "baseline (means over seeds); the dashed line is the target, a ring marks each config's "
                     "mean time to target.") +
          "</p>\n" + (curves.empty() ? "<p class=\"empty\">no evaluations recorded.</p>\n" : "<figure>" + curves + "</figure>\n") +
          "</section>\n";
  html += AblationSection(report);
  const std::string steps = RenderStepTimes(report, drawn.drawn);
  html += "<section id=\"step-time\" class=\"view\">\n<h2>Step time distribution</h2>\n<p class=\"explain\">Each "
          "config's p10, median and p90 step time (means over its seeds), fastest first.</p>\n" +
          (steps.empty() ? "<p class=\"empty\">no step times recorded.</p>\n" : "<figure>" + steps + "</figure>\n") +
          "</section>\n";
  const std::string bars = RenderProfileBars(report);
  html += "<section id=\"profile\" class=\"view\">\n<h2>Where the step time goes</h2>\n";
  html += bars.empty() ? "<p class=\"empty\">no seed was profiled (a trial spec's <code>profile.steps</code> "
                         "turns it on, docs/profiling.md); the verdicts below come from the measurements.</p>\n"
                       : "<p class=\"explain\">Share of the profiled steps' time by operator class (means over "
                         "the profiled seeds).</p>\n<figure>" + bars + "</figure>\n";
  html += BottleneckSection(report) + "</section>\n";
  if (report.screening) html += ScreeningSection(*report.screening);
  html += CostSection(report, drawn);
  if (!report.artifacts.empty()) html += ArtifactsSection(report);
  html += "</body>\n</html>\n";
  return html;
}

}  // namespace frontier
