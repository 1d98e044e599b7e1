// Search strategies on hand-made inputs with known answers, driven directly
// (no store, no gRPC): ranking fixtures, Sobol' against reference values,
// NSGA-II invariants, ASHA on scripted results, ablation's one-factor set,
// and restart reconstruction by replay.
#include "server/search/strategy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "server/search/asha.h"
#include "server/search/genome.h"
#include "server/search/nsga2.h"
#include "server/analysis/pareto.h"
#include "server/search/sobol.h"

namespace frontier {
namespace {

using nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();

Fitness Point(std::vector<double> objectives, double violation = 0) {
  return Fitness{std::move(objectives), violation};
}

// ---------------------------------------------------------------- ranking

TEST(ParetoTest, ConstraintDominationPutsFeasibleFirstThenLessViolation) {
  EXPECT_TRUE(ConstrainedDominates(Point({9, 9}), Point({0, 0}, 0.1)));
  EXPECT_FALSE(ConstrainedDominates(Point({0, 0}, 0.1), Point({9, 9})));
  EXPECT_TRUE(ConstrainedDominates(Point({9, 9}, 0.1), Point({0, 0}, 0.2)));
  EXPECT_TRUE(ConstrainedDominates(Point({0, 0}, 0.2), Point({}, kInf)));
  EXPECT_TRUE(ConstrainedDominates(Point({1, 2}), Point({1, 3})));
  EXPECT_FALSE(ConstrainedDominates(Point({1, 2}), Point({1, 2})));  // equal points do not dominate
  EXPECT_FALSE(ConstrainedDominates(Point({1, 3}), Point({2, 1})));
  EXPECT_THROW(ConstrainedDominates(Point({1}), Point({1, 2})), std::invalid_argument);
}

TEST(ParetoTest, NonDominatedSortingOnAFixture) {
  const std::vector<Fitness> points = {
      Point({1, 5}),       // 0: front 0
      Point({2, 3}),       // 1: front 0
      Point({3, 1}),       // 2: front 0
      Point({2, 4}),       // 3: dominated by 1
      Point({4, 4}),       // 4: dominated by 1, 2, 3, 5
      Point({3, 3.5}),     // 5: dominated by 1
      Point({0, 0}, 0.5),  // 6: infeasible
      Point({9, 9}, 0.2),  // 7: infeasible, violates less than 6
      Point({}, kInf),     // 8: no result
  };
  const std::vector<std::vector<size_t>> expected = {{0, 1, 2}, {3, 5}, {4}, {7}, {6}, {8}};
  EXPECT_EQ(NonDominatedFronts(points), expected);
}

TEST(ParetoTest, CrowdingDistanceOnAFixture) {
  // Both objectives span 10. (1,6): gaps 3/10 + 7/10; (3,3): 9/10 + 6/10.
  const std::vector<Fitness> points = {Point({0, 10}), Point({1, 6}), Point({3, 3}), Point({10, 0})};
  const std::vector<double> distance = CrowdingDistances(points, {0, 1, 2, 3});
  EXPECT_EQ(distance[0], kInf);
  EXPECT_DOUBLE_EQ(distance[1], 1.0);
  EXPECT_DOUBLE_EQ(distance[2], 1.5);
  EXPECT_EQ(distance[3], kInf);
  EXPECT_EQ(RankOrder(points), (std::vector<size_t>{0, 3, 2, 1}));
  // An objective without span adds nothing.
  const std::vector<Fitness> flat = {Point({1, 1}), Point({1, 2}), Point({1, 3})};
  const std::vector<double> flat_distance = CrowdingDistances(flat, {0, 1, 2});
  EXPECT_EQ(flat_distance[0], kInf);
  EXPECT_DOUBLE_EQ(flat_distance[1], 1.0);
  EXPECT_EQ(flat_distance[2], kInf);
  // Infeasible fronts are not crowded; ties keep the input order.
  EXPECT_EQ(CrowdingDistances({Point({}, kInf), Point({}, kInf)}, {0, 1}), (std::vector<double>{0, 0}));
  EXPECT_EQ(RankOrder({Point({}, kInf), Point({5, 5}), Point({}, kInf)}), (std::vector<size_t>{1, 0, 2}));
}

// ---------------------------------------------------------------- Sobol'

TEST(SobolTest, UnscrambledMatchesTheReferenceSequence) {
  // scipy.stats.qmc.Sobol(d=40, scramble=False).random(16), Joe-Kuo numbers, Gray-code order.
  SobolSequence sobol(40, std::nullopt);
  std::vector<std::vector<double>> points;
  for (int i = 0; i < 16; ++i) points.push_back(sobol.Next());
  const std::vector<std::vector<double>> first_six = {{0, 0, 0, 0, 0, 0},
                                                      {0.5, 0.5, 0.5, 0.5, 0.5, 0.5},
                                                      {0.75, 0.25, 0.25, 0.25, 0.75, 0.75},
                                                      {0.25, 0.75, 0.75, 0.75, 0.25, 0.25},
                                                      {0.375, 0.375, 0.625, 0.875, 0.375, 0.125},
                                                      {0.875, 0.875, 0.125, 0.375, 0.875, 0.625},
                                                      {0.625, 0.125, 0.875, 0.625, 0.625, 0.875},
                                                      {0.125, 0.625, 0.375, 0.125, 0.125, 0.375}};
  for (size_t i = 0; i < first_six.size(); ++i) {
    EXPECT_EQ(std::vector<double>(points[i].begin(), points[i].begin() + 6), first_six[i]) << "point " << i;
  }
  const std::vector<double> dimension_40 = {0,      0.5,    0.25,   0.75,   0.875,  0.375,  0.625,  0.125,
                                            0.5625, 0.0625, 0.8125, 0.3125, 0.4375, 0.9375, 0.1875, 0.6875};
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(points[i][39], dimension_40[i]) << "point " << i;
  EXPECT_EQ(points[13][10], 0.8125);
  EXPECT_EQ(points[13][20], 0.5625);
  EXPECT_EQ(points[13][30], 0.5625);
}

TEST(SobolTest, ScrambledPointsKeepTheNetPropertyAndFollowTheSeed) {
  SobolSequence a(3, 7), b(3, 7), c(3, 8);
  std::set<int> cells_2d;
  std::vector<std::set<int>> strata(3);
  bool differs = false;
  for (int i = 0; i < 16; ++i) {
    const std::vector<double> p = a.Next();
    EXPECT_EQ(p, b.Next());
    differs = differs || p != c.Next();
    for (int d = 0; d < 3; ++d) {
      EXPECT_GE(p[d], 0.0);
      EXPECT_LT(p[d], 1.0);
      strata[d].insert(static_cast<int>(p[d] * 16));
    }
    cells_2d.insert(static_cast<int>(p[0] * 4) * 4 + static_cast<int>(p[1] * 4));
  }
  for (int d = 0; d < 3; ++d) EXPECT_EQ(strata[d].size(), 16u) << "dimension " << d;  // one point per 1/16
  EXPECT_EQ(cells_2d.size(), 16u);  // dimensions 1-2 are a (0, 2)-sequence: one point per 4x4 cell
  EXPECT_TRUE(differs);
  EXPECT_THROW(SobolSequence(SobolSequence::kMaxDimensions + 1, 1), std::invalid_argument);
}

TEST(GenomeStreamTest, CoversASpaceWithoutDuplicates) {
  // 4 x 4: the first 16 Sobol' points already hit every genome once.
  GenomeStream square({{4, true}, {4, false}}, 3);
  std::set<Genome> seen;
  for (int i = 0; i < 16; ++i) {
    std::optional<Genome> g = square.Next([&](const Genome& genome) { return seen.count(genome) > 0; });
    ASSERT_TRUE(g.has_value());
    EXPECT_TRUE(seen.insert(*g).second);
  }
  EXPECT_FALSE(square.Next([&](const Genome& genome) { return seen.count(genome) > 0; }).has_value());

  // 3 x 3 x 2, one genome excluded up front: the other 17 come out, once each.
  const Genome excluded = {1, 1, 0};
  GenomeStream odd({{3, true}, {3, false}, {2, false}}, 11);
  std::set<Genome> drawn;
  const auto taken = [&](const Genome& genome) { return genome == excluded || drawn.count(genome) > 0; };
  while (std::optional<Genome> g = odd.Next(taken)) EXPECT_TRUE(drawn.insert(*g).second);
  EXPECT_EQ(drawn.size(), 17u);
  EXPECT_EQ(drawn.count(excluded), 0u);
}

TEST(GenomeTest, UniformDrawsStayInRange) {
  Rng rng(1);
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 3000; ++i) ++counts[UniformIndex(rng, 3)];
  for (int count : counts) EXPECT_GT(count, 800);
  for (int i = 0; i < 1000; ++i) {
    const double u = UniformUnit(rng);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  EXPECT_EQ(SpaceSize({{3, false}, {4, true}}), 12u);
}

// ---------------------------------------------------------------- NSGA-II

// Two objectives to minimize on an ordinal genome: a discretized ZDT1.
Fitness Zdt1(const Genome& genome, int levels) {
  const double x0 = genome[0] / (levels - 1.0);
  double sum = 0;
  for (size_t i = 1; i < genome.size(); ++i) sum += genome[i] / (levels - 1.0);
  const double g = 1 + 9 * sum / (genome.size() - 1);
  return Point({x0, g * (1 - std::sqrt(x0 / g))});
}

std::vector<Genome> RunNsga2(Nsga2& nsga2, int levels, bool reverse_tells) {
  std::vector<Genome> all;
  for (std::vector<Genome> batch = nsga2.Ask(); !batch.empty(); batch = nsga2.Ask()) {
    all.insert(all.end(), batch.begin(), batch.end());
    if (reverse_tells) std::reverse(batch.begin(), batch.end());
    for (const Genome& g : batch) nsga2.Tell(g, Zdt1(g, levels));
  }
  return all;
}

TEST(Nsga2Test, DeterministicIndependentOfTellOrderAndNeverRepeats) {
  const std::vector<GeneSpec> genes(6, GeneSpec{11, true});
  Nsga2Options options;
  options.population = 8;
  options.generations = 6;
  options.seed = 42;
  Nsga2 a(genes, options, [](const Genome&) { return true; });
  Nsga2 b(genes, options, [](const Genome&) { return true; });
  const std::vector<Genome> run_a = RunNsga2(a, 11, false);
  const std::vector<Genome> run_b = RunNsga2(b, 11, true);
  EXPECT_EQ(run_a, run_b);
  EXPECT_EQ(run_a.size(), 48u);
  EXPECT_EQ(std::set<Genome>(run_a.begin(), run_a.end()).size(), run_a.size());
  EXPECT_TRUE(a.Finished());
  EXPECT_EQ(a.generation(), 6u);
  options.seed = 43;
  Nsga2 c(genes, options, [](const Genome&) { return true; });
  EXPECT_NE(RunNsga2(c, 11, false), run_a);
}

TEST(Nsga2Test, ChildrenStayWithinEveryDimensionsChoices) {
  const std::vector<GeneSpec> genes = {{2, true}, {3, false}, {5, true}, {7, false}, {1, false}, {4, true}};
  Nsga2Options options;
  options.population = 10;
  options.generations = 20;
  options.seed = 2;
  Nsga2 nsga2(genes, options, [](const Genome&) { return true; });
  std::set<Genome> seen;
  for (std::vector<Genome> batch = nsga2.Ask(); !batch.empty(); batch = nsga2.Ask()) {
    for (const Genome& g : batch) {
      ASSERT_EQ(g.size(), genes.size());
      for (size_t d = 0; d < genes.size(); ++d) {
        EXPECT_GE(g[d], 0);
        EXPECT_LT(g[d], genes[d].levels);
      }
      EXPECT_TRUE(seen.insert(g).second);
      nsga2.Tell(g, Point({static_cast<double>(g[0] + g[1]), static_cast<double>(g[2] - g[3] + g[5])}));
    }
  }
  EXPECT_EQ(seen.size(), 200u);
}

TEST(Nsga2Test, ImprovesOnItsInitialPopulation) {
  // The front of the last generation's parents must dominate more of the
  // objective space than the initial population's front.
  const std::vector<GeneSpec> genes(10, GeneSpec{21, true});
  Nsga2Options options;
  options.population = 20;
  options.generations = 15;
  options.seed = 5;
  Nsga2 nsga2(genes, options, [](const Genome&) { return true; });
  const std::vector<Genome> all = RunNsga2(nsga2, 21, false);
  auto mean_g = [&](const std::vector<Genome>& genomes) {
    double sum = 0;
    for (const Genome& g : genomes) sum += Zdt1(g, 21).objectives[1] + Zdt1(g, 21).objectives[0];
    return sum / genomes.size();
  };
  const std::vector<Genome> initial(all.begin(), all.begin() + 20);
  EXPECT_LT(mean_g(nsga2.parents()), 0.6 * mean_g(initial));
}

TEST(Nsga2Test, ExhaustsASmallSpaceOnceAndSkipsInadmissibleGenomes) {
  // 3 x 3 = 9 genomes; {0, 0} is the baseline and {2, 2} cannot run: 7 to propose.
  const std::vector<GeneSpec> genes = {{3, false}, {3, true}};
  Nsga2Options options;
  options.population = 4;
  options.generations = 50;
  int asked = 0;
  Nsga2 nsga2(genes, options, [&](const Genome& g) {
    ++asked;
    return g != Genome{0, 0} && g != Genome{2, 2};
  });
  const std::vector<Genome> all = RunNsga2(nsga2, 3, false);
  EXPECT_EQ(std::set<Genome>(all.begin(), all.end()).size(), 7u);
  EXPECT_EQ(all.size(), 7u);
  EXPECT_TRUE(nsga2.Finished());
  EXPECT_LE(asked, 9);  // admissibility asked once per genome
}

TEST(Nsga2Test, SelectionPrefersFeasibleParents) {
  const std::vector<GeneSpec> genes = {{16, true}};
  Nsga2Options options;
  options.population = 4;
  options.generations = 3;
  options.seed = 9;
  Nsga2 nsga2(genes, options, [](const Genome&) { return true; });
  const std::vector<Genome> first = nsga2.Ask();
  ASSERT_EQ(first.size(), 4u);
  std::set<Genome> infeasible;
  for (size_t i = 0; i < first.size(); ++i) {
    // Infeasible ones have the best objectives, and must still lose.
    const bool feasible = i % 2 == 0;
    nsga2.Tell(first[i], Point({feasible ? 10.0 + i : 0.0, 0.0}, feasible ? 0 : 0.3));
    if (!feasible) infeasible.insert(first[i]);
  }
  // Two more feasible genomes (like the baseline) join the selection.
  std::vector<Genome> extra;
  for (int level = 0; extra.size() < 2; ++level) {
    if (std::find(first.begin(), first.end(), Genome{level}) == first.end()) extra.push_back({level});
  }
  nsga2.Tell(extra[0], Point({20, 0}));
  nsga2.Tell(extra[1], Point({21, 0}));
  ASSERT_FALSE(nsga2.Ask().empty());
  ASSERT_EQ(nsga2.parents().size(), 4u);
  for (const Genome& parent : nsga2.parents()) EXPECT_EQ(infeasible.count(parent), 0u);
}

// ---------------------------------------------------------------- ASHA

TEST(AshaTest, RungsGrowByEtaBelowTheFullBudget) {
  EXPECT_EQ(AshaRungs({10, 3, 100}), (std::vector<int>{10, 30, 90}));
  EXPECT_EQ(AshaRungs({10, 3, 90}), (std::vector<int>{10, 30}));
  EXPECT_EQ(AshaRungs({10, 2, 10}), std::vector<int>{});
  EXPECT_THROW(AshaRungs({10, 1, 100}), std::invalid_argument);
}

// Validation accuracy as the one objective (minimized as its negative).
Fitness Accuracy(double accuracy) { return Point({-accuracy}); }

TEST(AshaTest, PromotesTheTopFractionOnAScriptedSequence) {
  AshaStopper asha({10, 2, 40});                                        // rungs 10, 20
  EXPECT_FALSE(asha.Report("A", 1, 10, Accuracy(0.5), true).stop);      // first at the rung: continues
  EXPECT_TRUE(asha.Report("B", 1, 10, Accuracy(0.4), true).stop);       // 2nd of 2, best 1 continue
  EXPECT_FALSE(asha.Report("C", 1, 10, Accuracy(0.6), true).stop);      // 1st of 3
  EXPECT_FALSE(asha.Report("D", 1, 10, Accuracy(0.55), true).stop);     // 2nd of 4, best 2 continue
  const StopDecision e = asha.Report("E", 1, 10, Accuracy(0.3), true);  // 5th of 5
  EXPECT_TRUE(e.stop);
  EXPECT_EQ(e.reason, "asha: at step 10 ranked 5 of 5 configurations; the best 2 continue");
  // A second seed follows its configuration's decision but moves its mean: B is 0.65 now.
  EXPECT_TRUE(asha.Report("B", 2, 10, Accuracy(0.9), true).stop);
  EXPECT_FALSE(asha.Report("F", 1, 10, Accuracy(0.62), true).stop);  // 2nd of 6 behind B, best 3
  EXPECT_TRUE(asha.Report("G", 1, 10, Accuracy(0.1), true).stop);
  // The baseline is ranked but never stopped.
  EXPECT_FALSE(asha.Report("baseline", 1, 10, Accuracy(0.0), false).stop);
  // Steps that are not rungs continue and are not recorded.
  EXPECT_FALSE(asha.Report("H", 1, 15, Accuracy(0.0), true).stop);
  EXPECT_FALSE(asha.Report("H", 1, 40, Accuracy(0.0), true).stop);
}

TEST(AshaTest, ComparesAtEqualFidelityOnly) {
  AshaStopper asha({10, 2, 40});  // rungs 10, 20
  EXPECT_FALSE(asha.Report("A", 1, 10, Accuracy(0.8), true).stop);
  EXPECT_FALSE(asha.Report("A", 1, 20, Accuracy(0.9), true).stop);
  // B at step 10 is compared with A at step 10 (0.8), not at step 20.
  EXPECT_FALSE(asha.Report("B", 1, 10, Accuracy(0.85), true).stop);
  // At step 20, B (0.5) is behind A (0.9).
  EXPECT_TRUE(asha.Report("B", 1, 20, Accuracy(0.5), true).stop);
}

TEST(AshaTest, PromotesByNonDominatedRankThenCrowding) {
  AshaStopper asha({10, 2, 20});  // one rung
  EXPECT_FALSE(asha.Report("P1", 1, 10, Point({0, 10}), true).stop);
  // Both non-dominated with infinite crowding: the earlier arrival ranks first,
  // but P2 is an extreme of the first front (the best in objective 1), which
  // continues whatever the quota.
  EXPECT_FALSE(asha.Report("P2", 1, 10, Point({10, 0}), true).stop);
  // Non-dominated, but crowded between the two extremes: 3rd of 3, the best 1 continues.
  EXPECT_TRUE(asha.Report("P3", 1, 10, Point({5, 5}), true).stop);
  // Dominates everything: front 0 alone.
  EXPECT_FALSE(asha.Report("P4", 1, 10, Point({-1, -1}), true).stop);
  // Infeasible: behind every feasible configuration whatever its objectives.
  EXPECT_TRUE(asha.Report("P5", 1, 10, Point({-9, -9}, 0.1), true).stop);
}

// Two objectives (accuracy, throughput), both maximized.
Fitness AccuracyAndSpeed(double accuracy, double speed) { return Point({-accuracy, -speed}); }

TEST(AshaTest, TheExtremesOfTheFirstFrontAlwaysContinue) {
  AshaStopper asha({10, 3, 90});  // rungs 10, 30
  // Rung 10. The baseline arrives first: ranked, never stopped.
  EXPECT_FALSE(asha.Report("baseline", 1, 10, AccuracyAndSpeed(0.50, 100), false).stop);
  // Slower and less accurate than the baseline: dominated, 2nd of 2, the best 1 continues.
  EXPECT_TRUE(asha.Report("A", 1, 10, AccuracyAndSpeed(0.40, 90), true).stop);
  // The fastest so far but less accurate: the first front's other extreme.
  // The quota (1) goes to the earlier extreme, the baseline; B continues anyway.
  EXPECT_FALSE(asha.Report("B", 1, 10, AccuracyAndSpeed(0.30, 300), true).stop);
  // The most accurate so far: an extreme too, although 2nd in rank order.
  const StopDecision c = asha.Report("C", 1, 10, AccuracyAndSpeed(0.60, 50), true);
  EXPECT_FALSE(c.stop);
  // On the first front between the extremes: 3rd of 5 (behind the extremes B
  // and C), the best 1 continues.
  const StopDecision d = asha.Report("D", 1, 10, AccuracyAndSpeed(0.45, 200), true);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.reason, "asha: at step 10 ranked 3 of 5 configurations; the best 1 continue");
  // Nearly as fast as B but dominated by it: the second front, no extreme of the first.
  EXPECT_TRUE(asha.Report("E", 1, 10, AccuracyAndSpeed(0.29, 299), true).stop);
  // Later seeds follow their configuration's decision.
  EXPECT_FALSE(asha.Report("B", 2, 10, AccuracyAndSpeed(0.10, 10), true).stop);
  EXPECT_TRUE(asha.Report("D", 2, 10, AccuracyAndSpeed(0.99, 999), true).stop);
  // Rung 30 compares at rung 30 only: B, the fastest there, continues as an extreme.
  EXPECT_FALSE(asha.Report("C", 1, 30, AccuracyAndSpeed(0.80, 50), true).stop);
  EXPECT_FALSE(asha.Report("B", 1, 30, AccuracyAndSpeed(0.50, 280), true).stop);
}

TEST(AshaTest, KeepsEachConfigurationsDecisionPerRung) {
  AshaStopper asha({10, 2, 40});  // rungs 10, 20
  EXPECT_FALSE(asha.Decision("A", 10).has_value());
  EXPECT_FALSE(asha.Report("A", 1, 10, Accuracy(0.5), true).stop);
  EXPECT_TRUE(asha.Report("B", 1, 10, Accuracy(0.4), true).stop);
  ASSERT_TRUE(asha.Decision("A", 10).has_value());
  EXPECT_FALSE(asha.Decision("A", 10)->stop);
  EXPECT_TRUE(asha.Decision("B", 10)->stop);
  EXPECT_FALSE(asha.Decision("A", 20).has_value());
  EXPECT_FALSE(asha.Decision("A", 15).has_value());  // not a rung
  // Stopped: the decision of the rung that stopped the configuration.
  EXPECT_FALSE(asha.Stopped("A").has_value());
  ASSERT_TRUE(asha.Stopped("B").has_value());
  EXPECT_EQ(asha.Stopped("B")->reason, "asha: at step 10 ranked 2 of 2 configurations; the best 1 continue");
  EXPECT_FALSE(asha.Report("C", 1, 10, Accuracy(0.6), true).stop);
  EXPECT_FALSE(asha.Report("C", 1, 20, Accuracy(0.6), true).stop);
  EXPECT_TRUE(asha.Report("A", 1, 20, Accuracy(0.3), true).stop);
  EXPECT_EQ(asha.Stopped("A")->reason, "asha: at step 20 ranked 2 of 2 configurations; the best 1 continue");
  EXPECT_FALSE(asha.Stopped("C").has_value());
}

TEST(AshaTest, InfeasibleConfigurationsAreNeverExtremes) {
  AshaStopper asha({10, 3, 30});  // one rung
  EXPECT_FALSE(asha.Report("A", 1, 10, AccuracyAndSpeed(0.5, 100), true).stop);
  // The best in both objectives, but violating a constraint: behind A.
  EXPECT_TRUE(asha.Report("B", 1, 10, Point({-0.9, -900}, 0.5), true).stop);
  // With no feasible configuration at a rung there are no extremes: two equal
  // violations share the first front, and the quota (1) goes to the earlier.
  AshaStopper infeasible({10, 3, 30});
  EXPECT_FALSE(infeasible.Report("A", 1, 10, Point({-0.5, -100}, 0.2), true).stop);
  EXPECT_TRUE(infeasible.Report("B", 1, 10, Point({-0.9, -900}, 0.2), true).stop);
}

TEST(AshaTest, ReplayingTheReportsRebuildsTheSameDecisions) {
  // A scripted stream: 4 seeds x 12 configurations at rungs 10 and 30 with
  // pseudo-random values, in an interleaved order; a restarted coordinator
  // replays the stored events in the same order into a fresh stopper.
  struct Event {
    std::string config;
    int64_t seed;
    int step;
    Fitness fitness;
    bool may_stop;
  };
  std::vector<Event> events;
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(state >> 11) / static_cast<double>(uint64_t{1} << 53);
  };
  for (int step : {10, 30}) {
    for (int c = 0; c < 12; ++c) {
      for (int64_t seed = 1; seed <= 2; ++seed) {
        events.push_back(
            {"C" + std::to_string(c), seed, step, AccuracyAndSpeed(next(), 100 * next()), c != 0});
      }
    }
  }
  std::vector<bool> first;
  AshaStopper a({10, 3, 90});
  for (const Event& e : events) {
    first.push_back(a.Report(e.config, e.seed, e.step, e.fitness, e.may_stop).stop);
  }
  AshaStopper b({10, 3, 90});
  std::vector<bool> second;
  for (const Event& e : events) {
    second.push_back(b.Report(e.config, e.seed, e.step, e.fitness, e.may_stop).stop);
  }
  EXPECT_EQ(first, second);
  // Some stop, some continue, and the baseline-like C0 never stops.
  EXPECT_NE(std::count(first.begin(), first.end(), true), 0);
  EXPECT_NE(std::count(first.begin(), first.end(), false), 0);
  for (size_t i = 0; i < events.size(); ++i) {
    if (!events[i].may_stop) {
      EXPECT_FALSE(first[i]);
    }
  }
}

// ---------------------------------------------------------------- strategies over a search space

// Grid 2 x 3 x 2 = 12: the baseline is {stride 2, basic, none}; with stride 4,
// neither the 7x7 window nor convnext's downsampling fits (4 configurations).
constexpr char kSpace[] = R"(name: t
task: {dataset: synthetic, input: {channels: 1, height: 28, width: 28, classes: 3}, batch_size: 8, steps: 40,
       eval_every: 10}
baseline:
  arch:
    stem: {kind: conv3x3, width: 16, stride: 2, depth: 1}
    stages:
      - {block: basic, width: 16, depth: 1}
      - {block: basic, width: 32, depth: 1, stride: 2}
objectives: [{metric: val_accuracy}, {metric: throughput}]
repeats: 2
space:
  stem.stride: [2, 4]
  block: [basic, mbconv, convnext]
  stages[1].attention.kind: [none, {kind: window, window: 7}]
)";

SearchSpace Space(const std::string& strategy) {
  return ParseSearchSpace(std::string(kSpace) + "strategy: " + strategy + "\n", "t.yaml");
}

// A larger space for the evolutionary strategies: 8 x 8 x 8 x 3 x 3 = 4608.
constexpr char kWideSpace[] = R"(name: wide
task: {dataset: synthetic, input: {channels: 1, height: 16, width: 16, classes: 3}, batch_size: 8, steps: 40,
       eval_every: 10}
baseline:
  arch:
    stem: {kind: conv3x3, width: 8, stride: 1, depth: 1}
    stages:
      - {block: basic, width: 8, depth: 1}
      - {block: basic, width: 16, depth: 1, stride: 2}
objectives: [{metric: val_accuracy}, {metric: throughput}]
constraints: [{metric: params, max: 20000}]
repeats: 1
space:
  stem.width: [8, 12, 16, 20, 24, 28, 32, 36]
  stages[0].width: [8, 12, 16, 20, 24, 28, 32, 36]
  stages[1].width: [16, 24, 32, 40, 48, 56, 64, 72]
  activation: [relu, gelu, silu]
  depth: [1, 2, 3]
)";

SearchSpace WideSpace(const std::string& strategy) {
  return ParseSearchSpace(std::string(kWideSpace) + "strategy: " + strategy + "\n", "wide.yaml");
}

double Number(const Config& config, const std::string& key, double otherwise) {
  return config.contains(key) && config[key].is_number() ? config[key].get<double>() : otherwise;
}

// A made-up but deterministic outcome: wider is more accurate and slower,
// gelu helps accuracy, params grow with width and depth.
Evaluation Evaluate(const SearchSpace& space, const Config& config) {
  const double stem = Number(config, "stem.width", 8), w0 = Number(config, "stages[0].width", 8);
  const double w1 = Number(config, "stages[1].width", 16), depth = Number(config, "depth", 1);
  const bool gelu = config.value("activation", "relu") == "gelu";
  const double accuracy = 0.5 + 0.004 * (stem + w0 + w1) + (gelu ? 0.05 : 0) + 0.01 * depth;
  const double throughput = 1e5 / (stem + w0 * w0 * depth + w1 * w1 * depth);
  const double params = 9 * (stem * w0 + w0 * w0 * depth + w0 * w1 + w1 * w1 * depth);
  Evaluation evaluation{config, 40, {}};
  for (int seed = 1; seed <= space.repeats; ++seed) {
    evaluation.trials.push_back({seed, "completed",
                                 json{{"val_accuracy", accuracy + 0.001 * seed},
                                      {"throughput", {{"samples_per_s", throughput}}},
                                      {"params", params}}});
  }
  return evaluation;
}

std::set<std::string> Keys(const std::vector<Proposal>& proposals) {
  std::set<std::string> keys;
  for (const Proposal& p : proposals) keys.insert(ConfigKey(p.config));
  return keys;
}

std::string ErrorOf(const std::string& strategy) {
  try {
    Space(strategy);
  } catch (const SpaceError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(StrategyTest, SpaceFilesNameStrategiesAndTheirFields) {
  const SearchSpace asha =
      Space("{name: asha, proposer: nsga2, population: 8, generations: 2, eta: 2, seed: 3}");
  EXPECT_EQ(asha.strategy.proposer, "nsga2");
  EXPECT_EQ(asha.strategy.population, 8);
  EXPECT_EQ(asha.strategy.generations, 2);
  EXPECT_EQ(asha.strategy.eta, 2);
  EXPECT_EQ(asha.strategy.min_steps, 10);  // task.eval_every
  EXPECT_EQ(asha.strategy.seed, 3);
  EXPECT_TRUE(Space("{name: ablation, cumulative: true, metric: throughput}").strategy.cumulative);
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"{name: bayes}",
       "strategy.name: unknown choice 'bayes'; expected one of grid, random, sobol, nsga2, asha, ablation"},
      {"{name: grid, trials: 5}", "strategy.trials: applies to strategies asha, nsga2, random, sobol only"},
      {"{name: random, population: 5}", "strategy.population: applies to strategies asha, nsga2 only"},
      {"{name: random, budget: 5}", "strategy.budget: unknown field; expected one of name, trials, seed"},
      {"{name: asha, population: 8}", "strategy.population: applies to proposer nsga2 only"},
      {"{name: asha, min_steps: 15}",
       "strategy.min_steps: must be a multiple of task.eval_every (10) so that every rung is an evaluation"},
      {"{name: asha, min_steps: 40}", "strategy.min_steps: must be below task.steps (40)"},
      {"{name: asha, eta: 1}", "strategy.eta: must be in [2, 1000], got 1"},
      {"{name: nsga2, population: 1}", "strategy.population: must be in [2, 100000], got 1"},
      {"{name: ablation, metric: throughput}", "strategy.metric: applies to a cumulative ablation only"},
      {"{name: ablation, cumulative: yes}", "strategy.cumulative: expected true or false, got 'yes'"},
      {"{name: ablation, cumulative: true, metric: params}",
       "strategy.metric: 'params' is not one of the objectives"},
  };
  for (const auto& [strategy, message] : errors) {
    EXPECT_NE(ErrorOf(strategy).find(message), std::string::npos) << strategy << " -> " << ErrorOf(strategy);
  }
}

TEST(StrategyTest, AblationProposesExactlyTheOneFactorSet) {
  const SearchSpace space = Space("{name: ablation}");
  auto strategy = MakeStrategy(space);
  const std::vector<Proposal> proposals = strategy->Ask();
  const std::set<std::string> expected = {R"({"stem.stride":4})", R"({"block":"mbconv"})",
                                          R"({"block":"convnext"})",
                                          R"({"stages[1].attention.kind":{"kind":"window","window":7}})"};
  EXPECT_EQ(Keys(proposals), expected);
  EXPECT_EQ(proposals.size(), expected.size());
  for (const Proposal& p : proposals) EXPECT_EQ(p.steps, 40);
  EXPECT_TRUE(strategy->Finished());
  EXPECT_TRUE(strategy->Ask().empty());
  EXPECT_TRUE(strategy->Skipped().empty());
}

TEST(StrategyTest, CumulativeAblationFollowsTheBestChange) {
  const SearchSpace space = Space("{name: ablation, cumulative: true}");
  auto strategy = MakeStrategy(space);
  // Accuracy by hand: stride 4 helps most in round 1, then mbconv on top of it.
  const std::map<std::string, double> accuracy = {
      {"{}", 0.70},
      {R"({"stem.stride":4})", 0.75},
      {R"({"block":"mbconv"})", 0.72},
      {R"({"block":"convnext"})", 0.74},
      {R"({"stages[1].attention.kind":{"kind":"window","window":7}})", 0.60},
      {R"({"block":"mbconv","stem.stride":4})", 0.76}};
  auto tell = [&](const Config& config) {
    Evaluation e{config, 40, {}};
    for (int seed = 1; seed <= 2; ++seed) {
      e.trials.push_back({seed, "completed",
                          json{{"val_accuracy", accuracy.at(ConfigKey(config))},
                               {"throughput", {{"samples_per_s", 1000.0}}}}});
    }
    strategy->Tell(e);
  };
  const std::vector<Proposal> round1 = strategy->Ask();
  ASSERT_EQ(round1.size(), 4u);
  for (const Proposal& p : round1) tell(p.config);
  EXPECT_TRUE(strategy->Ask().empty());  // the baseline's own evaluation is not in yet
  tell(Config::object());
  // From stride 4: convnext and the window cannot run with it.
  const std::vector<Proposal> round2 = strategy->Ask();
  EXPECT_EQ(Keys(round2), (std::set<std::string>{R"({"block":"mbconv","stem.stride":4})"}));
  EXPECT_EQ(strategy->Skipped().size(), 2u);
  for (const Proposal& p : round2) tell(p.config);
  // mbconv is kept; with it the window cannot run either: nothing left to try.
  EXPECT_TRUE(strategy->Ask().empty());
  EXPECT_TRUE(strategy->Finished());
  ASSERT_EQ(strategy->Skipped().size(), 3u);
  EXPECT_NE(strategy->Skipped()[2].find("does not divide"), std::string::npos);
}

TEST(StrategyTest, GridAndRandomSkipWhatCannotRun) {
  auto grid = MakeStrategy(Space("{name: grid}"));
  EXPECT_EQ(grid->Ask().size(), 7u);  // 12 - the baseline - 4 that cannot run
  EXPECT_EQ(grid->Skipped().size(), 4u);
  auto random = MakeStrategy(Space("{name: random, trials: 5, seed: 3}"));
  const std::vector<Proposal> sample = random->Ask();
  EXPECT_EQ(sample.size(), 5u);
  EXPECT_EQ(Keys(sample), Keys(MakeStrategy(Space("{name: random, trials: 5, seed: 3}"))->Ask()));
}

TEST(StrategyTest, SobolCoversTheRunnableSpaceWithoutDuplicates) {
  const SearchSpace space = Space("{name: sobol, seed: 4}");
  auto strategy = MakeStrategy(space);
  const std::vector<Proposal> all = strategy->Ask();
  EXPECT_EQ(all.size(), 7u);
  EXPECT_EQ(Keys(all), Keys(MakeStrategy(Space("{name: grid}"))->Ask()));
  EXPECT_EQ(strategy->Skipped().size(), 4u);
  // A budget takes a prefix of the same sequence.
  auto three = MakeStrategy(Space("{name: sobol, seed: 4, trials: 3}"))->Ask();
  ASSERT_EQ(three.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(three[i].config, all[i].config);
}

TEST(StrategyTest, Nsga2WaitsForItsGenerationAndTheBaseline) {
  const SearchSpace space = WideSpace("{name: nsga2, population: 6, generations: 3, seed: 1}");
  auto strategy = MakeStrategy(space);
  const std::vector<Proposal> first = strategy->Ask();
  ASSERT_EQ(first.size(), 6u);
  for (const Proposal& p : first) {
    EXPECT_EQ(p.config.size(), 5u);  // every dimension set
    EXPECT_FALSE(IsBaseline(space, p.config));
  }
  for (size_t i = 0; i + 1 < first.size(); ++i) strategy->Tell(Evaluate(space, first[i].config));
  EXPECT_TRUE(strategy->Ask().empty());  // one of the generation is out
  strategy->Tell(Evaluate(space, first.back().config));
  EXPECT_TRUE(strategy->Ask().empty());  // the baseline is out
  strategy->Tell(Evaluate(space, Config::object()));
  const std::vector<Proposal> second = strategy->Ask();
  EXPECT_EQ(second.size(), 6u);
  std::set<std::string> keys = Keys(first);
  for (const Proposal& p : second) EXPECT_TRUE(keys.insert(ConfigKey(p.config)).second);
}

TEST(StrategyTest, FitnessAveragesCompletedSeedsAndMeasuresViolation) {
  const SearchSpace space = WideSpace("{name: nsga2}");
  Evaluation e{Config::object(), 40, {}};
  e.trials.push_back(
      {1, "completed",
       json{{"val_accuracy", 0.8}, {"throughput", {{"samples_per_s", 100}}}, {"params", 30000}}});
  e.trials.push_back(
      {2, "completed",
       json{{"val_accuracy", 0.6}, {"throughput", {{"samples_per_s", 300}}}, {"params", 30000}}});
  e.trials.push_back({3, "diverged", json{{"val_accuracy", 0.0}}});
  const Fitness f = FitnessOf(space, e);
  ASSERT_EQ(f.objectives.size(), 2u);
  EXPECT_DOUBLE_EQ(f.objectives[0], -0.7);
  EXPECT_DOUBLE_EQ(f.objectives[1], -200);
  EXPECT_DOUBLE_EQ(f.violation, 0.5);  // params 30000 over max 20000
  Evaluation failed{Config::object(), 40, {{1, "failed", nullptr}, {2, "stopped", nullptr}}};
  EXPECT_EQ(FitnessOf(space, failed).violation, kInf);
}

// Runs `strategy` with Evaluate until it stops proposing, telling everything
// but the last `hold_back` proposals of its latest batch; returns the
// proposals in order and what was told.
std::vector<Proposal> Drive(const SearchSpace& space, Strategy& strategy, int batches, size_t hold_back,
                            std::set<std::string>* told) {
  std::vector<Proposal> all;
  strategy.Tell(Evaluate(space, Config::object()));
  for (int b = 0; b < batches; ++b) {
    const std::vector<Proposal> batch = strategy.Ask();
    if (batch.empty()) break;
    all.insert(all.end(), batch.begin(), batch.end());
    const size_t tell = b + 1 == batches ? batch.size() - std::min(hold_back, batch.size()) : batch.size();
    for (size_t i = 0; i < tell; ++i) {
      strategy.Tell(Evaluate(space, batch[i].config));
      told->insert(ConfigKey(batch[i].config));
    }
  }
  return all;
}

TEST(ReplayTest, RebuildingFromTheHistoryGivesTheSameProposals) {
  for (const char* name : {"{name: nsga2, population: 6, generations: 6, seed: 3}",
                           "{name: ablation, cumulative: true}", "{name: sobol, trials: 10, seed: 2}"}) {
    SCOPED_TRACE(name);
    const SearchSpace space = WideSpace(name);
    auto original = MakeStrategy(space);
    std::set<std::string> told;
    const std::vector<Proposal> history_proposals = Drive(space, *original, 3, 2, &told);
    std::vector<StoredProposal> history;
    for (const Proposal& p : history_proposals) {
      history.push_back({p, told.count(ConfigKey(p.config))
                                ? std::optional<Evaluation>(Evaluate(space, p.config))
                                : std::nullopt});
    }
    auto rebuilt = MakeStrategy(space);
    EXPECT_TRUE(Replay(*rebuilt, Evaluate(space, Config::object()), history).empty());
    // From here both go on identically.
    for (const Proposal& p : history_proposals) {
      if (told.count(ConfigKey(p.config))) continue;
      original->Tell(Evaluate(space, p.config));
      rebuilt->Tell(Evaluate(space, p.config));
    }
    for (int round = 0; round < 4; ++round) {
      const std::vector<Proposal> a = original->Ask(), b = rebuilt->Ask();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].config, b[i].config);
      for (const Proposal& p : a) {
        original->Tell(Evaluate(space, p.config));
        rebuilt->Tell(Evaluate(space, p.config));
      }
    }
    EXPECT_EQ(original->Finished(), rebuilt->Finished());
  }
}

TEST(ReplayTest, ReturnsWhatTheStoreIsMissing) {
  const SearchSpace space = WideSpace("{name: nsga2, population: 4, generations: 3, seed: 8}");
  auto original = MakeStrategy(space);
  const Evaluation baseline = Evaluate(space, Config::object());
  original->Tell(baseline);
  const std::vector<Proposal> first = original->Ask();
  std::vector<StoredProposal> history;
  for (const Proposal& p : first) {
    original->Tell(Evaluate(space, p.config));
    history.push_back({p, Evaluate(space, p.config)});
  }
  const std::vector<Proposal> second = original->Ask();  // the coordinator stopped before storing these
  auto rebuilt = MakeStrategy(space);
  const std::vector<Proposal> beyond = Replay(*rebuilt, baseline, history);
  ASSERT_EQ(beyond.size(), second.size());
  for (size_t i = 0; i < beyond.size(); ++i) EXPECT_EQ(beyond[i].config, second[i].config);
  // A history from elsewhere matches nothing: nothing new is proposed.
  auto other = MakeStrategy(WideSpace("{name: nsga2, population: 4, generations: 3, seed: 9}"));
  EXPECT_TRUE(Replay(*other, baseline, history).empty());
}

// ---------------------------------------------------------------- early stopping

TEST(EarlyStoppingTest, DecidesAtRungsFromEvalAndProgressEvents) {
  const SearchSpace space = Space("{name: asha, min_steps: 10, eta: 2}");
  std::unique_ptr<EarlyStopping> stopping = MakeEarlyStopping(space);
  ASSERT_NE(stopping, nullptr);
  EXPECT_EQ(stopping->rungs(), (std::vector<int>{10, 20}));
  EXPECT_EQ(MakeEarlyStopping(Space("{name: random}")), nullptr);
  auto eval = [](int step, double accuracy, double train_time_s) {
    return json{{"event", "eval"},
                {"step", step},
                {"val_accuracy", accuracy},
                {"val_loss", 1.0},
                {"train_time_s", train_time_s}};
  };
  const RunningTrial a{"t1", "A", 1, false, 8}, b{"t2", "B", 1, false, 8}, c{"t3", "C", 1, false, 8},
      d{"t4", "D", 1, false, 8};
  const RunningTrial base{"t0", "{}", 1, true, 8};
  // A: 0.5 at 100 samples/s (median step 80 ms from its progress event).
  EXPECT_FALSE(
      stopping->Observe(a, json{{"event", "progress"}, {"step", 5}, {"median_step_time_ms", 80.0}}).stop);
  EXPECT_FALSE(stopping->Observe(a, eval(10, 0.5, 1.0)).stop);
  // B: worse accuracy and slower (mean step 0.2 s = 40 samples/s): dominated, stops.
  const StopDecision stop_b = stopping->Observe(b, eval(10, 0.4, 2.0));
  EXPECT_TRUE(stop_b.stop);
  EXPECT_NE(stop_b.reason.find("step 10"), std::string::npos);
  // C: less accurate but faster (400 samples/s): not dominated, and the
  // fastest: an extreme of the first front, which goes on although 3 at the
  // rung let the best 1 go on.
  EXPECT_FALSE(stopping->Observe(c, eval(10, 0.45, 0.2)).stop);
  // D: between A and C on the first front (0.48 at 200 samples/s): 3rd of 4, the best 2 go on.
  const StopDecision stop_d = stopping->Observe(d, eval(10, 0.48, 0.4));
  EXPECT_TRUE(stop_d.stop);
  EXPECT_NE(stop_d.reason.find("ranked 3 of 4"), std::string::npos);
  // The baseline is scored but never stopped; evals off the rungs go on.
  EXPECT_FALSE(stopping->Observe(base, eval(10, 0.1, 9.0)).stop);
  EXPECT_FALSE(stopping->Observe(a, eval(15, 0.1, 9.0)).stop);
  EXPECT_FALSE(stopping->Observe(a, json{{"event", "start"}}).stop);
}

TEST(EarlyStoppingTest, LaterSeedsOfAStoppedConfigurationStopAtTheirNextEvent) {
  const SearchSpace space = Space("{name: asha, min_steps: 10, eta: 2}");  // rungs 10, 20
  std::unique_ptr<EarlyStopping> stopping = MakeEarlyStopping(space);
  auto eval = [](int step, double accuracy) {
    return json{{"event", "eval"}, {"step", step}, {"val_accuracy", accuracy}, {"train_time_s", step * 0.01}};
  };
  const json progress = {{"event", "progress"}, {"step", 5}, {"median_step_time_ms", 10.0}};
  const RunningTrial a1{"t1", "A", 1, false, 8}, a2{"t2", "A", 2, false, 8}, b1{"t3", "B", 1, false, 8},
      b2{"t4", "B", 2, false, 8};
  EXPECT_FALSE(stopping->PassedFirstRung("A"));
  EXPECT_FALSE(stopping->Observe(a1, eval(10, 0.6)).stop);
  EXPECT_TRUE(stopping->PassedFirstRung("A"));
  EXPECT_FALSE(stopping->Observe(b1, eval(10, 0.7)).stop);
  EXPECT_TRUE(stopping->PassedFirstRung("B"));
  // A's second seed runs while A goes on.
  EXPECT_FALSE(stopping->Observe(a2, progress).stop);
  EXPECT_FALSE(stopping->Stopped("A").has_value());
  // A stops at rung 20: its second seed, at step 5, stops at its next event
  // with A's reason, and is not scored at any rung.
  EXPECT_FALSE(stopping->Observe(b1, eval(20, 0.8)).stop);
  const StopDecision a_at_20 = stopping->Observe(a1, eval(20, 0.5));
  ASSERT_TRUE(a_at_20.stop);
  EXPECT_TRUE(stopping->PassedFirstRung("A"));  // it did pass the first rung
  const StopDecision a2_next = stopping->Observe(a2, progress);
  EXPECT_TRUE(a2_next.stop);
  EXPECT_EQ(a2_next.reason, a_at_20.reason);
  EXPECT_EQ(stopping->Observe(a2, eval(10, 0.99)).reason, a_at_20.reason);
  // B's second seed is not affected.
  EXPECT_FALSE(stopping->Observe(b2, progress).stop);
  EXPECT_FALSE(stopping->Observe(b2, eval(10, 0.1)).stop);
  // Stopped at the first rung: it never passed it.
  EXPECT_TRUE(stopping->Observe({"t5", "C", 1, false, 8}, eval(10, 0.1)).stop);
  EXPECT_FALSE(stopping->PassedFirstRung("C"));
}

}  // namespace
}  // namespace frontier
