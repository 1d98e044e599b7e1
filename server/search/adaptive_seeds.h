// Adaptive seeds (`repeats: {min, max}`): after its first `min` seeds, a
// configuration whose parity verdict is still inconclusive and which is on
// the front or could still reach it gets one more seed at a time, up to
// `max`. The verdict it looks at is the report's (CompareQuality in
// server/analysis/parity.h) at the sequential quantile of the space's looks
// (alpha split over them, so looking again does not inflate false verdicts).
// Pure functions of evaluations; the scheduler adds the trials.
// Definitions: docs/search-space.md (Adaptive seeds).
#pragma once

#include <vector>

#include "search_spaces/search_space.h"
#include "server/search/strategy.h"

namespace frontier {

// Whether `candidate` (every seed it has, all final) should get one more seed:
// the space is adaptive, it has fewer than max_repeats seeds, every one of
// them completed, its verdict against `baseline` (every baseline seed, all
// final) is "inconclusive", and it is feasible by its means and not
// dominated by any feasible fitness of `others` (the other configurations'
// FitnessOf, computed once by the caller) when each of its objectives is
// taken one standard error in its favour (it could still reach the front).
bool WantsAnotherSeed(const SearchSpace& space, const Evaluation& baseline, const Evaluation& candidate,
                      const std::vector<Fitness>& others);

}  // namespace frontier
