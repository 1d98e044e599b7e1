// Inference latency: timed repetitions of one forward pass after untimed
// warm-up ones (docs/trial-output.md, Latency). The forward pass and the
// device synchronization are the caller's; this file owns the repetition rule
// and the statistics. Torch-free.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/trial/measure/step_stats.h"

namespace frontier {

struct LatencyPlan {
  int warmup = 5;         // untimed passes first
  int repetitions = 100;  // timed passes wanted
  // Passes slow enough to spend this much time stop the timing early, once
  // kMinLatencyRepetitions passes are timed (a large model on a CPU).
  double budget_s = 5.0;
};

// Fewer timed passes than this never stop early.
inline constexpr int kMinLatencyRepetitions = 30;

// Runs `pass` plan.warmup times untimed, then times it (seconds, steady clock)
// until plan.repetitions passes are timed, or kMinLatencyRepetitions are and
// plan.budget_s is spent. `pass` must return only when the device is done
// (synchronized). The summary has n, median, p99 (and the rest of SeriesStats).
//
// `earlier`: the times of passes already run the same way, in order (a final
// evaluation's, at the same batch). They come first: the first plan.warmup of
// them are the warm-up, the rest are timed passes, and `pass` runs only for
// what they leave to do (nothing when they are enough).
SeriesStats TimeRepeatedly(const std::function<void()>& pass, const LatencyPlan& plan,
                           const std::vector<double>& earlier = {});

// How many of `earlier` passes TimeRepeatedly(pass, plan, earlier) times.
size_t TimedFromEarlier(const LatencyPlan& plan, size_t earlier);

// What TimeRepeatedly(pass, plan, earlier) timed, `timed` passes in all, when
// `earlier` were a final evaluation's passes, its first `validation` ones on
// the validation images and the rest on the test images, and `pass` ran on
// repeated training images: "the final evaluation's passes (validation, then
// test images)", "... (validation images)" or "... (test images)", each
// followed by ", then repeated training images" when `pass` was timed too,
// or "repeated training images".
std::string EvaluationPassesInput(const LatencyPlan& plan, size_t earlier, size_t validation, int timed);

// {batch_size, n, warmup, median_ms, p99_ms, p10_ms, mean_ms, min_ms, max_ms, cv}.
nlohmann::json LatencyJson(int batch_size, const SeriesStats& seconds, int warmup);

}  // namespace frontier
