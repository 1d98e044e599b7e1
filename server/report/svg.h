// The report's plot: throughput versus the parity metric, as inline SVG for
// the HTML page (internal to frontier_report; RenderHtml documents what the
// page shows).
#pragma once

#include <string>
#include <vector>

#include "server/report/report.h"

namespace frontier {

// One plotted config: means and 95% intervals of throughput (x) and quality (y).
struct PlotPoint {
  const ConfigSummary* config;
  int row;  // 1-based row in the table
  MetricSummary x, y;
};

// An <svg> element: one <circle class="config" data-config="KEY"> per point
// with 95% error bars of both means, the front as <polyline class="front">
// (by throughput), the baseline ringed (class "baseline"), axes with round
// ticks and a legend whose markers carry "key" classes, never "config".
std::string RenderSvg(const Report& report, const std::vector<PlotPoint>& points);

}  // namespace frontier
