// Summary statistics of a series of timings. Torch-free.
#pragma once

#include <vector>

namespace frontier {

struct SeriesStats {
  int n = 0;
  double median = 0, p10 = 0, p90 = 0, p99 = 0, mean = 0, min = 0, max = 0;
  double cv = 0;  // sample standard deviation / mean
  double sum = 0;
};

// Percentiles by linear interpolation between order statistics (numpy's
// default). An empty series gives n = 0 and zeros.
SeriesStats Summarize(std::vector<double> values);

}  // namespace frontier
