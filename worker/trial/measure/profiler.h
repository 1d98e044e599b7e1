// Profiles a few training steps of a trial (the spec's `profile` section) and
// summarizes where the step time goes (the verdict itself is
// measure/bottleneck.h). See docs/profiling.md for the result's
// "profile" and "bottleneck" objects and the rules behind the verdict.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"

namespace frontier {

// Records the steps [first, first + spec.steps) of a training loop, where
// first = spec.start, or `default_first` when spec.start is -1 (the trainer
// passes task.steps: extra steps after the training ones).
//
// tool "libtorch": the legacy LibTorch profiler records every operator of
// those steps (with input shapes; with CUDA events when `cuda`), a
// RecordFunction callback of this file adds each call's thread CPU time and
// the bytes of its tensors at their dtypes, the project's FlopCounter counts
// their FLOPs, and Finish writes a Chrome/Perfetto trace and the full
// operator table under <artifact_dir>/<trial_id>/ and returns the summary
// (time shares by bound, small calls counted as overhead: docs/profiling.md).
// tool "nsys" | "ncu": the worker wraps the whole trial process in the tool
// (worker/agent/profile_tool.cc); in a CUDA build the profiled steps are marked with NVTX
// ranges ("frontier.profiled_steps" around them, one per operator inside),
// so the tool's timeline shows them and ncu can be limited to them.
//
// Never throws for profiling problems: they end up in the "error" field of
// Finish's object and the trial goes on. One StepProfiler per thread at a
// time; the steps must run on the thread that calls BeforeStep/AfterStep.
class StepProfiler {
 public:
  // `artifact_dir`: folder the trace is written to (created when needed).
  // `cuda`: the trial runs on a CUDA device (CUDA event times per operator;
  // only in a CUDA build).
  StepProfiler(const ProfileSpec& spec, int default_first, std::string artifact_dir, std::string trial_id,
               bool cuda = false);
  ~StepProfiler();
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // True when `step` (0-based) is one of the profiled steps; such steps are
  // left out of the step-time statistics and train time (the profiler slows them down).
  bool Covers(int step) const;
  void BeforeStep(int step);  // starts recording a profiled step (its batch is ready)
  void AfterStep(int step);   // stops recording it; call after the step's work is synchronized
  // The result's "profile" object (docs/profiling.md), or null when the spec
  // profiles nothing. Ends a recording that is still open (a trial that
  // diverged inside the profiled steps).
  nlohmann::json Finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace frontier
