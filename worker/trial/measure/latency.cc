#include "worker/trial/measure/latency.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace frontier {

SeriesStats TimeRepeatedly(const std::function<void()>& pass, const LatencyPlan& plan) {
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < plan.warmup; ++i) pass();
  std::vector<double> times;
  times.reserve(std::max(0, plan.repetitions));
  double spent = 0;
  while (static_cast<int>(times.size()) < plan.repetitions) {
    const auto t0 = Clock::now();
    pass();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    times.push_back(seconds);
    spent += seconds;
    if (static_cast<int>(times.size()) >= kMinLatencyRepetitions && spent >= plan.budget_s) break;
  }
  return Summarize(std::move(times));
}

nlohmann::json LatencyJson(int batch_size, const SeriesStats& s, int warmup) {
  return {{"batch_size", batch_size}, {"n", s.n},
          {"warmup", warmup},         {"median_ms", s.median * 1e3},
          {"p99_ms", s.p99 * 1e3},    {"p10_ms", s.p10 * 1e3},
          {"mean_ms", s.mean * 1e3},  {"min_ms", s.min * 1e3},
          {"max_ms", s.max * 1e3},    {"cv", s.cv}};
}

}  // namespace frontier
