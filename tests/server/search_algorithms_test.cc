// The search algorithms on hand-made inputs with known answers, driven
// directly (no store, no gRPC): constraint-dominance ranking fixtures, Sobol'
// against reference values, genome streams, NSGA-II invariants, TPE on
// spaces with a known front or constraint, and ASHA on scripted results. Strategies over a search space:
// strategy_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "server/analysis/pareto.h"
#include "server/search/asha.h"
#include "server/search/genome.h"
#include "server/search/nsga2.h"
#include "server/search/sobol.h"
#include "server/search/tpe.h"

namespace frontier {
namespace {

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

TEST(ParetoTest, CrowdingOrderPutsBoundariesFirstAndKeepsTiesInTheFrontsOrder) {
  // A front of 6 on a line from (0,10) to (10,0), both objectives spanning
  // 10: the boundaries at +infinity; (6,4) 0.5 + 0.5; (3,7) and (8,2) tie at
  // 0.4 + 0.4; (2,8) 0.3 + 0.3.
  const std::vector<Fitness> points = {Point({99, 99}), Point({6, 4}),  Point({10, 0}), Point({2, 8}),
                                       Point({3, 7}),   Point({0, 10}), Point({8, 2})};
  const std::vector<size_t> front = {1, 2, 3, 4, 5, 6};  // position k holds member front[k]
  const std::vector<double> distance = CrowdingDistances(points, front);
  ASSERT_EQ(distance[3], distance[5]) << "the tie this test is about";
  EXPECT_EQ(CrowdingOrder(distance), (std::vector<size_t>{1, 4, 0, 3, 5, 2}));
  // Equal distances keep the front's order, also among boundaries.
  EXPECT_EQ(CrowdingOrder({0, 0, 0}), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(CrowdingOrder({1, kInf, 1, kInf}), (std::vector<size_t>{1, 3, 0, 2}));
  EXPECT_TRUE(CrowdingOrder({}).empty());
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

// ---------------------------------------------------------------- TPE

template <typename Objective>
std::vector<Genome> RunTpe(Tpe& tpe, const Objective& objective, bool reverse_tells) {
  std::vector<Genome> all;
  for (std::vector<Genome> round = tpe.Ask(); !round.empty(); round = tpe.Ask()) {
    all.insert(all.end(), round.begin(), round.end());
    if (reverse_tells) std::reverse(round.begin(), round.end());
    for (const Genome& g : round) tpe.Tell(g, objective(g));
  }
  return all;
}

const auto kAlwaysAdmissible = [](const Genome&) { return true; };

TEST(TpeTest, DeterministicIndependentOfTellOrderAndNeverRepeats) {
  const std::vector<GeneSpec> genes = {{11, true}, {11, true}, {5, false}, {11, true}, {3, false}};
  auto objective = [](const Genome& g) {
    return Point(
        {static_cast<double>(g[0] + g[2]), static_cast<double>(10 - g[0] + g[1] + g[3] + (g[4] != 1))});
  };
  TpeOptions options;
  options.startup = 6;
  options.batch = 3;
  options.max_evaluations = 45;
  options.seed = 42;
  Tpe a(genes, options, kAlwaysAdmissible);
  Tpe b(genes, options, kAlwaysAdmissible);
  const std::vector<Genome> run_a = RunTpe(a, objective, false);
  EXPECT_EQ(run_a, RunTpe(b, objective, true));
  EXPECT_EQ(run_a.size(), 45u);
  EXPECT_EQ(std::set<Genome>(run_a.begin(), run_a.end()).size(), run_a.size());
  EXPECT_TRUE(a.Finished());
  EXPECT_EQ(a.rounds(), 1u + (45u - 6u) / 3u);
  options.seed = 43;
  Tpe c(genes, options, kAlwaysAdmissible);
  EXPECT_NE(RunTpe(c, objective, false), run_a);
}

TEST(TpeTest, ProposalsStayWithinEveryDimensionsChoices) {
  const std::vector<GeneSpec> genes = {{2, true}, {3, false}, {5, true}, {7, false}, {1, false}, {4, true}};
  TpeOptions options;
  options.startup = 5;
  options.batch = 4;
  options.max_evaluations = 200;
  options.seed = 2;
  Tpe tpe(genes, options, kAlwaysAdmissible);
  const std::vector<Genome> all = RunTpe(
      tpe,
      [](const Genome& g) {
        return Point({static_cast<double>(g[0] + g[1]), static_cast<double>(g[2] - g[3] + g[5])});
      },
      false);
  for (const Genome& g : all) {
    ASSERT_EQ(g.size(), genes.size());
    for (size_t d = 0; d < genes.size(); ++d) {
      EXPECT_GE(g[d], 0);
      EXPECT_LT(g[d], genes[d].levels);
    }
  }
  EXPECT_EQ(std::set<Genome>(all.begin(), all.end()).size(), all.size());
  EXPECT_EQ(all.size(), 200u);
}

// The good set's greedy hypervolume subset and its weights cost about
// points^(objectives - 1) per hypervolume: with 12 objectives and a good set
// of 25 (from 250 told genomes on) a round's model took over 10^10 steps,
// under the scheduler's lock. Beyond kMaxHypervolumeSteps the subset is taken
// by crowding distance and weighed equally instead: every round is proposed.
TEST(TpeTest, ManyObjectivesAreModelledWithoutExactHypervolumes) {
  const std::vector<GeneSpec> genes(12, GeneSpec{6, true});
  TpeOptions options;
  options.startup = 10;
  options.batch = 10;
  options.max_evaluations = 300;
  options.seed = 3;
  Tpe tpe(genes, options, kAlwaysAdmissible);
  const std::vector<Genome> all = RunTpe(
      tpe,
      [](const Genome& g) {
        std::vector<double> objectives;
        for (size_t k = 0; k < g.size(); ++k) objectives.push_back(g[k] - g[(k + 1) % g.size()]);
        return Point(objectives);
      },
      false);
  EXPECT_EQ(all.size(), 300u);
  EXPECT_EQ(std::set<Genome>(all.begin(), all.end()).size(), all.size());
  EXPECT_TRUE(tpe.Finished());
}

// A hand-made space with a known front: ordinal x and y in 0..20 and a
// categorical c of 5 choices; f1 = x, f2 = 20 - x + 4 y + 10 [c != 3]
// (both minimized). The front is y = 0, c = 3, every x: 21 of 2205 genomes.
Fitness KnownFront(const Genome& g) {
  return Point({static_cast<double>(g[0]), 20.0 - g[0] + 4.0 * g[1] + (g[2] != 3 ? 10.0 : 0.0)});
}

TEST(TpeTest, FindsMostOfAKnownFront) {
  // 120 uniform draws would hold about 1.1 front genomes (21 / 2205 each).
  const std::vector<GeneSpec> genes = {{21, true}, {21, true}, {5, false}};
  for (uint64_t seed : {1, 2, 3}) {
    SCOPED_TRACE(seed);
    TpeOptions options;
    options.max_evaluations = 120;
    options.seed = seed;
    Tpe tpe(genes, options, kAlwaysAdmissible);
    const std::vector<Genome> all = RunTpe(tpe, KnownFront, false);
    std::set<int> front_x;
    for (const Genome& g : all) {
      if (g[1] == 0 && g[2] == 3) front_x.insert(g[0]);
    }
    EXPECT_GE(front_x.size(), 14u);
  }
}

TEST(TpeTest, ConstraintsSteerProposalsToTheFeasibleOptimum) {
  // Larger x is better in both objectives but infeasible beyond 10 (violation
  // x - 10): the feasible optimum is x = 10, y = 0, one of 961 genomes (60
  // uniform draws hold it with probability 0.06). Uniform draws are feasible
  // with probability 11 / 31 = 0.355; the model's proposals measured 0.48.
  const std::vector<GeneSpec> genes = {{31, true}, {31, true}};
  auto objective = [](const Genome& g) {
    return Point({-static_cast<double>(g[0]) + g[1], -static_cast<double>(g[0]) + 2.0 * g[1]},
                 std::max(0, g[0] - 10));
  };
  size_t feasible = 0, modelled = 0;
  for (uint64_t seed : {1, 2, 3, 4, 5}) {
    SCOPED_TRACE(seed);
    TpeOptions options;
    options.max_evaluations = 60;
    options.seed = seed;
    Tpe tpe(genes, options, kAlwaysAdmissible);
    const std::vector<Genome> all = RunTpe(tpe, objective, false);
    ASSERT_EQ(all.size(), 60u);
    EXPECT_NE(std::find(all.begin(), all.end(), Genome{10, 0}), all.end());
    for (size_t i = options.startup; i < all.size(); ++i) {
      ++modelled;
      feasible += all[i][0] <= 10;
    }
  }
  EXPECT_GE(static_cast<double>(feasible) / modelled, 0.42);
}

TEST(TpeTest, ExhaustsASmallSpaceOnceAndSkipsInadmissibleGenomes) {
  // 3 x 3 = 9 genomes; {0, 0} is the baseline and {2, 2} cannot run: 7 to propose.
  const std::vector<GeneSpec> genes = {{3, false}, {3, true}};
  TpeOptions options;
  options.startup = 2;
  options.max_evaluations = 50;
  int asked = 0;
  Tpe tpe(genes, options, [&](const Genome& g) {
    ++asked;
    return g != Genome{0, 0} && g != Genome{2, 2};
  });
  const std::vector<Genome> all = RunTpe(
      tpe,
      [](const Genome& g) {
        return Point({1.0 * g[0], 1.0 * g[1]});
      },
      false);
  EXPECT_EQ(std::set<Genome>(all.begin(), all.end()).size(), 7u);
  EXPECT_EQ(all.size(), 7u);
  EXPECT_TRUE(tpe.Finished());
  EXPECT_LE(asked, 9);  // admissibility asked once per genome
}

TEST(TpeTest, ARoundWaitsForEveryTellAndTheBaselineJoinsTheModel) {
  const std::vector<GeneSpec> genes(3, GeneSpec{9, true});
  TpeOptions options;
  options.startup = 4;
  options.batch = 2;
  options.max_evaluations = 20;
  Tpe tpe(genes, options, kAlwaysAdmissible);
  const std::vector<Genome> first = tpe.Ask();
  ASSERT_EQ(first.size(), 4u);
  for (size_t i = 0; i + 1 < first.size(); ++i) tpe.Tell(first[i], KnownFront({first[i][0], first[i][1], 3}));
  EXPECT_TRUE(tpe.Ask().empty());
  tpe.Tell(first.back(), Point({1, 1}));
  // A genome told without being proposed (the baseline) is never proposed.
  Genome baseline = {0, 0, 0};
  if (std::find(first.begin(), first.end(), baseline) != first.end()) baseline = {8, 8, 8};
  tpe.Tell(baseline, Point({0, 0}));
  std::set<Genome> seen(first.begin(), first.end());
  seen.insert(baseline);
  for (std::vector<Genome> round = tpe.Ask(); !round.empty(); round = tpe.Ask()) {
    EXPECT_LE(round.size(), 2u);
    for (const Genome& g : round) {
      EXPECT_TRUE(seen.insert(g).second);
      tpe.Tell(g, Point({1.0 * g[0], 1.0 * g[1]}));
    }
  }
  EXPECT_EQ(tpe.proposed(), 20u);
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

}  // namespace
}  // namespace frontier
