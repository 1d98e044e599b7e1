// Runs one trial: builds the task and its model from the spec, trains it for
// the budget, measures it as docs/worker.md (Measurement) defines, and
// reports JSON events (docs/trial-output.md). Task-specific work (data, head,
// loss, quality) is the Task's (worker/trial/tasks/task.h); the trial's
// phases are units of their own (trainer.cc's TrialRun calls them in order).
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"

namespace frontier {

inline constexpr int kTrialOutputSchema = 1;

// Exit codes of frontier-trial, one per result status.
enum TrialExit : int {
  kExitCompleted = 0,
  kExitFailed = 2,    // bad spec, missing data, unsupported precision, out of memory, runtime error
  kExitDiverged = 3,  // NaN or infinite loss: a result, not a crash
  kExitUsage = 64,    // bad command line
};

struct TrialOptions {
  int progress_every = 10;                 // a progress event every this many steps; 0: none
  std::string artifact_dir = "artifacts";  // profiles are written under this folder
  // The worker's calibrated peaks (FRONTIER_PEAK_FLOPS, docs/trial-protocol.md;
  // device.h ParseGivenPeaks); empty: the table or a GEMM measured in the trial.
  std::string peak_flops_json;
  // Receives every event (start, progress, eval) as it happens. The result is
  // returned, not emitted.
  std::function<void(const nlohmann::json&)> emit = [](const nlohmann::json&) {};
  // Called before each batch is drawn (with the step), inside the step's data
  // wait: how tests stand in for a slow input pipeline. Empty: nothing.
  std::function<void(int step)> before_batch;
  // Seconds this process ran before the trial began (exec, loading the
  // libraries, reading the spec): the result's phases.start_s. frontier-trial
  // sets it; a trial run inside another program leaves it 0.
  double process_start_s = 0;
};

// Never throws for problems of the trial itself: they come back as a result
// with "status": "failed" and an "error" naming the cause.
nlohmann::json RunTrial(const TrialSpec& spec, const TrialOptions& options);

// The exit code for a result's status.
int ExitCodeFor(const nlohmann::json& result);

// The first line of an exception's message: a LibTorch error without its C++ backtrace.
std::string FirstLineOf(const std::exception& e);

}  // namespace frontier
