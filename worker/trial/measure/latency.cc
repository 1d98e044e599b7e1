#include "worker/trial/measure/latency.h"
#include "os/monotonic.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

namespace frontier {

size_t TimedFromEarlier(const LatencyPlan& plan, size_t earlier) {
  const size_t warmup = static_cast<size_t>(std::max(0, plan.warmup));
  const size_t wanted = static_cast<size_t>(std::max(0, plan.repetitions));
  return earlier > warmup ? std::min(earlier - warmup, wanted) : 0;
}

std::string EvaluationPassesInput(const LatencyPlan& plan, size_t earlier, size_t validation, int timed) {
  const size_t from_evaluation = TimedFromEarlier(plan, earlier);
  if (from_evaluation == 0) return "repeated training images";
  // The timed passes of the evaluation: earlier[first, first + from_evaluation), validation then test.
  const size_t first = std::min(earlier, static_cast<size_t>(std::max(0, plan.warmup)));
  const bool on_validation = first < validation;
  const bool on_test = first + from_evaluation > validation;
  const char* split = "test images";
  if (on_validation) split = on_test ? "validation, then test images" : "validation images";
  std::string input = std::string("the final evaluation's passes (") + split + ")";
  if (from_evaluation < static_cast<size_t>(std::max(0, timed))) input += ", then repeated training images";
  return input;
}

SeriesStats TimeRepeatedly(const std::function<void()>& pass, const LatencyPlan& plan,
                           const std::vector<double>& earlier) {
  const size_t warmup = static_cast<size_t>(std::max(0, plan.warmup));
  for (size_t i = earlier.size(); i < warmup; ++i) pass();
  const auto first = earlier.begin() + static_cast<std::ptrdiff_t>(std::min(earlier.size(), warmup));
  std::vector<double> times(first,
                            first + static_cast<std::ptrdiff_t>(TimedFromEarlier(plan, earlier.size())));
  times.reserve(std::max(times.size(), static_cast<size_t>(std::max(0, plan.repetitions))));
  double spent = std::accumulate(times.begin(), times.end(), 0.0);
  const auto done = [&] {
    const int n = static_cast<int>(times.size());
    return n >= plan.repetitions || (n >= kMinLatencyRepetitions && spent >= plan.budget_s);
  };
  while (!done()) {
    const auto t0 = Monotonic::now();
    pass();
    const double seconds = std::chrono::duration<double>(Monotonic::now() - t0).count();
    times.push_back(seconds);
    spent += seconds;
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
