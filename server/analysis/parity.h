// Parity of a variant's quality with the baseline's: non-inferiority verdicts
// from Welch (unpaired) or paired-by-seed one-sided 95% bounds against a
// margin, and the paired difference interval. Pure functions. Definitions:
// docs/report.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "server/analysis/statistics.h"

namespace frontier {

// Non-inferiority verdict of a variant's quality metric against the baseline's:
// with gain = variant - baseline (baseline - variant when `lower_is_better`),
// "at parity" when the one-sided 95% Welch lower bound of the gain is above
// -margin, "worse" when the one-sided 95% upper bound is below -margin,
// "inconclusive" otherwise and whenever either side has fewer than 2 values.
// Requires n >= 1 on both sides (throws std::invalid_argument otherwise).
std::string ParityVerdict(const MetricSummary& variant, const MetricSummary& baseline, double margin,
                          bool lower_is_better);

// Paired by seed: the differences variant - baseline over seeds both sides
// completed. nullopt unless both completed exactly the same seeds, at least 2.
// The interval is two-sided 95% (Student t on the differences, n - 1 degrees
// of freedom); the point value when the differences have no spread.
std::optional<Interval> PairedDifferenceInterval(const std::map<int64_t, double>& variant,
                                                 const std::map<int64_t, double>& baseline);
// The parity verdict on paired differences (same rule as ParityVerdict, with
// one-sided 95% bounds of the mean difference); "inconclusive" unless
// PairedDifferenceInterval applies.
std::string PairedParityVerdict(const std::map<int64_t, double>& variant,
                                const std::map<int64_t, double>& baseline, double margin,
                                bool lower_is_better);

}  // namespace frontier
