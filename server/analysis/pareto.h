// Pareto dominance, the one definition the project uses: the report's front
// (ParetoFront), and the ranking of evaluated configurations for
// multi-objective selection in NSGA-II and ASHA's promotions: Deb's
// constraint-domination, fast non-dominated sorting and crowding distance
// (Deb et al., "A fast and elitist multiobjective genetic algorithm:
// NSGA-II", 2002). The stores' config_front SQL view states the same rule in
// SQL (server/store/result_views.cc); tests/server/config_views.h checks that
// both agree. Pure functions.
#pragma once

#include <cstddef>
#include <vector>

namespace frontier {

// How good one evaluated configuration is, for selection.
struct Fitness {
  std::vector<double> objectives;  // every objective to minimize (a maximized metric is negated)
  double violation = 0;            // summed relative constraint violation: 0 when feasible;
                                   // +infinity when there is no usable result (failed, stopped, ...)
  bool feasible() const { return violation == 0; }
};

// Dominance on objectives to minimize: `a` dominates `b` when it is no worse
// in every objective and better in at least one, so identical points do not
// dominate each other. `a` and `b` have the same size.
bool Dominates(const std::vector<double>& a, const std::vector<double>& b);

// Indices of the non-dominated points; `maximize[i]` says the direction of objective i.
// A point dominates another when it is at least as good in every objective and
// strictly better in one (Dominates), so identical points are all kept. Indices
// ascend. Sorted sweeps: O(n log n) for 2 objectives. Throws
// std::invalid_argument when a point's size differs from maximize's.
std::vector<size_t> ParetoFront(const std::vector<std::vector<double>>& points,
                                const std::vector<bool>& maximize);

// Constraint-domination: `a` dominates `b` when a is feasible and b is not;
// when both are infeasible and a violates less; when both are feasible and a
// is no worse in every objective and better in one (Dominates). Feasible points must
// have objective vectors of equal size (std::invalid_argument otherwise).
bool ConstrainedDominates(const Fitness& a, const Fitness& b);

// The fronts of the fast non-dominated sort under ConstrainedDominates: front
// 0 is every point nothing dominates, front 1 what only front 0 dominates,
// and so on. Indices ascend within each front.
std::vector<std::vector<size_t>> NonDominatedFronts(const std::vector<Fitness>& points);

// Crowding distance of each member of `front` (indices into `points`), in
// the front's order: per objective, the boundary members get +infinity and
// the others the gap between their neighbours divided by the objective's
// span (an objective without span adds nothing); the distances are summed.
// An infeasible front (no comparable objectives) gets 0 everywhere.
std::vector<double> CrowdingDistances(const std::vector<Fitness>& points, const std::vector<size_t>& front);

// The positions 0..n-1 of a front's CrowdingDistances, least crowded first:
// larger distance first (the boundary members, +infinity, lead), equal
// distances in the front's order. Callers map a position k to its member
// (front[k]) and to its distance (distances[k]).
std::vector<size_t> CrowdingOrder(const std::vector<double>& distances);

// Every index, best first: by front, then by larger crowding distance, then
// by smaller index (so callers break ties by the order of `points`).
std::vector<size_t> RankOrder(const std::vector<Fitness>& points);

}  // namespace frontier
