#include "server/analysis/hypervolume.h"

#include <algorithm>
#include <stdexcept>

namespace frontier {
namespace {

// Hypervolume of `points` (all strictly above `reference`) in their first `dims`
// coordinates.
double HypervolumeAbove(std::vector<std::vector<double>> points, const std::vector<double>& reference,
                        size_t dims) {
  if (points.empty()) return 0;
  if (dims == 1) {
    double best = reference[0];
    for (const auto& p : points) best = std::max(best, p[0]);
    return best - reference[0];
  }
  if (dims == 2) {
    // Sweep by the first coordinate, descending: each new best in the second
    // adds a strip as wide as the point's first coordinate reaches.
    std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a[0] > b[0]; });
    double volume = 0, covered = reference[1];
    for (const auto& p : points) {
      if (p[1] > covered) {
        volume += (p[0] - reference[0]) * (p[1] - covered);
        covered = p[1];
      }
    }
    return volume;
  }
  // Slice along the last coordinate, descending: between consecutive levels the
  // slab's cross-section is the (dims-1)-volume of the points at or above it.
  const size_t last = dims - 1;
  std::sort(points.begin(), points.end(), [last](const auto& a, const auto& b) { return a[last] > b[last]; });
  double volume = 0;
  std::vector<std::vector<double>> slice;
  for (size_t i = 0; i < points.size(); ++i) {
    slice.push_back(points[i]);
    const double next = i + 1 < points.size() ? points[i + 1][last] : reference[last];
    const double depth = points[i][last] - next;
    if (depth > 0) volume += depth * HypervolumeAbove(slice, reference, dims - 1);
  }
  return volume;
}

}  // namespace

double HypervolumeSteps(size_t points, size_t objectives) {
  // HypervolumeAbove on n points visits n, and in 3 or more dimensions also
  // slices of 1..n points one dimension lower: W_d(n) = n + W_{d-1}(1) + ... + W_{d-1}(n).
  std::vector<double> steps(points + 1);
  for (size_t n = 0; n <= points; ++n) steps[n] = static_cast<double>(n);
  for (size_t d = 3; d <= objectives; ++d) {
    double lower = 0;  // W_{d-1}(1) + ... + W_{d-1}(n)
    for (size_t n = 1; n <= points; ++n) {
      lower += steps[n];
      steps[n] = static_cast<double>(n) + lower;
    }
    if (steps[points] > kMaxHypervolumeSteps) return steps[points];
  }
  return steps[points];
}

std::optional<double> Hypervolume(const std::vector<std::vector<double>>& points,
                                  const std::vector<double>& reference) {
  if (reference.empty()) throw std::invalid_argument("Hypervolume: empty reference point");
  std::vector<std::vector<double>> above;
  for (const auto& p : points) {
    if (p.size() != reference.size())
      throw std::invalid_argument("Hypervolume: point size differs from reference");
    bool strictly_above = true;
    for (size_t i = 0; i < p.size(); ++i) strictly_above = strictly_above && p[i] > reference[i];
    if (strictly_above) above.push_back(p);
  }
  if (HypervolumeSteps(above.size(), reference.size()) > kMaxHypervolumeSteps) return std::nullopt;
  return HypervolumeAbove(std::move(above), reference, reference.size());
}

}  // namespace frontier
