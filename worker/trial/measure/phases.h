// Where a trial's wall time went (docs/trial-output.md, Phases): each phase's
// seconds, summed over its intervals, so that a trial's result says how much
// of its process's life trained the model and how much was fixed cost.
// Phases are a fixed list (kTrialPhases), so results and reports agree on
// their names (search_spaces/trial_phases.h); the time no phase claimed is
// `other`. Torch-free.
#pragma once

#include <array>
#include <chrono>
#include <string_view>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_phases.h"
#include "os/monotonic.h"

namespace frontier {

class PhaseTimes {
 public:

  // Adds `seconds` to `phase`, one of kTrialPhases (anything else is a programming error: std::invalid_argument).
  void Add(std::string_view phase, double seconds);
  // Adds the time from `since` to now to `phase`; returns now.
  Monotonic::time_point AddSince(std::string_view phase, Monotonic::time_point since);
  double Seconds(std::string_view phase) const;

  // {"start_s": ..., ..., "profile_s": ..., "other_s": wall_s minus their sum (never below 0),
  //  "wall_s": wall_s}: every phase, 0 for those the trial did not go through.
  nlohmann::json ToJson(double wall_s) const;

 private:
  std::array<double, kTrialPhases.size()> seconds_{};
};

// Seconds since this process started (Linux: /proc/self/stat's start time
// against CLOCK_BOOTTIME); 0 when it cannot be read.
double SecondsSinceProcessStart();

}  // namespace frontier
