// The hypervolume indicator of a set of points. Pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace frontier {

// The most steps (a point visited in one slice) an exact hypervolume may
// take, about a second: at most 6,323 points in 3 objectives, 491 in 4, 72
// in 6, 33 in 8, 16 in 12 (2 objectives: 20 million). The work grows as
// points^(objectives - 1): unbounded, 12 objectives over 30 points never finish.
inline constexpr double kMaxHypervolumeSteps = 2e7;

// The steps Hypervolume takes at most on `points` points in `objectives`
// objectives (saturating: past kMaxHypervolumeSteps it returns the first
// count found above it).
double HypervolumeSteps(size_t points, size_t objectives);

// Hypervolume dominated by `points` (all objectives to maximize) above `reference`.
// Exact: a sweep for 2 objectives, recursive slicing (HSO) for more. Points not
// strictly above the reference in every objective add nothing. nullopt when
// the points above the reference would take more than kMaxHypervolumeSteps
// (HypervolumeSteps). Throws std::invalid_argument when the reference is
// empty or a point's size differs.
std::optional<double> Hypervolume(const std::vector<std::vector<double>>& points,
                                  const std::vector<double>& reference);

}  // namespace frontier
