#include "server/analysis/parity.h"

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

// The per-seed differences variant - baseline, when both completed the same seeds (at least 2).
std::optional<std::vector<double>> PairedDifferences(const std::map<int64_t, double>& variant,
                                                     const std::map<int64_t, double>& baseline) {
  if (variant.size() < 2 || variant.size() != baseline.size()) return std::nullopt;
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

std::string PairedParityVerdict(const std::map<int64_t, double>& variant,
                                const std::map<int64_t, double>& baseline, double margin,
                                bool lower_is_better) {
  const std::optional<std::vector<double>> d = PairedDifferences(variant, baseline);
  if (!d) return "inconclusive";
  const MetricSummary s = SummarizeMetric(*d);
  const double half = MeanHalfWidth(s, kOneSidedQuantile);
  return VerdictFromBounds(Interval{s.mean, s.mean - half, s.mean + half, s.n, s.n}, margin, lower_is_better);
}

std::string ParityVerdict(const MetricSummary& variant, const MetricSummary& baseline, double margin,
                          bool lower_is_better) {
  const Interval bounds = WelchInterval(variant, baseline, kOneSidedQuantile);  // its ends: one-sided bounds
  if (variant.n < 2 || baseline.n < 2) return "inconclusive";
  return VerdictFromBounds(bounds, margin, lower_is_better);
}

}  // namespace frontier
