#include "server/analysis/parity.h"

#include <stdexcept>
#include <vector>

namespace frontier {
namespace {

// The non-inferiority verdict from one-sided bounds of variant - baseline: the
// gain in quality, negated when lower is better, against -margin.
std::string VerdictFromBounds(const Interval& bounds, double margin, bool lower_is_better) {
  const double gain_low = lower_is_better ? -bounds.high : bounds.low;
  const double gain_high = lower_is_better ? -bounds.low : bounds.high;
  if (gain_low > -margin) return "at parity";
  if (gain_high < -margin) return "worse";
  return "inconclusive";
}

// The per-seed differences variant - baseline over the variant's seeds, when
// the baseline completed each of them (at least 2; the baseline may have more,
// added by adaptive seeding for other configurations).
std::optional<std::vector<double>> PairedDifferences(const std::map<int64_t, double>& variant,
                                                     const std::map<int64_t, double>& baseline) {
  if (variant.size() < 2) return std::nullopt;
  std::vector<double> d;
  for (const auto& [seed, value] : variant) {
    auto b = baseline.find(seed);
    if (b == baseline.end()) return std::nullopt;
    d.push_back(value - b->second);
  }
  return d;
}

}  // namespace

std::optional<Interval> PairedDifferenceInterval(const std::map<int64_t, double>& variant,
                                                 const std::map<int64_t, double>& baseline) {
  const std::optional<std::vector<double>> d = PairedDifferences(variant, baseline);
  if (!d) return std::nullopt;
  const MetricSummary s = SummarizeMetric(*d);
  return Interval{s.mean, s.ci_low, s.ci_high, s.n, s.n};
}

namespace {

// The one-sided bounds of the paired differences' mean at `one_sided_quantile` each.
std::optional<Interval> PairedBounds(const std::map<int64_t, double>& variant,
                                     const std::map<int64_t, double>& baseline, double one_sided_quantile) {
  const std::optional<std::vector<double>> d = PairedDifferences(variant, baseline);
  if (!d) return std::nullopt;
  const MetricSummary s = SummarizeMetric(*d);
  const double half = MeanHalfWidth(s, one_sided_quantile);
  return Interval{s.mean, s.mean - half, s.mean + half, s.n, s.n};
}

}  // namespace

std::string PairedParityVerdict(const std::map<int64_t, double>& variant,
                                const std::map<int64_t, double>& baseline, double margin,
                                bool lower_is_better, double one_sided_quantile) {
  const std::optional<Interval> bounds = PairedBounds(variant, baseline, one_sided_quantile);
  return bounds ? VerdictFromBounds(*bounds, margin, lower_is_better) : "inconclusive";
}

std::string ParityVerdict(const MetricSummary& variant, const MetricSummary& baseline, double margin,
                          bool lower_is_better, double one_sided_quantile) {
  const Interval bounds = WelchInterval(variant, baseline, one_sided_quantile);  // its ends: one-sided bounds
  if (variant.n < 2 || baseline.n < 2) return "inconclusive";
  return VerdictFromBounds(bounds, margin, lower_is_better);
}

double SequentialOneSidedQuantile(int looks) {
  if (looks < 1) throw std::invalid_argument("SequentialOneSidedQuantile: looks must be at least 1");
  return 1.0 - (1.0 - kOneSidedQuantile) / looks;
}

QualityComparison CompareQuality(const std::map<int64_t, double>& variant,
                                 const std::map<int64_t, double>& baseline, bool paired, double margin,
                                 bool lower_is_better, double one_sided_quantile) {
  QualityComparison comparison;
  if (paired) {
    if (std::optional<Interval> delta = PairedDifferenceInterval(variant, baseline)) {
      comparison.test = "paired";
      comparison.delta = delta;
      comparison.bounds = PairedBounds(variant, baseline, one_sided_quantile);  // present with the delta
      comparison.verdict = VerdictFromBounds(*comparison.bounds, margin, lower_is_better);
      return comparison;
    }
  }
  if (variant.empty() || baseline.empty()) return comparison;
  const auto summary = [](const std::map<int64_t, double>& by_seed) {
    std::vector<double> values;
    for (const auto& [seed, value] : by_seed) values.push_back(value);
    return SummarizeMetric(values);
  };
  const MetricSummary v = summary(variant), b = summary(baseline);
  comparison.test = "welch";
  comparison.delta = DifferenceInterval(v, b);
  if (v.n >= 2 && b.n >= 2) {  // else "inconclusive", as ParityVerdict says
    comparison.bounds = WelchInterval(v, b, one_sided_quantile);
    comparison.verdict = VerdictFromBounds(*comparison.bounds, margin, lower_is_better);
  }
  return comparison;
}

}  // namespace frontier
