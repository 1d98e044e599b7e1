// Strategies over a search space, driven directly (no store, no gRPC):
// space files naming strategies, ablation's one-factor set, grid/random/
// Sobol'/NSGA-II/TPE proposals, fitness over seeds, restart reconstruction by
// replay and ASHA's early stopping from events. The algorithms alone:
// search_algorithms_test.cc.
#include "server/search/strategy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "server/analysis/pareto.h"
#include "server/search/asha.h"
#include "server/search/genome.h"
#include "server/search/nsga2.h"
#include "server/search/sobol.h"

namespace frontier {
namespace {

using nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();

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
       "strategy.name: unknown choice 'bayes'; expected one of grid, random, sobol, nsga2, tpe, asha, "
       "ablation, external"},
      {"{name: grid, trials: 5}",
       "strategy.trials: applies to strategies asha, external, nsga2, random, sobol, tpe only"},
      {"{name: tpe, population: 4}", "strategy.population: applies to strategies asha, nsga2 only"},
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

// The parser bounds what sobol lists at submission; so does sobol itself,
// for a space that did not pass it (here: 10^5 x 2 = 200000 configurations
// without trials, which it once listed in full, or without end on a larger grid).
TEST(StrategyTest, SobolNeverListsMoreThanTheBound) {
  std::string yaml =
      "name: big\ntask: {steps: 100, warmup_steps: 10}\ntrial:\n  command: [/bin/sh, train.sh]\n"
      "  params: {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1}\nspace:\n";
  for (const char* p : {"a", "b", "c", "d", "e"})
    yaml += std::string("  params.") + p + ": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
  yaml += "  params.f: [0, 1]\nobjectives: [{metric: val_accuracy}]\nstrategy: {name: sobol, trials: 3}\n";
  SearchSpace space = ParseSearchSpace(yaml, "big.yaml");
  EXPECT_EQ(MakeStrategy(space)->Ask().size(), 3u);
  space.strategy.trials = 0;
  try {
    MakeStrategy(space);
    FAIL() << "listed";
  } catch (const SpaceError& e) {
    EXPECT_STREQ(
        e.what(),
        "big.yaml: strategy: sobol would list 200000 configurations at submission, more than 100000");
  }
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

TEST(StrategyTest, TpeWaitsForItsRoundAndTheBaseline) {
  const SearchSpace space = WideSpace("{name: tpe, trials: 13, seed: 1}");
  EXPECT_EQ(Space("{name: tpe, trials: 5, seed: 2}").strategy.trials, 5);
  auto strategy = MakeStrategy(space);
  const std::vector<Proposal> first = strategy->Ask();
  ASSERT_EQ(first.size(), 10u);  // the startup round
  for (const Proposal& p : first) {
    EXPECT_EQ(p.config.size(), 5u);
    EXPECT_FALSE(IsBaseline(space, p.config));
  }
  for (size_t i = 0; i + 1 < first.size(); ++i) strategy->Tell(Evaluate(space, first[i].config));
  EXPECT_TRUE(strategy->Ask().empty());  // one of the round is out
  strategy->Tell(Evaluate(space, first.back().config));
  EXPECT_TRUE(strategy->Ask().empty());  // the baseline is out
  strategy->Tell(Evaluate(space, Config::object()));
  std::set<std::string> keys = Keys(first);
  for (int round = 0; round < 3; ++round) {
    const std::vector<Proposal> next = strategy->Ask();
    ASSERT_EQ(next.size(), 1u);
    EXPECT_TRUE(keys.insert(ConfigKey(next[0].config)).second);
    EXPECT_FALSE(strategy->Finished());
    strategy->Tell(Evaluate(space, next[0].config));
  }
  EXPECT_TRUE(strategy->Ask().empty());
  EXPECT_TRUE(strategy->Finished());  // trials: 13
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
  for (const char* name :
       {"{name: nsga2, population: 6, generations: 6, seed: 3}", "{name: ablation, cumulative: true}",
        "{name: sobol, trials: 10, seed: 2}", "{name: tpe, trials: 24, seed: 4}"}) {
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
