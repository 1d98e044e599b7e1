#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/report/format.h"
#include "server/report/report.h"
#include "server/report/svg.h"
#include "server/report/table.h"

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
)";

// "Where the step time goes": each config's verdict and summary, and the
// profiled seeds' traces and top operators (docs/profiling.md).
std::string BottleneckSection(const Report& report) {
  std::string html;
  for (const ConfigSummary& c : report.configs) {
    if (c.bottleneck_verdicts.empty() && c.profiles.empty()) continue;
    html += "<li class=\"bottleneck\" data-config=\"" + EscapeHtml(c.config_key) + "\"><b>" +
            EscapeHtml(c.is_baseline ? "baseline" : c.config_key) +
            "</b>: " + EscapeHtml(BottleneckLabel(c)) +
            (c.bottleneck_summary.empty() ? "" : " &mdash; " + EscapeHtml(c.bottleneck_summary));
    for (const json& p : c.profiles) {
      html += "<br>profile of " + EscapeHtml(p.value("trial_id", "")) + " (" +
              EscapeHtml(p.value("tool", "")) +
              "): " + EscapeHtml(p.value("host", "") + ":" + p.value("trace", ""));
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
