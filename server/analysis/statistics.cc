#include "server/analysis/statistics.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

namespace frontier {
namespace {

// Beyond this many degrees of freedom the t quantile is the normal one (they
// differ by less than 1e-6 there).
constexpr double kNormalDegreesOfFreedom = 1e7;

// Continued fraction of the incomplete beta function, modified Lentz method
// (Numerical Recipes, betacf). Converges fast for x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr int kMaxIterations = 200000;
  constexpr double kEpsilon = 1e-15;
  constexpr double kTiny = 1e-300;
  auto guard = [](double v) { return std::fabs(v) < kTiny ? kTiny : v; };
  const double qab = a + b, qap = a + 1, qam = a - 1;
  double c = 1;
  double d = 1 / guard(1 - qab * x / qap);
  double h = d;
  for (int m = 1; m <= kMaxIterations; ++m) {
    const double m2 = 2.0 * m;
    double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
    d = 1 / guard(1 + aa * d);
    c = guard(1 + aa / c);
    h *= d * c;
    aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
    d = 1 / guard(1 + aa * d);
    c = guard(1 + aa / c);
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < kEpsilon) break;
  }
  return h;
}

// Regularized incomplete beta function I_x(a, b).
double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1) / (a + b + 2)) return front * BetaContinuedFraction(a, b, x) / a;
  return 1 - front * BetaContinuedFraction(b, a, 1 - x) / b;
}

// P(T > t) for t >= 0 and Student's t with `df` degrees of freedom.
double StudentTUpperTail(double t, double df) {
  if (df > kNormalDegreesOfFreedom) return 0.5 * std::erfc(t / std::sqrt(2.0));
  return 0.5 * RegularizedIncompleteBeta(df / 2, 0.5, 1 / (1 + t * t / df));
}

double StudentTQuantileUncached(double p, double df) {
  // Solve P(T > t) = tail for t >= 0 by bisection; the tail is decreasing in t.
  const double tail = p < 0.5 ? p : 1 - p;
  double low = 0, high = 1;
  while (StudentTUpperTail(high, df) > tail) {
    low = high;
    high *= 2;
  }
  for (int i = 0; i < 200 && high - low > 1e-14 * high; ++i) {
    const double mid = (low + high) / 2;
    if (StudentTUpperTail(mid, df) > tail) {
      low = mid;
    } else {
      high = mid;
    }
  }
  const double t = (low + high) / 2;
  return p < 0.5 ? -t : t;
}

// The power of two 2^k <= |x| < 2^(k+1) (1 for 0 and non-finite x). Values
// divided by it are exact and near 1, so that their squares neither overflow
// (1e200 squared) nor underflow (1e-200 squared), and a result multiplied
// back is bit for bit what the unscaled arithmetic gives wherever that one
// neither overflows nor underflows.
double PowerOfTwoScale(double x) { return std::isfinite(x) && x != 0 ? std::ldexp(1.0, std::ilogb(x)) : 1.0; }

// Welch-Satterthwaite degrees of freedom of a sum of two variance terms, each
// estimated from n - 1 degrees of freedom (scale-free: the terms are scaled first).
double WelchDegreesOfFreedom(double term_v, int n_v, double term_b, int n_b) {
  const double scale = PowerOfTwoScale(std::fmax(term_v, term_b));
  term_v /= scale;
  term_b /= scale;
  const double sum = term_v + term_b;
  return sum * sum / (term_v * term_v / (n_v - 1) + term_b * term_b / (n_b - 1));
}

// A symmetric interval value ± t(quantile, df) * se; the point when se == 0.
// An infinite or undefined se or df (a spread beyond the largest double)
// bounds nothing: the interval is infinite, and so every verdict on it inconclusive.
Interval SymmetricInterval(double value, double se, double df, double quantile, int n_v, int n_b) {
  double half = 0;
  if (!std::isfinite(se) || !(df > 0)) {
    half = std::numeric_limits<double>::infinity();
  } else if (se > 0) {
    half = StudentTQuantile(quantile, df) * se;
  }
  return Interval{value, value - half, value + half, n_v, n_b};
}

void RequireData(const MetricSummary& variant, const MetricSummary& baseline) {
  if (variant.n < 1 || baseline.n < 1) throw std::invalid_argument("a comparison needs n >= 1 on both sides");
}

}  // namespace

MetricSummary SummarizeMetric(const std::vector<double>& values) {
  MetricSummary summary;
  summary.n = static_cast<int>(values.size());
  if (values.empty()) return summary;
  // Scaled (PowerOfTwoScale) so that neither the sum nor the squares overflow or underflow.
  double largest = 0;
  for (double v : values) largest = std::fmax(largest, std::fabs(v));
  const double scale = PowerOfTwoScale(largest);
  double sum = 0;
  for (double v : values) sum += v / scale;
  const double scaled_mean = sum / summary.n;
  summary.mean = scaled_mean * scale;
  summary.ci_low = summary.ci_high = summary.mean;
  if (summary.n < 2) return summary;
  double spread = 0;
  for (double v : values) spread = std::fmax(spread, std::fabs(v / scale - scaled_mean));
  const double spread_scale = PowerOfTwoScale(spread);
  double squares = 0;
  for (double v : values) {
    const double deviation = (v / scale - scaled_mean) / spread_scale;
    squares += deviation * deviation;
  }
  summary.std = std::sqrt(squares / (summary.n - 1)) * spread_scale * scale;
  const double half = MeanHalfWidth(summary, kTwoSidedQuantile);
  summary.ci_low = summary.mean - half;
  summary.ci_high = summary.mean + half;
  return summary;
}

double StudentTQuantile(double p, double df) {
  if (!(p > 0 && p < 1) || !(df > 0)) {
    char message[128];
    std::snprintf(message, sizeof(message), "StudentTQuantile needs 0 < p < 1 and df > 0 (p=%g, df=%g)", p,
                  df);
    throw std::invalid_argument(message);
  }
  if (p == 0.5) return 0;
  // Summaries over seeds ask for the same few (p, integer df) again and again.
  thread_local std::map<std::pair<double, double>, double> memo;
  const bool memoize = df == std::floor(df) && df <= 10000;
  if (memoize) {
    auto it = memo.find({p, df});
    if (it != memo.end()) return it->second;
  }
  const double t = StudentTQuantileUncached(p, df);
  if (memoize && memo.size() < 4096) memo.emplace(std::make_pair(p, df), t);
  return t;
}

double MeanHalfWidth(const MetricSummary& s, double p) {
  return s.n < 2 || s.std == 0 ? 0
                               : StudentTQuantile(p, s.n - 1) * s.std / std::sqrt(static_cast<double>(s.n));
}

Interval WelchInterval(const MetricSummary& variant, const MetricSummary& baseline, double quantile) {
  RequireData(variant, baseline);
  const double diff = variant.mean - baseline.mean;
  if (variant.n < 2 || baseline.n < 2) return Interval{diff, diff, diff, variant.n, baseline.n};
  const double scale = PowerOfTwoScale(std::fmax(variant.std, baseline.std));
  const double std_v = variant.std / scale, std_b = baseline.std / scale;
  const double term_v = std_v * std_v / variant.n;
  const double term_b = std_b * std_b / baseline.n;
  if (term_v + term_b == 0) return Interval{diff, diff, diff, variant.n, baseline.n};
  return SymmetricInterval(diff, std::sqrt(term_v + term_b) * scale,
                           WelchDegreesOfFreedom(term_v, variant.n, term_b, baseline.n), quantile, variant.n,
                           baseline.n);
}

Interval DifferenceInterval(const MetricSummary& variant, const MetricSummary& baseline) {
  return WelchInterval(variant, baseline, kTwoSidedQuantile);
}

std::optional<Interval> SpeedupInterval(const MetricSummary& variant, const MetricSummary& baseline) {
  RequireData(variant, baseline);
  if (!(baseline.mean > 0) || variant.mean < 0) return std::nullopt;
  const double ratio = variant.mean / baseline.mean;
  if (variant.n < 2 || baseline.n < 2 || variant.mean == 0) {
    return Interval{ratio, ratio, ratio, variant.n, baseline.n};
  }
  // Squared coefficients of variation of the two means: the variances of their logs
  // (each side scaled by its own PowerOfTwoScale, which cancels in the ratio).
  const auto log_variance = [](const MetricSummary& s) {
    const double scale = PowerOfTwoScale(std::fmax(s.std, s.mean));
    const double std = s.std / scale, mean = s.mean / scale;
    return std * std / (s.n * mean * mean);
  };
  const double term_v = log_variance(variant);
  const double term_b = log_variance(baseline);
  if (term_v + term_b == 0) return Interval{ratio, ratio, ratio, variant.n, baseline.n};
  const Interval log_ratio = SymmetricInterval(std::log(ratio), std::sqrt(term_v + term_b),
                                               WelchDegreesOfFreedom(term_v, variant.n, term_b, baseline.n),
                                               kTwoSidedQuantile, variant.n, baseline.n);
  return Interval{ratio, std::exp(log_ratio.low), std::exp(log_ratio.high), variant.n, baseline.n};
}

MetricSummary SummarizeRatio(const std::vector<double>& values) {
  MetricSummary summary = SummarizeMetric(values);
  if (summary.n < 2 || summary.std == 0 || !(summary.mean > 0)) return summary;
  const double half = MeanHalfWidth(summary, kTwoSidedQuantile) / summary.mean;  // on the log scale
  summary.ci_low = summary.mean * std::exp(-half);
  summary.ci_high = summary.mean * std::exp(half);
  return summary;
}

std::optional<Interval> GeometricMeanInterval(const std::vector<double>& ratios) {
  if (ratios.empty()) return std::nullopt;
  std::vector<double> logs;
  logs.reserve(ratios.size());
  for (double r : ratios) {
    if (!(r > 0)) return std::nullopt;
    logs.push_back(std::log(r));
  }
  const MetricSummary s = SummarizeMetric(logs);
  return Interval{std::exp(s.mean), std::exp(s.ci_low), std::exp(s.ci_high), s.n, s.n};
}

}  // namespace frontier
