// The hypervolume indicator of a set of points. Pure function.
#pragma once

#include <vector>

namespace frontier {

// Hypervolume dominated by `points` (all objectives to maximize) above `reference`.
// Exact: a sweep for 2 objectives, recursive slicing (HSO) for more. Points not
// strictly above the reference in every objective add nothing. Throws
// std::invalid_argument when the reference is empty or a point's size differs.
double Hypervolume(const std::vector<std::vector<double>>& points, const std::vector<double>& reference);

}  // namespace frontier
