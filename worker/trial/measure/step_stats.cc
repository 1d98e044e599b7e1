#include "worker/trial/measure/step_stats.h"

#include <algorithm>
#include <cmath>

namespace frontier {
namespace {

double Percentile(const std::vector<double>& sorted, double q) {
  const double pos = q * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - lo) * (sorted[hi] - sorted[lo]);
}

}  // namespace

SeriesStats Summarize(std::vector<double> v) {
  SeriesStats s;
  s.n = static_cast<int>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  for (double x : v) s.sum += x;
  s.mean = s.sum / s.n;
  s.median = Percentile(v, 0.5);
  s.p10 = Percentile(v, 0.1);
  s.p90 = Percentile(v, 0.9);
  s.p99 = Percentile(v, 0.99);
  s.min = v.front();
  s.max = v.back();
  if (s.n > 1 && s.mean > 0) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.cv = std::sqrt(ss / (s.n - 1)) / s.mean;
  }
  return s;
}

}  // namespace frontier
