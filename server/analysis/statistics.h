// Statistics over the seeds of a configuration and comparisons of two
// configurations' means: Student-t quantiles, the mean with its 95% interval,
// Welch's difference interval and the intervals of ratios (speed-ups, ratio
// metrics, geometric means: all on the log scale, never below 0). Pure
// functions. Definitions: docs/report.md.
#pragma once

#include <optional>
#include <vector>

namespace frontier {

// Quantiles of the 95% intervals and bounds.
inline constexpr double kTwoSidedQuantile = 0.975;  // two-sided 95% intervals
inline constexpr double kOneSidedQuantile = 0.95;   // one-sided 95% bounds (parity)

// Mean and spread of one metric over the seeds of a configuration.
struct MetricSummary {
  int n = 0;
  double mean = 0;
  double std = 0;      // sample standard deviation (0 when n < 2)
  double ci_low = 0;   // two-sided 95% Student-t interval of the mean
  double ci_high = 0;  // (equal to the mean when n < 2)
};

// An estimate with a 95% interval.
struct Interval {
  double value = 0, low = 0, high = 0;
  int n_variant = 0, n_baseline = 0;
};

// Mean, sample standard deviation and 95% Student-t interval of the mean.
MetricSummary SummarizeMetric(const std::vector<double>& values);

// Quantile of Student's t distribution with `df` degrees of freedom (p in (0,1)).
// `df` may be fractional, or +infinity for the normal quantile. Throws
// std::invalid_argument unless 0 < p < 1 and df > 0.
double StudentTQuantile(double p, double df);

// Half-width of the Student-t bound at quantile `p` of a summary's mean (n - 1
// degrees of freedom); 0 when n < 2 or without spread.
double MeanHalfWidth(const MetricSummary& summary, double p);

// Difference of means variant - baseline, value ± t(quantile, Welch-Satterthwaite
// df) * Welch's standard error: `quantile` kTwoSidedQuantile gives the two-sided
// 95% interval, kOneSidedQuantile the two one-sided 95% bounds. The point value
// when either side has fewer than 2 values or both have zero spread. Requires
// n >= 1 on both sides (throws std::invalid_argument otherwise).
Interval WelchInterval(const MetricSummary& variant, const MetricSummary& baseline, double quantile);

// Difference of means variant - baseline with Welch's two-sided 95% interval
// (the point value when either side has fewer than 2 values or both have zero
// spread). Requires n >= 1 on both sides (throws std::invalid_argument otherwise).
Interval DifferenceInterval(const MetricSummary& variant, const MetricSummary& baseline);

// Throughput ratio R = variant mean / baseline mean with a two-sided 95%
// interval computed on the log scale (the delta method for log R):
// SE(log R) = sqrt(a + b), a = s_v^2 / (n_v m_v^2), b = s_b^2 / (n_b m_b^2),
// Welch-Satterthwaite degrees of freedom on those two terms, and the interval
// R exp(-+t(0.975, df) SE(log R)): always positive, containing R, and the
// reciprocal of the swapped comparison's. The interval is the point value when
// either side has fewer than 2 values (no variance), the variant's mean is 0,
// or both have zero spread. nullopt when the baseline mean is not positive or
// the variant's is negative. Requires n >= 1 on both sides (throws
// std::invalid_argument otherwise).
std::optional<Interval> SpeedupInterval(const MetricSummary& variant, const MetricSummary& baseline);

// Summary of a metric that is itself a ratio (an op's speed-up): the mean and
// sample standard deviation as SummarizeMetric, the 95% interval of the mean
// on the log scale as SpeedupInterval's (delta method): mean
// exp(-+t(0.975, n - 1) s / (sqrt(n) mean)), so it stays positive. Values with
// a mean that is not positive get SummarizeMetric's interval.
MetricSummary SummarizeRatio(const std::vector<double>& values);

// Geometric mean of positive ratios with the two-sided 95% Student-t interval
// of the mean of their logs (n - 1 degrees of freedom), exponentiated: always
// positive. n_variant = n_baseline = the number of ratios; the point value with
// fewer than 2 ratios or no spread. nullopt when `ratios` is empty or one is
// not positive.
std::optional<Interval> GeometricMeanInterval(const std::vector<double>& ratios);

}  // namespace frontier
