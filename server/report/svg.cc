#include "server/report/svg.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/report/format.h"

namespace frontier {
namespace {

// A linear plot axis with round ticks.
struct Axis {
  double low = 0, high = 1, step = 0.2;
  double ToPixel(double v, double pixel_low, double pixel_high) const {
    return pixel_low + (v - low) / (high - low) * (pixel_high - pixel_low);
  }
};

// An axis covering [low, high] with about five ticks at 1, 2 or 5 times a power of ten.
Axis NiceAxis(double low, double high) {
  if (!(high > low)) {
    const double pad = low != 0 ? std::fabs(low) * 0.05 : 1;
    low -= pad;
    high += pad;
  }
  const double pad = (high - low) * 0.04;
  low -= pad;
  high += pad;
  const double raw = (high - low) / 5;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double fraction = raw / magnitude;
  const double step = (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * magnitude;
  return Axis{std::floor(low / step) * step, std::ceil(high / step) * step, step};
}

std::string Px(double v) { return Printf("%.2f", v); }

}  // namespace

std::string RenderSvg(const Report& report, const std::vector<PlotPoint>& points) {
  constexpr double kWidth = 820, kHeight = 500;
  constexpr double kLeft = 80, kRight = 600, kTop = 20, kBottom = 440;  // plot area
  const bool lower_is_better = LowerIsBetter(report.parity.metric, report.objectives);

  double x_low = 0, x_high = 1, y_low = 0, y_high = 1;
  if (!points.empty()) {
    x_low = y_low = std::numeric_limits<double>::infinity();
    x_high = y_high = -std::numeric_limits<double>::infinity();
    for (const PlotPoint& p : points) {
      x_low = std::min(x_low, p.x.ci_low);
      x_high = std::max(x_high, p.x.ci_high);
      y_low = std::min(y_low, p.y.ci_low);
      y_high = std::max(y_high, p.y.ci_high);
    }
  }
  const Axis x_axis = NiceAxis(x_low, x_high), y_axis = NiceAxis(y_low, y_high);
  auto px = [&](double v) { return x_axis.ToPixel(v, kLeft, kRight); };
  auto py = [&](double v) { return y_axis.ToPixel(v, kBottom, kTop); };

  std::string svg = Printf(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" height=\"%.0f\" "
      "role=\"img\" aria-label=\"throughput versus %s\">\n",
      kWidth, kHeight, kWidth, kHeight, EscapeHtml(report.parity.metric).c_str());
  svg += "<g class=\"axes\">\n";
  for (int i = 0; x_axis.low + i * x_axis.step <= x_axis.high + x_axis.step * 1e-9; ++i) {
    const double v = x_axis.low + i * x_axis.step, x = px(v);
    svg += "<line class=\"grid\" x1=\"" + Px(x) + "\" y1=\"" + Px(kTop) + "\" x2=\"" + Px(x) + "\" y2=\"" +
           Px(kBottom) + "\"/>";
    svg += "<line class=\"tick\" x1=\"" + Px(x) + "\" y1=\"" + Px(kBottom) + "\" x2=\"" + Px(x) + "\" y2=\"" +
           Px(kBottom + 5) + "\"/>";
    svg += "<text class=\"tick-label\" x=\"" + Px(x) + "\" y=\"" + Px(kBottom + 18) +
           "\" text-anchor=\"middle\">" + Printf("%g", std::fabs(v) < x_axis.step * 1e-9 ? 0.0 : v) +
           "</text>\n";
  }
  for (int i = 0; y_axis.low + i * y_axis.step <= y_axis.high + y_axis.step * 1e-9; ++i) {
    const double v = y_axis.low + i * y_axis.step, y = py(v);
    svg += "<line class=\"grid\" x1=\"" + Px(kLeft) + "\" y1=\"" + Px(y) + "\" x2=\"" + Px(kRight) +
           "\" y2=\"" + Px(y) + "\"/>";
    svg += "<line class=\"tick\" x1=\"" + Px(kLeft - 5) + "\" y1=\"" + Px(y) + "\" x2=\"" + Px(kLeft) +
           "\" y2=\"" + Px(y) + "\"/>";
    svg += "<text class=\"tick-label\" x=\"" + Px(kLeft - 8) + "\" y=\"" + Px(y + 4) +
           "\" text-anchor=\"end\">" + Printf("%g", std::fabs(v) < y_axis.step * 1e-9 ? 0.0 : v) +
           "</text>\n";
  }
  svg += "<line class=\"axis\" x1=\"" + Px(kLeft) + "\" y1=\"" + Px(kBottom) + "\" x2=\"" + Px(kRight) +
         "\" y2=\"" + Px(kBottom) + "\"/>";
  svg += "<line class=\"axis\" x1=\"" + Px(kLeft) + "\" y1=\"" + Px(kTop) + "\" x2=\"" + Px(kLeft) +
         "\" y2=\"" + Px(kBottom) + "\"/>\n";
  svg += "<text class=\"axis-label\" x=\"" + Px((kLeft + kRight) / 2) + "\" y=\"" + Px(kBottom + 45) +
         "\" text-anchor=\"middle\">throughput (samples/s)</text>\n";
  svg += "<text class=\"axis-label\" transform=\"rotate(-90)\" x=\"" + Px(-(kTop + kBottom) / 2) + "\" y=\"" +
         Px(22) + "\" text-anchor=\"middle\">" + EscapeHtml(report.parity.metric) +
         (lower_is_better ? " (lower is better)" : " (higher is better)") + "</text>\n";
  svg += "</g>\n";

  std::vector<const PlotPoint*> front;
  for (const PlotPoint& p : points) {
    if (p.config->on_front) front.push_back(&p);
  }
  std::sort(front.begin(), front.end(),
            [](const PlotPoint* a, const PlotPoint* b) { return a->x.mean < b->x.mean; });
  std::string front_points;
  for (const PlotPoint* p : front) {
    front_points += (front_points.empty() ? "" : " ") + Px(px(p->x.mean)) + "," + Px(py(p->y.mean));
  }
  svg += "<polyline class=\"front\" points=\"" + front_points + "\"/>\n";

  svg += "<g class=\"errorbars\">\n";
  for (const PlotPoint& p : points) {
    const double x = px(p.x.mean), y = py(p.y.mean);
    svg += "<line class=\"errorbar\" x1=\"" + Px(px(p.x.ci_low)) + "\" y1=\"" + Px(y) + "\" x2=\"" +
           Px(px(p.x.ci_high)) + "\" y2=\"" + Px(y) + "\"/>";
    svg += "<line class=\"errorbar\" x1=\"" + Px(x) + "\" y1=\"" + Px(py(p.y.ci_low)) + "\" x2=\"" + Px(x) +
           "\" y2=\"" + Px(py(p.y.ci_high)) + "\"/>\n";
  }
  svg += "</g>\n<g class=\"points\">\n";
  for (const PlotPoint& p : points) {
    const double x = px(p.x.mean), y = py(p.y.mean);
    const ConfigSummary& c = *p.config;
    if (c.is_baseline) {
      svg += "<circle class=\"baseline\" cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"10\"/>";
    }
    svg += "<circle class=\"config\" data-config=\"" + EscapeHtml(c.config_key) + "\" data-front=\"" +
           (c.on_front ? "true" : "false") + "\" data-feasible=\"" + (c.feasible ? "true" : "false") +
           "\" data-baseline=\"" + (c.is_baseline ? "true" : "false") + "\" cx=\"" + Px(x) + "\" cy=\"" +
           Px(y) + "\" r=\"5\"><title>" +
           EscapeHtml(Printf("#%d %s: throughput %.1f [%.1f, %.1f] (n=%d), %s %.4f [%.4f, %.4f] (n=%d)",
                             p.row, c.is_baseline ? "baseline" : c.config_key.c_str(), p.x.mean, p.x.ci_low,
                             p.x.ci_high, p.x.n, report.parity.metric.c_str(), p.y.mean, p.y.ci_low,
                             p.y.ci_high, p.y.n)) +
           "</title></circle>";
    svg += "<text class=\"point-label\" x=\"" + Px(x + 7) + "\" y=\"" + Px(y - 7) + "\">" +
           (c.is_baseline ? std::string("baseline") : std::to_string(p.row)) + "</text>\n";
  }
  if (points.empty()) {
    svg += "<text class=\"empty\" x=\"" + Px((kLeft + kRight) / 2) + "\" y=\"" + Px((kTop + kBottom) / 2) +
           "\" text-anchor=\"middle\">no configs with both throughput and " +
           EscapeHtml(report.parity.metric) + "</text>\n";
  }
  svg += "</g>\n";

  // Legend, right of the plot; its markers carry "key" classes, never "config".
  const double lx = kRight + 30;
  double ly = kTop + 10;
  auto entry = [&](const std::string& marker, const std::string& label) {
    svg += marker + "<text class=\"legend-label\" x=\"" + Px(lx + 18) + "\" y=\"" + Px(ly + 4) + "\">" +
           label + "</text>\n";
    ly += 24;
  };
  svg += "<g class=\"legend\">\n";
  const std::string at = "cx=\"" + Px(lx) + "\" r=\"5\" ";
  entry("<circle class=\"key key-front\" " + at + "cy=\"" + Px(ly) + "\"/>", "on the Pareto front");
  entry("<circle class=\"key key-dominated\" " + at + "cy=\"" + Px(ly) + "\"/>", "feasible, dominated");
  entry("<circle class=\"key key-infeasible\" " + at + "cy=\"" + Px(ly) + "\"/>", "infeasible");
  entry("<circle class=\"key key-baseline\" cx=\"" + Px(lx) + "\" cy=\"" + Px(ly) + "\" r=\"10\"/>",
        "baseline");
  entry("<line class=\"key key-front-line\" x1=\"" + Px(lx - 10) + "\" y1=\"" + Px(ly) + "\" x2=\"" +
            Px(lx + 10) + "\" y2=\"" + Px(ly) + "\"/>",
        "front (by throughput)");
  entry("<line class=\"key key-errorbar\" x1=\"" + Px(lx - 10) + "\" y1=\"" + Px(ly) + "\" x2=\"" +
            Px(lx + 10) + "\" y2=\"" + Px(ly) + "\"/>",
        "95% interval of the mean");
  svg += "</g>\n</svg>\n";
  return svg;
}

}  // namespace frontier
