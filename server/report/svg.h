// The report's plots as inline SVG for the HTML page (internal to
// frontier_report; RenderHtml documents what the page shows). Axes are
// fitted to the plotted values (means), never to their intervals: an
// interval reaching past the plot area is cut at its edge and marked there.
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

// The front plot: one <circle class="config" data-config="KEY" data-row="N">
// per point with 95% error bars of both means (cut at the plot's edge, where a
// <path class="clipped"> marks the cut), a <title> tooltip with every metric,
// its interval and the parity verdict, the front as <polyline class="front">
// (by throughput), the baseline ringed (class "baseline"); labels (the
// config's label) on the front configs and the baseline, placed where they
// overlap no other label or point (with a leader line when moved away), or
// on every point with `label_all`; axes with round ticks (<text
// class="tick-label x|y">) and a legend whose markers carry "key" classes.
std::string RenderSvg(const Report& report, const std::vector<PlotPoint>& points, bool label_all = false);

// The onboard front (views.h, Onboard): latency (x) against the quality in
// that format (y), one <circle class="onboard-point" data-config data-format
// data-row data-front data-moved> per (config, format) point with 95% error
// bars and a <title> tooltip, the onboard front as <polyline
// class="onboard-front"> (by latency), a dashed <circle class="moved-ring">
// around the points of configs on one front only; labels on the onboard
// front's points and the moved configs'.
struct OnboardView;
std::string RenderOnboardSvg(const Report& report, const OnboardView& view);

// The parity metric against summed step time for the front configs and the
// baseline (<polyline class="curve" data-config>), the target as
// <line class="target">, each config's mean time to target as <circle class="ttt">.
std::string RenderLearningCurves(const Report& report);

// Per config with step times, p10 to p90 as a bar and the median as a tick
// (<g class="step-time" data-config>), sorted by median; with `drawn` (one
// flag per config of the report) only the configs it flags.
std::string RenderStepTimes(const Report& report, const std::vector<bool>& drawn = {});

// Per profiled config, the share of profiled time by operator class as one
// stacked bar (<rect class="share" data-class>); "" when no config was profiled.
std::string RenderProfileBars(const Report& report);

}  // namespace frontier
