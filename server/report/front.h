// A report's Pareto front and its hypervolume (docs/report.md): which
// feasible configs are on the front, and the front's exact hypervolume in
// baseline-normalized objective space, within a bound on its work. Used by
// the builder (report.cc).
#pragma once

#include <vector>

#include "server/report/report.h"

namespace frontier {

// Marks the feasible configs with every objective's mean that no other such
// config dominates (ConfigSummary::on_front).
void MarkFront(const std::vector<Objective>& objectives, std::vector<ConfigSummary>& configs);

// Hypervolume of the front in baseline-normalized objective space, reference
// point the origin; on failure, or past kMaxHypervolumeSteps, 0 and the
// reason in the note.
void ComputeHypervolume(Report& report);

}  // namespace frontier
