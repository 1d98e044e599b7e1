#include "server/report/svg.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "search_spaces/trial_spec.h"
#include "server/report/format.h"
#include "server/report/views.h"

namespace frontier {
namespace {

// A linear axis over [low, high] with ticks at round values inside it.
struct Axis {
  double low = 0, high = 1, step = 0.2;
  double ToPixel(double v, double pixel_low, double pixel_high) const {
    return pixel_low + (v - low) / (high - low) * (pixel_high - pixel_low);
  }
  double first_tick() const { return std::ceil(low / step - 1e-9) * step; }
};

// An axis fitted to values in [low, high]: 6% of the span added on each
// side (the values fill most of the plot), ticks about five at 1, 2 or 5
// times a power of ten. A single value gets a span of 5% of itself.
Axis FittedAxis(double low, double high) {
  if (!(high > low)) {
    const double pad = low != 0 ? std::fabs(low) * 0.05 : 1;
    low -= pad;
    high += pad;
  }
  const double pad = (high - low) * 0.06;
  low -= pad;
  high += pad;
  const double raw = (high - low) / 5;
  const double magnitude = std::pow(10, std::floor(std::log10(raw)));
  const double fraction = raw / magnitude;
  const double step = (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * magnitude;
  return Axis{low, high, step};
}

// Both axes of a scatter fitted to its points' (x, y) means; [0, 1] without points.
std::pair<Axis, Axis> FittedAxes(const std::vector<std::pair<double, double>>& means) {
  double x_low = 0, x_high = 1, y_low = 0, y_high = 1;
  if (!means.empty()) {
    x_low = y_low = std::numeric_limits<double>::infinity();
    x_high = y_high = -std::numeric_limits<double>::infinity();
    for (const auto& [x, y] : means) {
      x_low = std::min(x_low, x);
      x_high = std::max(x_high, x);
      y_low = std::min(y_low, y);
      y_high = std::max(y_high, y);
    }
  }
  return {FittedAxis(x_low, x_high), FittedAxis(y_low, y_high)};
}

std::string Px(double v) { return Printf("%.2f", v); }

std::string Tick(double v, double step) { return Printf("%g", std::fabs(v) < step * 1e-9 ? 0.0 : v); }

// Grid lines, ticks and tick labels of both axes, the axis lines and their labels.
std::string Axes(const Axis& x, const Axis& y, double left, double right, double top, double bottom,
                 const std::string& x_label, const std::string& y_label) {
  std::string svg = "<g class=\"axes\">\n";
  for (double v = x.first_tick(); v <= x.high + x.step * 1e-9; v += x.step) {
    const std::string at = Px(x.ToPixel(v, left, right));
    svg += "<line class=\"grid\" x1=\"" + at + "\" y1=\"" + Px(top) + "\" x2=\"" + at + "\" y2=\"" + Px(bottom) +
           "\"/><line class=\"tick\" x1=\"" + at + "\" y1=\"" + Px(bottom) + "\" x2=\"" + at + "\" y2=\"" +
           Px(bottom + 5) + "\"/><text class=\"tick-label x\" data-value=\"" + Printf("%.17g", v) + "\" x=\"" +
           at + "\" y=\"" + Px(bottom + 18) + "\" text-anchor=\"middle\">" + Tick(v, x.step) + "</text>\n";
  }
  for (double v = y.first_tick(); v <= y.high + y.step * 1e-9; v += y.step) {
    const std::string at = Px(y.ToPixel(v, bottom, top));
    svg += "<line class=\"grid\" x1=\"" + Px(left) + "\" y1=\"" + at + "\" x2=\"" + Px(right) + "\" y2=\"" + at +
           "\"/><line class=\"tick\" x1=\"" + Px(left - 5) + "\" y1=\"" + at + "\" x2=\"" + Px(left) +
           "\" y2=\"" + at + "\"/><text class=\"tick-label y\" data-value=\"" + Printf("%.17g", v) + "\" x=\"" +
           Px(left - 8) + "\" y=\"" + at + "\" dy=\"4\" text-anchor=\"end\">" + Tick(v, y.step) + "</text>\n";
  }
  svg += "<line class=\"axis\" x1=\"" + Px(left) + "\" y1=\"" + Px(bottom) + "\" x2=\"" + Px(right) + "\" y2=\"" +
         Px(bottom) + "\"/><line class=\"axis\" x1=\"" + Px(left) + "\" y1=\"" + Px(top) + "\" x2=\"" + Px(left) +
         "\" y2=\"" + Px(bottom) + "\"/>\n";
  svg += "<text class=\"axis-label\" x=\"" + Px((left + right) / 2) + "\" y=\"" + Px(bottom + 40) +
         "\" text-anchor=\"middle\">" + EscapeHtml(x_label) + "</text>\n";
  svg += "<text class=\"axis-label\" transform=\"rotate(-90)\" x=\"" + Px(-(top + bottom) / 2) + "\" y=\"" +
         Px(left - 58) + "\" text-anchor=\"middle\">" + EscapeHtml(y_label) + "</text>\n</g>\n";
  return svg;
}

// A box in the plot's pixels.
struct Box {
  double x0, y0, x1, y1;
  bool Overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

// Width of a label in 12px system-ui, generously: 7 px per character.
double TextWidth(const std::string& text) {
  size_t points = 0;
  for (char ch : text) points += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return 7.0 * points;
}

// Every metric of the config with its interval, the speed-up and the parity verdict.
std::string Tooltip(const Report& report, const ConfigSummary& c, int row) {
  std::string text = Printf("#%d %s\n%s\n", row, c.label.c_str(), c.config_key.c_str());
  for (const auto& [name, s] : c.metrics) {
    text += s.n >= 2 ? Printf("%s: %.5g [%.5g, %.5g] (n=%d)\n", name.c_str(), s.mean, s.ci_low, s.ci_high, s.n)
                     : Printf("%s: %.5g (n=%d)\n", name.c_str(), s.mean, s.n);
  }
  if (c.speedup) text += Printf("speed-up: %.3fx [%.3f, %.3f]\n", c.speedup->value, c.speedup->low, c.speedup->high);
  if (c.quality_delta) {
    text += Printf("\u0394 %s: %+.4f [%+.4f, %+.4f]\n", report.parity.metric.c_str(), c.quality_delta->value,
                   c.quality_delta->low, c.quality_delta->high);
  }
  text += "parity: " + c.parity + (c.parity_test.empty() ? "" : " (" + c.parity_test + ")");
  if (!c.feasible) text += "\ninfeasible: " + c.infeasible_reason;
  return text;
}

// A fixed palette for series (curves, classes), colour-blind safe (Okabe-Ito and Tol).
const char* SeriesColor(size_t i) {
  static const char* kColors[] = {"#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9",
                                  "#d55e00", "#332288", "#882255", "#44aa99", "#999933"};
  return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
}

// The scatter plots' size and plot area (the front and the onboard front).
constexpr double kPlotWidth = 900, kPlotHeight = 520;
constexpr double kPlotLeft = 90, kPlotRight = 680, kPlotTop = 20, kPlotBottom = 450;

// A point's 95% error bars in pixels (its means at x, y; the intervals from
// x0 to x1 and y0 to y1), cut at the plot area; a chevron marks each cut end.
std::string ErrorBars(double x, double y, double x0, double x1, double y0, double y1) {
  constexpr double kLeft = kPlotLeft, kRight = kPlotRight, kTop = kPlotTop, kBottom = kPlotBottom;
  auto clip = [](double v, double lo, double hi) { return std::min(std::max(v, lo), hi); };
  std::string svg = "<line class=\"errorbar\" x1=\"" + Px(clip(x0, kLeft, kRight)) + "\" y1=\"" + Px(y) +
                    "\" x2=\"" + Px(clip(x1, kLeft, kRight)) + "\" y2=\"" + Px(y) + "\"/>";
  svg += "<line class=\"errorbar\" x1=\"" + Px(x) + "\" y1=\"" + Px(clip(y0, kTop, kBottom)) + "\" x2=\"" + Px(x) +
         "\" y2=\"" + Px(clip(y1, kTop, kBottom)) + "\"/>";
  if (x0 < kLeft) svg += Printf("<path class=\"clipped\" d=\"M%.2f,%.2f l6,-4 v8 z\"/>", kLeft, y);
  if (x1 > kRight) svg += Printf("<path class=\"clipped\" d=\"M%.2f,%.2f l-6,-4 v8 z\"/>", kRight, y);
  if (y1 < kTop) svg += Printf("<path class=\"clipped\" d=\"M%.2f,%.2f l-4,6 h8 z\"/>", x, kTop);
  if (y0 > kBottom) svg += Printf("<path class=\"clipped\" d=\"M%.2f,%.2f l-4,-6 h8 z\"/>", x, kBottom);
  return svg + "\n";
}

// A label wanted at a point (pixels), with the table row it names.
struct WantedLabel {
  double x, y;
  std::string text;
  int row;
};

// Each label at the first free place around its point among 16 directions at
// growing distances, inside the plot area and over no box in `taken` (the
// points, then the labels placed), with a leader line when it had to move
// away; a label with no free place is left out.
std::string PlaceLabels(const std::vector<WantedLabel>& wanted, std::vector<Box>& taken) {
  constexpr double kLeft = kPlotLeft, kRight = kPlotRight, kTop = kPlotTop, kBottom = kPlotBottom;
  std::string labels_svg = "<g class=\"labels\">\n";
  constexpr double kTextHeight = 14;
  for (const WantedLabel& label : wanted) {
    const double x = label.x, y = label.y;
    const double w = TextWidth(label.text);
    bool placed = false;
    for (double distance : {12.0, 24.0, 40.0, 60.0, 85.0, 115.0}) {
      for (int k = 0; k < 16 && !placed; ++k) {
        const double angle = -M_PI / 4 + k * M_PI / 8;  // up-right first, then around
        const double ax = x + distance * std::cos(angle), ay = y - distance * std::sin(angle);
        // The box hangs off the anchor on the side away from the point.
        const double bx = std::cos(angle) >= -1e-9 ? ax : ax - w;
        const double by = std::sin(angle) >= -1e-9 ? ay - kTextHeight : ay;
        const Box box{bx - 2, by - 1, bx + w + 2, by + kTextHeight + 1};
        if (box.x0 < kLeft || box.x1 > kRight || box.y0 < kTop || box.y1 > kBottom) continue;
        if (std::any_of(taken.begin(), taken.end(), [&](const Box& t) { return t.Overlaps(box); })) continue;
        taken.push_back(box);
        if (distance > 12) {
          labels_svg += "<line class=\"leader\" x1=\"" + Px(x) + "\" y1=\"" + Px(y) + "\" x2=\"" +
                 Px(std::clamp(x, box.x0, box.x1)) + "\" y2=\"" + Px(std::clamp(y, box.y0, box.y1)) + "\"/>";
        }
        labels_svg += "<text class=\"point-label\" data-row=\"" + std::to_string(label.row) + "\" x=\"" + Px(bx) +
               "\" y=\"" + Px(by + kTextHeight - 3) + "\">" + EscapeHtml(label.text) + "</text>\n";
        placed = true;
      }
      if (placed) break;
    }
  }
  return labels_svg + "</g>\n";
}

// A legend right of the scatter plot's area: one entry per marker (drawn by
// its function at the entry's centre) and label (HTML).
using LegendMarker = std::function<std::string(double x, double y)>;
std::string Legend(const std::vector<std::pair<LegendMarker, std::string>>& entries) {
  const double lx = kPlotRight + 30;
  double ly = kPlotTop + 10;
  std::string svg = "<g class=\"legend\">\n";
  for (const auto& [marker, label] : entries) {
    svg += marker(lx, ly) + "<text class=\"legend-label\" x=\"" + Px(lx + 18) + "\" y=\"" + Px(ly + 4) + "\">" +
           label + "</text>\n";
    ly += 24;
  }
  return svg + "</g>\n";
}
// A legend's dot (r 5) and line with `classes`.
LegendMarker Dot(const std::string& classes) {
  return [classes](double x, double y) {
    return "<circle class=\"" + classes + "\" cx=\"" + Px(x) + "\" r=\"5\" cy=\"" + Px(y) + "\"/>";
  };
}
LegendMarker Dash(const std::string& classes) {
  return [classes](double x, double y) {
    return "<line class=\"" + classes + "\" x1=\"" + Px(x - 10) + "\" y1=\"" + Px(y) + "\" x2=\"" + Px(x + 10) +
           "\" y2=\"" + Px(y) + "\"/>";
  };
}

}  // namespace

std::string RenderSvg(const Report& report, const std::vector<PlotPoint>& points, bool label_all) {
  constexpr double kWidth = kPlotWidth, kHeight = kPlotHeight;
  constexpr double kLeft = kPlotLeft, kRight = kPlotRight, kTop = kPlotTop, kBottom = kPlotBottom;  // plot area
  const bool lower_is_better = LowerIsBetter(report.parity.metric, report.objectives);

  std::vector<std::pair<double, double>> means;
  for (const PlotPoint& p : points) means.emplace_back(p.x.mean, p.y.mean);
  const std::pair<Axis, Axis> axes = FittedAxes(means);
  const Axis &x_axis = axes.first, &y_axis = axes.second;
  auto px = [&](double v) { return x_axis.ToPixel(v, kLeft, kRight); };
  auto py = [&](double v) { return y_axis.ToPixel(v, kBottom, kTop); };

  std::string svg = Printf(
      "<svg class=\"plot front-plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" "
      "width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"throughput versus %s\">\n",
      kWidth, kHeight, kWidth, kHeight, EscapeHtml(report.parity.metric).c_str());
  svg += Printf("<g class=\"plot-area\" data-left=\"%.0f\" data-right=\"%.0f\" data-top=\"%.0f\" data-bottom=\"%.0f\"/>\n",
                kLeft, kRight, kTop, kBottom);
  svg += Axes(x_axis, y_axis, kLeft, kRight, kTop, kBottom, "throughput (samples/s)",
              report.parity.metric + (lower_is_better ? " (lower is better)" : " (higher is better)"));

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

  // Error bars cut at the plot area; a chevron marks each cut end.
  svg += "<g class=\"errorbars\">\n";
  for (const PlotPoint& p : points) {
    svg += ErrorBars(px(p.x.mean), py(p.y.mean), px(p.x.ci_low), px(p.x.ci_high), py(p.y.ci_low), py(p.y.ci_high));
  }
  // Labels: the baseline first, then the front by throughput (then the rest with label_all), each at the
  // first free place around its point, further out with a leader line when the near ones are taken.
  std::vector<const PlotPoint*> labelled;
  for (const PlotPoint& p : points) {
    if (p.config->is_baseline) labelled.push_back(&p);
  }
  for (const PlotPoint* p : front) {
    if (!p->config->is_baseline) labelled.push_back(p);
  }
  if (label_all) {
    for (const PlotPoint& p : points) {
      if (std::find(labelled.begin(), labelled.end(), &p) == labelled.end()) labelled.push_back(&p);
    }
  }
  std::vector<Box> taken;
  for (const PlotPoint& p : points) {
    const double x = px(p.x.mean), y = py(p.y.mean), r = p.config->is_baseline ? 11 : 6;
    taken.push_back({x - r, y - r, x + r, y + r});
  }
  std::vector<WantedLabel> wanted;
  for (const PlotPoint* p : labelled) wanted.push_back({px(p->x.mean), py(p->y.mean), p->config->label, p->row});
  const std::string labels_svg = PlaceLabels(wanted, taken);
  // Drawn under the points, so a leader line never hides one.
  svg += "</g>\n" + labels_svg + "<g class=\"points\">\n";
  for (const PlotPoint& p : points) {
    const double x = px(p.x.mean), y = py(p.y.mean);
    const ConfigSummary& c = *p.config;
    if (c.is_baseline) svg += "<circle class=\"baseline\" cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"10\"/>";
    svg += "<circle class=\"config\" data-config=\"" + EscapeHtml(c.config_key) + "\" data-label=\"" +
           EscapeHtml(c.label) + Printf("\" data-row=\"%d\" data-x=\"%.17g\" data-y=\"%.17g\"", p.row, p.x.mean,
                                        p.y.mean) +
           " data-front=\"" + (c.on_front ? "true" : "false") + "\" data-feasible=\"" +
           (c.feasible ? "true" : "false") + "\" data-baseline=\"" + (c.is_baseline ? "true" : "false") +
           "\" cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"5\"><title>" + EscapeHtml(Tooltip(report, c, p.row)) +
           "</title></circle>\n";
  }
  if (points.empty()) {
    svg += "<text class=\"empty\" x=\"" + Px((kLeft + kRight) / 2) + "\" y=\"" + Px((kTop + kBottom) / 2) +
           "\" text-anchor=\"middle\">no configs with both throughput and " + EscapeHtml(report.parity.metric) +
           "</text>\n";
  }
  svg += "</g>\n";

  // Legend, right of the plot; its markers carry "key" classes, never "config".
  svg += Legend({{Dot("key key-front"), "on the Pareto front"},
                 {Dot("key key-dominated"), "feasible, dominated"},
                 {Dot("key key-infeasible"), "infeasible"},
                 {[](double x, double y) {
                    return "<circle class=\"key key-baseline\" cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"10\"/>";
                  },
                  "baseline"},
                 {Dash("key key-front-line"), "front (by throughput)"},
                 {Dash("key key-errorbar"), "95% interval of the mean"},
                 {[](double x, double y) {
                    return Printf("<path class=\"key clipped\" d=\"M%.2f,%.2f l-6,-4 v8 z\"/>", x + 4, y);
                  },
                  "interval cut at the edge"}});
  svg += "</svg>\n";
  return svg;
}

std::string RenderOnboardSvg(const Report& report, const OnboardView& view) {
  constexpr double kLeft = kPlotLeft, kRight = kPlotRight, kTop = kPlotTop, kBottom = kPlotBottom;
  std::vector<std::pair<double, double>> means;
  for (const OnboardPoint& p : view.points) means.emplace_back(p.latency_ms.mean, p.quality.mean);
  const std::pair<Axis, Axis> axes = FittedAxes(means);
  const Axis &x_axis = axes.first, &y_axis = axes.second;
  auto px = [&](double v) { return x_axis.ToPixel(v, kLeft, kRight); };
  auto py = [&](double v) { return y_axis.ToPixel(v, kBottom, kTop); };
  const auto change_of = [&](const ConfigSummary* c) -> const RankChange* {
    for (const RankChange& change : view.rank_changes) {
      if (change.config == c) return &change;
    }
    return nullptr;
  };
  const auto name_of = [](const OnboardPoint& p) { return p.config->label + " " + p.format; };

  std::string svg = Printf(
      "<svg class=\"plot onboard-plot\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" "
      "width=\"%.0f\" height=\"%.0f\" role=\"img\" aria-label=\"onboard latency versus %s\">\n",
      kPlotWidth, kPlotHeight, kPlotWidth, kPlotHeight, EscapeHtml(view.quality_metric).c_str());
  svg += Axes(x_axis, y_axis, kLeft, kRight, kTop, kBottom,
              Printf("latency at batch %d, %d thread%s (ms, lower is better)", view.batch, view.threads,
                     view.threads == 1 ? "" : "s"),
              view.quality_metric + " in the format (higher is better)");
  std::vector<const OnboardPoint*> front;
  for (const OnboardPoint& p : view.points) {
    if (p.on_front) front.push_back(&p);
  }
  std::sort(front.begin(), front.end(),
            [](const OnboardPoint* a, const OnboardPoint* b) { return a->latency_ms.mean < b->latency_ms.mean; });
  std::string front_points;
  for (const OnboardPoint* p : front) {
    front_points += (front_points.empty() ? "" : " ") + Px(px(p->latency_ms.mean)) + "," + Px(py(p->quality.mean));
  }
  svg += "<polyline class=\"onboard-front\" points=\"" + front_points + "\"/>\n<g class=\"errorbars\">\n";
  std::vector<Box> taken;
  std::vector<WantedLabel> wanted;
  for (const OnboardPoint& p : view.points) {
    const double x = px(p.latency_ms.mean), y = py(p.quality.mean);
    svg += ErrorBars(x, y, px(p.latency_ms.ci_low), px(p.latency_ms.ci_high), py(p.quality.ci_low),
                     py(p.quality.ci_high));
    taken.push_back({x - 8, y - 8, x + 8, y + 8});
    if (p.on_front || change_of(p.config) != nullptr) wanted.push_back({x, y, name_of(p), p.row});
  }
  svg += "</g>\n" + PlaceLabels(wanted, taken) + "<g class=\"points\">\n";
  for (const OnboardPoint& p : view.points) {
    const double x = px(p.latency_ms.mean), y = py(p.quality.mean);
    const RankChange* change = change_of(p.config);
    std::string tooltip = Printf("#%d %s\n%s\n", p.row, name_of(p).c_str(), p.config->config_key.c_str());
    for (const auto& [name, s] : {std::pair<std::string, std::optional<MetricSummary>>{"latency_ms", p.latency_ms},
                                  {view.quality_metric, p.quality},
                                  {"latency_p99_ms", p.latency_p99_ms},
                                  {"size_bytes", p.size_bytes}}) {
      if (!s) continue;
      tooltip += s->n >= 2 ? Printf("%s: %.5g [%.5g, %.5g] (n=%d)\n", name.c_str(), s->mean, s->ci_low, s->ci_high, s->n)
                           : Printf("%s: %.5g (n=%d)\n", name.c_str(), s->mean, s->n);
    }
    tooltip += std::string(p.on_front ? "on the onboard front" : "not on the onboard front") +
               (p.config->on_front ? "; on the training front" : "; not on the training front");
    if (!p.config->feasible) tooltip += "\ninfeasible: " + p.config->infeasible_reason;
    if (change != nullptr) tooltip += "\n" + change->text;
    for (const OnboardConfig& c : view.configs) {
      if (c.config == p.config && p.format == "int8") tooltip += "\n" + QuantizationLine(report, view, c);
    }
    const std::string moved = change == nullptr ? "" : change->onboard ? "onboard" : "training";
    if (change != nullptr) {
      svg += "<circle class=\"moved-ring " + moved + "\" cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"9\"/>";
    }
    svg += "<circle class=\"onboard-point " + EscapeHtml(p.format) + "\" data-config=\"" +
           EscapeHtml(p.config->config_key) + "\" data-format=\"" + EscapeHtml(p.format) +
           Printf("\" data-row=\"%d\" data-x=\"%.17g\" data-y=\"%.17g\"", p.row, p.latency_ms.mean, p.quality.mean) +
           " data-front=\"" + (p.on_front ? "true" : "false") + "\" data-feasible=\"" +
           (p.config->feasible ? "true" : "false") + "\" data-moved=\"" + moved + "\" cx=\"" + Px(x) + "\" cy=\"" +
           Px(y) + "\" r=\"5\"><title>" + EscapeHtml(tooltip) + "</title></circle>\n";
  }
  svg += "</g>\n";
  std::vector<std::pair<LegendMarker, std::string>> keys;
  for (const char* format : kDeployFormats) {  // the formats measured
    if (std::any_of(view.points.begin(), view.points.end(), [&](const OnboardPoint& p) { return p.format == format; })) {
      keys.push_back({Dot("key key-onboard " + std::string(format)), format});
    }
  }
  keys.insert(keys.end(), {{Dot("key key-onboard-front"), "on the onboard front"},
                 {Dot("key key-onboard-infeasible"), "infeasible"},
                 {[](double x, double y) {
                    return "<circle class=\"key moved-ring onboard\" cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"9\"/>";
                  },
                  "onboard front only"},
                 {[](double x, double y) {
                    return "<circle class=\"key moved-ring training\" cx=\"" + Px(x) + "\" cy=\"" + Px(y) + "\" r=\"9\"/>";
                  },
                  "training front only"},
                 {Dash("key key-onboard-front-line"), "onboard front (by latency)"},
                 {Dash("key key-errorbar"), "95% interval of the mean"}});
  svg += Legend(keys);
  return svg + "</svg>\n";
}

std::string RenderLearningCurves(const Report& report) {
  constexpr double kWidth = 900, kHeight = 420;
  constexpr double kLeft = 90, kRight = 640, kTop = 20, kBottom = 350;
  std::vector<const ConfigSummary*> shown;
  for (const ConfigSummary& c : report.configs) {
    if ((c.is_baseline || c.on_front) && !c.curve.empty()) shown.push_back(&c);
  }
  if (shown.empty()) return "";
  double x_high = 0, y_low = std::numeric_limits<double>::infinity(), y_high = -y_low;
  for (const ConfigSummary* c : shown) {
    for (const CurvePoint& p : c->curve) {
      x_high = std::max(x_high, p.train_time_s);
      y_low = std::min(y_low, p.value);
      y_high = std::max(y_high, p.value);
    }
  }
  if (report.time_to_target_goal) {
    y_low = std::min(y_low, *report.time_to_target_goal);
    y_high = std::max(y_high, *report.time_to_target_goal);
  }
  const Axis x_axis = FittedAxis(0, x_high), y_axis = FittedAxis(y_low, y_high);
  auto px = [&](double v) { return x_axis.ToPixel(v, kLeft, kRight); };
  auto py = [&](double v) { return y_axis.ToPixel(v, kBottom, kTop); };
  std::string svg = Printf(
      "<svg class=\"plot curves\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" width=\"%.0f\" "
      "height=\"%.0f\" role=\"img\" aria-label=\"learning curves\">\n",
      kWidth, kHeight, kWidth, kHeight);
  svg += Axes(x_axis, y_axis, kLeft, kRight, kTop, kBottom, "summed step time (s)", report.parity.metric);
  if (report.time_to_target_goal) {
    const double y = py(*report.time_to_target_goal);
    svg += "<line class=\"target\" x1=\"" + Px(kLeft) + "\" y1=\"" + Px(y) + "\" x2=\"" + Px(kRight) + "\" y2=\"" +
           Px(y) + "\"/><text class=\"target-label\" x=\"" + Px(kRight - 4) + "\" y=\"" + Px(y - 5) +
           "\" text-anchor=\"end\">" + EscapeHtml(Printf("target %.4g", *report.time_to_target_goal)) + "</text>\n";
  }
  double ly = kTop + 10;
  for (size_t i = 0; i < shown.size(); ++i) {
    const ConfigSummary& c = *shown[i];
    std::string points;
    for (const CurvePoint& p : c.curve) points += (points.empty() ? "" : " ") + Px(px(p.train_time_s)) + "," + Px(py(p.value));
    svg += std::string("<polyline class=\"curve\" data-config=\"") + EscapeHtml(c.config_key) + "\" stroke=\"" +
           SeriesColor(i) + "\" points=\"" + points + "\"><title>" + EscapeHtml(c.label) + "</title></polyline>\n";
    for (const CurvePoint& p : c.curve) {
      svg += Printf("<circle class=\"curve-point\" fill=\"%s\" cx=\"%.2f\" cy=\"%.2f\" r=\"3\"><title>", SeriesColor(i),
                    px(p.train_time_s), py(p.value)) +
             EscapeHtml(Printf("%s: %.4f after %.1f s (mean of %d seeds)", c.label.c_str(), p.value, p.train_time_s, p.n)) +
             "</title></circle>";
    }
    auto ttt = c.metrics.find("time_to_target_s");
    std::string legend = c.label;
    if (ttt != c.metrics.end() && report.time_to_target_goal) {
      svg += Printf("<circle class=\"ttt\" stroke=\"%s\" cx=\"%.2f\" cy=\"%.2f\" r=\"6\"><title>", SeriesColor(i),
                    px(ttt->second.mean), py(*report.time_to_target_goal)) +
             EscapeHtml(Printf("%s reached the target after %.1f s of step time (mean of %d seeds)", c.label.c_str(),
                               ttt->second.mean, ttt->second.n)) +
             "</title></circle>";
      legend += Printf(" (target at %.1f s)", ttt->second.mean);
    } else if (report.time_to_target_goal) {
      legend += " (target not reached)";
    }
    svg += Printf("\n<line class=\"key\" stroke=\"%s\" stroke-width=\"3\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>",
                  SeriesColor(i), kRight + 20, ly, kRight + 40, ly) +
           "<text class=\"legend-label\" x=\"" + Px(kRight + 46) + "\" y=\"" + Px(ly + 4) + "\">" + EscapeHtml(legend) +
           "</text>\n";
    ly += 20;
  }
  svg += "</svg>\n";
  return svg;
}

std::string RenderStepTimes(const Report& report, const std::vector<bool>& drawn) {
  struct Row {
    const ConfigSummary* c;
    double p10, median, p90;
  };
  std::vector<Row> rows;
  for (const ConfigSummary& c : report.configs) {
    if (!drawn.empty() && !drawn[&c - report.configs.data()]) continue;
    auto p10 = c.metrics.find("step_time_ms.p10"), median = c.metrics.find("step_time_ms"),
         p90 = c.metrics.find("step_time_ms.p90");
    if (p10 == c.metrics.end() || median == c.metrics.end() || p90 == c.metrics.end()) continue;
    rows.push_back({&c, p10->second.mean, median->second.mean, p90->second.mean});
  }
  if (rows.empty()) return "";
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.median < b.median; });
  constexpr double kLeft = 300, kRight = 860, kTop = 10, kRowHeight = 22;
  const double bottom = kTop + kRowHeight * rows.size(), height = bottom + 50;
  double high = 0;
  for (const Row& r : rows) high = std::max(high, r.p90);
  const Axis axis = FittedAxis(0, high);
  auto px = [&](double v) { return axis.ToPixel(v, kLeft, kRight); };
  std::string svg = Printf(
      "<svg class=\"plot step-times\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 900 %.0f\" width=\"900\" "
      "height=\"%.0f\" role=\"img\" aria-label=\"step time distribution\">\n",
      height, height);
  for (double v = axis.first_tick(); v <= axis.high + axis.step * 1e-9; v += axis.step) {
    svg += "<line class=\"grid\" x1=\"" + Px(px(v)) + "\" y1=\"" + Px(kTop) + "\" x2=\"" + Px(px(v)) + "\" y2=\"" +
           Px(bottom) + "\"/><text class=\"tick-label x\" x=\"" + Px(px(v)) + "\" y=\"" + Px(bottom + 16) +
           "\" text-anchor=\"middle\">" + Tick(v, axis.step) + "</text>\n";
  }
  svg += "<text class=\"axis-label\" x=\"" + Px((kLeft + kRight) / 2) + "\" y=\"" + Px(bottom + 38) +
         "\" text-anchor=\"middle\">step time (ms): p10 to p90, median marked</text>\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double y = kTop + kRowHeight * (i + 0.5);
    svg += "<g class=\"step-time\" data-config=\"" + EscapeHtml(r.c->config_key) + "\"><title>" +
           EscapeHtml(Printf("%s: p10 %.2f ms, median %.2f ms, p90 %.2f ms (means over seeds)", r.c->label.c_str(),
                             r.p10, r.median, r.p90)) +
           "</title><text class=\"row-label\" x=\"" + Px(kLeft - 8) + "\" y=\"" + Px(y + 4) + "\" text-anchor=\"end\">" +
           EscapeHtml(r.c->label) + "</text><rect class=\"spread\" x=\"" + Px(px(r.p10)) + "\" y=\"" + Px(y - 5) +
           "\" width=\"" + Px(std::max(1.0, px(r.p90) - px(r.p10))) + "\" height=\"10\"/><line class=\"median\" x1=\"" +
           Px(px(r.median)) + "\" y1=\"" + Px(y - 8) + "\" x2=\"" + Px(px(r.median)) + "\" y2=\"" + Px(y + 8) +
           "\"/></g>\n";
  }
  svg += "</svg>\n";
  return svg;
}

std::string RenderProfileBars(const Report& report) {
  std::vector<const ConfigSummary*> rows;
  std::vector<std::string> classes;
  for (const ConfigSummary& c : report.configs) {
    if (c.profile_shares.empty()) continue;
    rows.push_back(&c);
    for (const auto& [name, share] : c.profile_shares) {
      if (std::find(classes.begin(), classes.end(), name) == classes.end()) classes.push_back(name);
    }
  }
  if (rows.empty()) return "";
  constexpr double kLeft = 300, kRight = 860, kTop = 10, kRowHeight = 24;
  const double bottom = kTop + kRowHeight * rows.size(), height = bottom + 40;
  std::string svg = Printf(
      "<svg class=\"plot profile-bars\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 900 %.0f\" "
      "width=\"900\" height=\"%.0f\" role=\"img\" aria-label=\"profiled time by operator class\">\n",
      height, height);
  for (size_t i = 0; i < rows.size(); ++i) {
    const double y = kTop + kRowHeight * i + 3;
    svg += "<text class=\"row-label\" x=\"" + Px(kLeft - 8) + "\" y=\"" + Px(y + 13) + "\" text-anchor=\"end\">" +
           EscapeHtml(rows[i]->label) + "</text>";
    double x = kLeft;
    for (size_t k = 0; k < classes.size(); ++k) {
      auto it = rows[i]->profile_shares.find(classes[k]);
      if (it == rows[i]->profile_shares.end() || it->second <= 0) continue;
      const double w = it->second * (kRight - kLeft);
      svg += "<rect class=\"share\" data-class=\"" + EscapeHtml(classes[k]) + "\" fill=\"" + SeriesColor(k) +
             "\" x=\"" + Px(x) + "\" y=\"" + Px(y) + "\" width=\"" + Px(w) + "\" height=\"18\"><title>" +
             EscapeHtml(Printf("%s: %s %.0f%% of profiled time", rows[i]->label.c_str(), classes[k].c_str(),
                               100 * it->second)) +
             "</title></rect>";
      x += w;
    }
    svg += "\n";
  }
  double lx = kLeft;
  for (size_t k = 0; k < classes.size(); ++k) {
    svg += std::string("<rect class=\"key\" fill=\"") + SeriesColor(k) + "\" x=\"" + Px(lx) + "\" y=\"" +
           Px(bottom + 12) + "\" width=\"12\" height=\"12\"/><text class=\"legend-label\" x=\"" + Px(lx + 16) +
           "\" y=\"" + Px(bottom + 22) + "\">" + EscapeHtml(classes[k]) + "</text>";
    lx += 26 + TextWidth(classes[k]);
  }
  svg += "\n</svg>\n";
  return svg;
}

}  // namespace frontier
