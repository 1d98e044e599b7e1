// Parity of a variant's quality with the baseline's: non-inferiority verdicts
// from Welch (unpaired) or paired-by-seed one-sided 95% bounds against a
// margin, and the paired difference interval. Pure functions. Definitions:
// docs/report.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/analysis/statistics.h"

namespace frontier {

// Non-inferiority verdict of a variant's quality metric against the baseline's:
// with gain = variant - baseline (baseline - variant when `lower_is_better`),
// "at parity" when the one-sided 95% Welch lower bound of the gain is above
// -margin, "worse" when the one-sided 95% upper bound is below -margin,
// "inconclusive" otherwise and whenever either side has fewer than 2 values.
// Requires n >= 1 on both sides (throws std::invalid_argument otherwise).
// `one_sided_quantile` is that of the bounds: kOneSidedQuantile (95%), or
// SequentialOneSidedQuantile's when a verdict is looked at several times.
std::string ParityVerdict(const MetricSummary& variant, const MetricSummary& baseline, double margin,
                          bool lower_is_better, double one_sided_quantile = kOneSidedQuantile);

// Paired by seed: the differences variant - baseline over the variant's
// completed seeds. nullopt unless the baseline completed every one of them
// (it may have more) and there are at least 2.
// The interval is two-sided 95% (Student t on the differences, n - 1 degrees
// of freedom); the point value when the differences have no spread.
std::optional<Interval> PairedDifferenceInterval(const std::map<int64_t, double>& variant,
                                                 const std::map<int64_t, double>& baseline);
// The parity verdict on paired differences (same rule as ParityVerdict, with
// one-sided 95% bounds of the mean difference); "inconclusive" unless
// PairedDifferenceInterval applies.
std::string PairedParityVerdict(const std::map<int64_t, double>& variant,
                                const std::map<int64_t, double>& baseline, double margin,
                                bool lower_is_better, double one_sided_quantile = kOneSidedQuantile);

// The quantile of each one-sided bound when a verdict may be looked at
// `looks` times as seeds are added (adaptive seeds): alpha 0.05 split evenly
// over the looks (Bonferroni), 1 - 0.05 / looks, so the chance of a false
// "at parity" over every look stays at most 5%. 0.95 for one look.
double SequentialOneSidedQuantile(int looks);

// A variant's quality against the baseline's, per seed, by the experiment's
// rule: paired by seed when `paired` and PairedDifferenceInterval applies,
// else Welch over the seeds' values. The one home of that choice (the report
// and adaptive seeding both decide with it).
struct QualityComparison {
  std::string verdict = "inconclusive";  // at parity, worse, inconclusive
  std::string test;                      // paired, welch; empty when a side has no value
  std::optional<Interval> delta;         // variant - baseline, two-sided 95%
  // The one-sided bounds of variant - baseline the verdict was decided on (low and high, each at
  // `one_sided_quantile`); nullopt when a side had fewer than 2 values (then "inconclusive").
  std::optional<Interval> bounds;
};
QualityComparison CompareQuality(const std::map<int64_t, double>& variant,
                                 const std::map<int64_t, double>& baseline, bool paired, double margin,
                                 bool lower_is_better, double one_sided_quantile = kOneSidedQuantile);

}  // namespace frontier
