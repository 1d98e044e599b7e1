// Profiles a few training steps of a trial (the spec's `profile` section) and
// judges where the step time goes. See docs/profiling.md.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"

namespace frontier {

class StepProfiler {
 public:
  // `artifact_dir`: folder the trace is written to (created when needed).
  StepProfiler(const ProfileSpec& spec, int warmup_steps, std::string artifact_dir, std::string trial_id);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // True when `step` (0-based) is recorded by the in-process profiler; such
  // steps are left out of the step-time statistics.
  bool Covers(int step) const;
  void BeforeStep(int step);  // starts recording at the first profiled step
  void AfterStep(int step);   // stops recording after the last profiled step
  // The result's "profile" object (trace path, per-operator summary), or null
  // when nothing was profiled in-process.
  nlohmann::json Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The result's "bottleneck" object, judged from a finished result's
// measurements (data wait share, achieved FLOP/s, the profile if any).
nlohmann::json BottleneckVerdict(const nlohmann::json& result);

}  // namespace frontier
