// Speed-first screening (docs/strategies.md#screening): the drop rule on
// hand-made measurements with known answers, and the scheduler's flow over an
// in-memory SQLite store with a fake clock (screening trials first, dropped
// configurations never leased, kept ones run by the strategy, a failed
// screening trial, a restart giving the same decisions), and the report.
#include "server/search/screen.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include <sqlite3.h>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/report/report.h"
#include "server/scheduler/scheduler.h"
#include "server/search/strategy.h"
#include "server/store/sqlite_store.h"
#include "tests/server/fake_clock.h"

namespace frontier {
namespace {

ScreenMeasurement Measured(const std::string& key, std::map<std::string, double> values) {
  ScreenMeasurement m;
  m.config_key = key;
  m.values = std::move(values);
  return m;
}

const std::vector<Objective> kQualityAndSpeed = {{"val_accuracy", true}, {"throughput", true}};

ScreenSpec Spec() {
  ScreenSpec s;
  s.steps = 20;
  s.margin = 0.5;
  return s;  // noise 0.05: dropped below 0.475 x the baseline
}

TEST(ScreenOut, TheDefaultMarginDropsOnlyBelowATenthOfTheBaseline) {
  ScreenSpec screen;
  screen.steps = 20;  // margin 0.9, noise 0.05: dropped below 0.095 x the baseline
  const ScreenMeasurement base = Measured("{}", {{"throughput", 1000}});
  const std::vector<ScreenVerdict> v = ScreenOut(kQualityAndSpeed, {}, screen, base,
                                                 {Measured("slow", {{"throughput", 90}}),
                                                  Measured("edge", {{"throughput", 100}})});
  EXPECT_FALSE(v[0].kept);
  EXPECT_TRUE(v[1].kept) << v[1].reason;
}

TEST(ScreenOut, DropsOverTheMemoryLimitOnlyBeyondTheNoise) {
  const ScreenMeasurement base = Measured("{}", {{"throughput", 1000}, {"peak_memory_mb", 100}});
  const std::vector<ScreenVerdict> v =
      ScreenOut(kQualityAndSpeed, {{"peak_memory_mb", std::nullopt, 512.0}}, Spec(), base,
                {Measured("a", {{"throughput", 2000}, {"peak_memory_mb", 600}}),
                 Measured("b", {{"throughput", 2000}, {"peak_memory_mb", 530}})});  // 512 x 1.05 = 537.6
  ASSERT_EQ(v.size(), 2u);
  EXPECT_FALSE(v[0].kept);
  EXPECT_NE(v[0].reason.find("peak_memory_mb 600 over the limit 512"), std::string::npos) << v[0].reason;
  EXPECT_TRUE(v[1].kept) << v[1].reason;
}

TEST(ScreenOut, DropsMuchSlowerThanTheBaselineAndKeepsWithinNoise) {
  const ScreenMeasurement base = Measured("{}", {{"throughput", 1000}});
  const std::vector<ScreenVerdict> v = ScreenOut(kQualityAndSpeed, {}, Spec(), base,
                                                 {Measured("slow", {{"throughput", 300}}),
                                                  Measured("edge", {{"throughput", 480}}),
                                                  Measured("noise", {{"throughput", 970}}),
                                                  Measured("fast", {{"throughput", 3000}})});
  EXPECT_FALSE(v[0].kept);
  EXPECT_NE(v[0].reason.find("throughput 300 against the baseline's 1000"), std::string::npos) << v[0].reason;
  EXPECT_TRUE(v[1].kept);  // 0.48 > 0.475
  EXPECT_TRUE(v[2].kept);
  EXPECT_TRUE(v[3].kept);
}

TEST(ScreenOut, MinimizedObjectivesAndEverySpeedObjectiveMustBeWorse) {
  const std::vector<Objective> objectives = {{"step_time_ms", false}, {"peak_memory_mb", false}};
  const ScreenMeasurement base = Measured("{}", {{"step_time_ms", 10}, {"peak_memory_mb", 100}});
  const std::vector<ScreenVerdict> v =
      ScreenOut(objectives, {}, Spec(), base,
                {Measured("both", {{"step_time_ms", 30}, {"peak_memory_mb", 300}}),
                 Measured("one", {{"step_time_ms", 30}, {"peak_memory_mb", 90}})});
  EXPECT_FALSE(v[0].kept);
  EXPECT_TRUE(v[1].kept) << "better on one speed objective: it may be on the front";
}

TEST(ScreenOut, QualityNeverDrops) {
  const ScreenMeasurement base = Measured("{}", {{"throughput", 1000}});
  ScreenMeasurement m = Measured("q", {{"throughput", 1000}});
  m.values["val_accuracy"] = 0.01;  // even if a result carried it, it is not a screened metric
  const std::vector<ScreenVerdict> v =
      ScreenOut({{"val_accuracy", true}}, {{"val_accuracy", 0.9, std::nullopt}}, Spec(), base,
                {m, Measured("slow", {{"throughput", 10}})});
  EXPECT_TRUE(v[0].kept);
  EXPECT_TRUE(v[1].kept) << "no speed objective: slowness alone cannot keep it off the front";
}

TEST(ScreenOut, FailedTrialsAreDroppedAndAFailedBaselineJudgesNothing) {
  ScreenMeasurement base = Measured("{}", {});
  base.failed = true;
  ScreenMeasurement oom = Measured("oom", {});
  oom.failed = true;
  oom.error = "out of memory";
  const std::vector<ScreenVerdict> v =
      ScreenOut(kQualityAndSpeed, {}, Spec(), base, {oom, Measured("slow", {{"throughput", 1}})});
  EXPECT_FALSE(v[0].kept);
  EXPECT_EQ(v[0].reason, "screening trial failed: out of memory");
  EXPECT_TRUE(v[1].kept);
}

TEST(ScreenOut, MeasuresFromAResultAndTheStoredResultHasNoQuality) {
  const nlohmann::json result = {{"status", "completed"},
                                 {"throughput", {{"samples_per_s", 123.0}}},
                                 {"peak_memory_mb", 7.5},
                                 {"val_accuracy", 0.4},
                                 {"test_accuracy", 0.4},
                                 {"evals", nlohmann::json::array()}};
  const nlohmann::json stored = ScreenedResult(result, 20);
  EXPECT_FALSE(stored.contains("val_accuracy"));
  EXPECT_FALSE(stored.contains("test_accuracy"));
  EXPECT_FALSE(stored.contains("evals"));
  EXPECT_EQ(stored["screen"]["steps"], 20);
  const ScreenMeasurement m = MeasureScreened("k", kScreenedState, stored, "");
  EXPECT_FALSE(m.failed);
  EXPECT_DOUBLE_EQ(m.values.at("throughput"), 123.0);
  EXPECT_DOUBLE_EQ(m.values.at("peak_memory_mb"), 7.5);
  EXPECT_FALSE(m.values.count("val_accuracy"));
  EXPECT_TRUE(MeasureScreened("k", "failed", nullptr, "lease expired").failed);
}

// The baseline (basic) and two variants; ASHA-free grid over them.
constexpr const char* kSpace = R"(
name: screened
task: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3},
       batch_size: 8, steps: 8, warmup_steps: 2, eval_every: 0}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
  runtime: {threads: 1}
space:
  stages[*].block: [basic, mbconv, convnext]
objectives: [{metric: val_accuracy, goal: maximize}, {metric: throughput, goal: maximize}]
constraints: [{metric: peak_memory_mb, max: 100}]
repeats: 2
screen: {steps: 3, margin: 0.5}
)";

constexpr const char* kMbconv = R"({"stages[*].block":"mbconv"})";
constexpr const char* kConvnext = R"({"stages[*].block":"convnext"})";

std::string ScreenResult(double throughput, double memory) {
  return nlohmann::json{{"event", "result"},
                        {"status", "completed"},
                        {"throughput", {{"samples_per_s", throughput}}},
                        {"peak_memory_mb", memory},
                        {"val_accuracy", 0.34}}
      .dump();
}

std::string FullResult() {
  return nlohmann::json{{"event", "result"},
                        {"status", "completed"},
                        {"throughput", {{"samples_per_s", 1000.0}}},
                        {"peak_memory_mb", 50.0},
                        {"val_accuracy", 0.8}}
      .dump();
}

class ScreenSchedulerTest : public ::testing::Test {
 protected:
  static SchedulerOptions Options() {
    SchedulerOptions o;
    o.lease_timeout_ms = 10'000;
    o.restart_grace_ms = 30'000;
    return o;
  }
  // Leases the three screening trials and ends them: the baseline at 1000
  // samples/s, mbconv at 300 (dropped: slower by more than the margin),
  // convnext as `convnext` says.
  void Screen(Scheduler& scheduler, bool convnext_fails) {
    for (int i = 0; i < 3; ++i) {
      std::optional<TrialRow> t = scheduler.Lease("w1");
      ASSERT_TRUE(t.has_value());
      EXPECT_EQ(t->proposer, kScreenProposer);
      EXPECT_EQ(t->steps, 3);
      const nlohmann::json spec = nlohmann::json::parse(t->spec_json);
      EXPECT_EQ(spec["task"]["steps"], 3);
      EXPECT_EQ(spec["task"]["eval_every"], 0);
      EXPECT_EQ(spec["profile"]["steps"], 0);
      EXPECT_EQ(spec["latency"]["repetitions"], 0);
      if (t->config_json == kConvnext && convnext_fails) {
        scheduler.Fail("w1", t->id, t->attempt, "out of memory", /*retryable=*/false, "");
      } else {
        const double throughput = t->is_baseline ? 1000 : t->config_json == kMbconv ? 300 : 990;
        EXPECT_EQ(scheduler.Complete("w1", t->id, t->attempt, ScreenResult(throughput, 40)), Transition::kApplied);
      }
    }
  }
  std::set<std::string> FullConfigs(const std::string& id) {
    std::set<std::string> configs;
    for (const TrialRow& row : store_.ListTrials(id)) {
      if (row.proposer != kScreenProposer) configs.insert(row.config_json);
    }
    return configs;
  }
  // The experiment's trials as the report reads them.
  std::vector<TrialRecord> Records(const std::string& id) {
    std::vector<TrialRecord> records;
    for (const TrialRow& row : store_.ListTrials(id)) {
      TrialRecord r;
      r.trial_id = row.id;
      r.config_key = row.config_json;
      r.is_baseline = row.is_baseline;
      r.seed = row.seed;
      r.state = row.state;
      r.result = nlohmann::json::parse(row.result_json.empty() ? "null" : row.result_json);
      r.proposer = row.proposer;
      r.error = row.error;
      records.push_back(r);
    }
    return records;
  }
  void RunTheRest(Scheduler& scheduler) {
    while (std::optional<TrialRow> t = scheduler.Lease("w1")) {
      EXPECT_NE(t->proposer, kScreenProposer);
      EXPECT_NE(t->config_json, kMbconv) << "a dropped configuration was leased";
      scheduler.Complete("w1", t->id, t->attempt, FullResult());
    }
  }

  SqliteStore store_{":memory:"};
  FakeClock clock_;
};

TEST_F(ScreenSchedulerTest, ScreeningFirstThenOnlyTheKeptConfigurations) {
  Scheduler scheduler(store_, clock_, Options());
  const std::string id = scheduler.Submit(kSpace, "screened.yaml").id;
  const std::vector<TrialRow> first = store_.ListTrials(id);
  ASSERT_EQ(first.size(), 5u);  // three screening trials, then the baseline's two seeds
  for (int i = 0; i < 3; ++i) EXPECT_EQ(first[i].proposer, kScreenProposer);
  EXPECT_EQ(FullConfigs(id), std::set<std::string>{"{}"});

  Screen(scheduler, /*convnext_fails=*/false);
  EXPECT_EQ(FullConfigs(id), (std::set<std::string>{"{}", kConvnext}));
  for (const TrialRow& row : store_.ListTrials(id)) {
    if (row.proposer != kScreenProposer) continue;
    EXPECT_EQ(row.state, kScreenedState);
    EXPECT_FALSE(nlohmann::json::parse(row.result_json).contains("val_accuracy")) << "no quality shown";
  }
  RunTheRest(scheduler);
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kCompleted);

  // The report: screening apart from every figure, the dropped config with its reason.
  const Report report = BuildReport(id, ParseSearchSpace(kSpace, "screened.yaml"), Records(id));
  ASSERT_EQ(report.configs.size(), 2u);
  EXPECT_EQ(report.configs[0].trials_total, 2) << "the baseline's screening trial is not one of its seeds";
  ASSERT_TRUE(report.screening.has_value());
  EXPECT_EQ(report.screening->trials, 3);
  EXPECT_EQ(report.screening->dropped(), 1);
  const std::string table = RenderTable(report);
  EXPECT_NE(table.find("screened out: mbconv: throughput 300 against the baseline's 1000"), std::string::npos)
      << table;
  EXPECT_EQ(ReportToJson(report)["screening"]["dropped"], 1);
  EXPECT_NE(RenderCsv(report).find("worse than the baseline by more than the margin"), std::string::npos);
  EXPECT_NE(RenderHtml(report).find("<section id=\"screening\""), std::string::npos);
}

TEST_F(ScreenSchedulerTest, AFailedScreeningTrialDropsItsConfiguration) {
  Scheduler scheduler(store_, clock_, Options());
  const std::string id = scheduler.Submit(kSpace, "screened.yaml").id;
  Screen(scheduler, /*convnext_fails=*/true);
  EXPECT_EQ(FullConfigs(id), std::set<std::string>{"{}"});
  for (const TrialRow& row : store_.ListTrials(id)) {
    if (row.config_json == kConvnext) {
      EXPECT_EQ(row.state, kScreenedState);
      EXPECT_EQ(row.error, "out of memory");
    }
  }
  RunTheRest(scheduler);
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kCompleted);
}

TEST_F(ScreenSchedulerTest, ARestartGivesTheSameDecisions) {
  std::string id;
  {
    Scheduler before(store_, clock_, Options());
    id = before.Submit(kSpace, "screened.yaml").id;
    // Two of three screening trials end before the coordinator stops.
    for (int i = 0; i < 2; ++i) {
      std::optional<TrialRow> t = before.Lease("w1");
      const double throughput = t->is_baseline ? 1000 : t->config_json == kMbconv ? 300 : 990;
      before.Complete("w1", t->id, t->attempt, ScreenResult(throughput, 40));
    }
  }
  {
    Scheduler after(store_, clock_, Options());
    std::optional<TrialRow> t = after.Lease("w1");
    ASSERT_TRUE(t.has_value());
    EXPECT_EQ(t->proposer, kScreenProposer);
    after.Complete("w1", t->id, t->attempt, ScreenResult(990, 40));
    EXPECT_EQ(FullConfigs(id), (std::set<std::string>{"{}", kConvnext}));
  }
  // A second restart after the verdicts: the replay proposes nothing new and
  // nothing dropped.
  Scheduler again(store_, clock_, Options());
  clock_.now += 31000;
  again.Tick();
  EXPECT_EQ(FullConfigs(id), (std::set<std::string>{"{}", kConvnext}));
  RunTheRest(again);
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kCompleted);
}

TEST_F(ScreenSchedulerTest, AshaRunsOnlyTheKeptConfigurations) {
  std::string space(kSpace);
  space.replace(space.find("eval_every: 0"), 13, "eval_every: 4");
  space += "strategy: {name: asha, min_steps: 4, eta: 2}\n";
  Scheduler scheduler(store_, clock_, Options());
  const std::string id = scheduler.Submit(space, "screened.yaml").id;
  Screen(scheduler, /*convnext_fails=*/false);
  EXPECT_EQ(FullConfigs(id), (std::set<std::string>{"{}", kConvnext}));
  RunTheRest(scheduler);
  EXPECT_EQ(FullConfigs(id), (std::set<std::string>{"{}", kConvnext}));
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kCompleted);
}

// ---------------------------------------------------------------- inside the trials

// kSpace under ASHA (rungs at 4 with eta 2 and 8 steps), screened inside the
// trials: no screening trials.
std::string Replaced(std::string text, const std::string& from, const std::string& to) {
  return text.replace(text.find(from), from.size(), to);
}
std::string InTrialSpace(const std::string& constraint = "") {
  std::string space = Replaced(kSpace, "eval_every: 0", "eval_every: 4");
  space =
      Replaced(space, "screen: {steps: 3, margin: 0.5}", "screen: {steps: 3, margin: 0.5, in_trial: true}");
  if (!constraint.empty()) {
    space = Replaced(space, "constraints: [{metric: peak_memory_mb, max: 100}]",
                     "constraints: [" + constraint + "]");
  }
  return space + "strategy: {name: asha, min_steps: 4, eta: 2}\n";
}

// A progress event at `step` whose median step time gives `throughput` at batch 8.
nlohmann::json ProgressAt(int step, double throughput) {
  return {{"event", "progress"}, {"step", step}, {"median_step_time_ms", 8 * 1e3 / throughput}};
}

TEST(ScreenInTrial, EarlyStoppingDropsWhatScreeningWouldAtTheScreenedStep) {
  std::unique_ptr<EarlyStopping> stopping = MakeEarlyStopping(ParseSearchSpace(InTrialSpace(), "s.yaml"));
  const RunningTrial base{"t0", "{}", 1, true, 8}, slow{"t1", "slow", 1, false, 8},
      fast{"t2", "fast", 1, false, 8}, late{"t3", "late", 1, false, 8}, early{"t4", "early", 1, false, 8};
  // Before step 3, and at step 3 without a median (all of it warm-up), nothing is measured.
  EXPECT_FALSE(stopping->Observe(slow, ProgressAt(2, 100)).stop);
  EXPECT_FALSE(
      stopping->Observe(slow, {{"event", "progress"}, {"step", 3}, {"median_step_time_ms", 0.0}}).stop);
  // Measured before the baseline: the objectives wait for the yardstick.
  EXPECT_FALSE(stopping->Observe(early, ProgressAt(3, 300)).stop);
  EXPECT_FALSE(stopping->Stopped("early").has_value());
  EXPECT_FALSE(stopping->Observe(base, ProgressAt(3, 1000)).stop);
  // Then judged: 0.3x the baseline is under (1 - 0.5) x 0.95; it stops at its next event.
  ASSERT_TRUE(stopping->Stopped("early").has_value());
  const StopDecision early_next = stopping->Observe(early, ProgressAt(4, 300));
  EXPECT_TRUE(early_next.stop);
  EXPECT_EQ(early_next.reason.rfind("screened out: throughput 300 against the baseline's 1000", 0), 0u)
      << early_next.reason;
  // Measured by an eval event's mean step time (train_time_s / step) when no progress gave a median.
  const StopDecision slow_at_4 = stopping->Observe(
      slow, {{"event", "eval"}, {"step", 4}, {"val_accuracy", 0.9}, {"train_time_s", 0.32}});
  EXPECT_TRUE(slow_at_4.stop) << "100 samples/s is 0.1x the baseline";
  EXPECT_NE(slow_at_4.reason.find("(screened at 3 steps)"), std::string::npos) << slow_at_4.reason;
  EXPECT_FALSE(stopping->PassedFirstRung("slow")) << "dropped before ASHA scored it";
  // Within the margin: kept, and once measured never measured again.
  EXPECT_FALSE(stopping->Observe(fast, ProgressAt(3, 990)).stop);
  EXPECT_FALSE(stopping->Observe(fast, ProgressAt(5, 10)).stop);
  EXPECT_FALSE(stopping->Stopped("fast").has_value());
  EXPECT_FALSE(stopping->Observe(late, ProgressAt(6, 480)).stop) << "0.48x: kept";
}

TEST(ScreenInTrial, AConfigurationAshaScoredBeforeTheBaselineWasMeasuredIsLeftToAsha) {
  std::unique_ptr<EarlyStopping> stopping = MakeEarlyStopping(ParseSearchSpace(InTrialSpace(), "s.yaml"));
  const RunningTrial base{"t0", "{}", 1, true, 8}, ahead{"t1", "ahead", 1, false, 8},
      waiting{"t2", "waiting", 1, false, 8};
  EXPECT_FALSE(stopping->Observe(ahead, ProgressAt(3, 300)).stop);
  EXPECT_FALSE(stopping->Observe(waiting, ProgressAt(3, 300)).stop);
  // `ahead` reaches the first rung (step 4) before the baseline is measured: ASHA scores it (the first there
  // goes on).
  EXPECT_FALSE(stopping->Observe(ahead, {{"event", "eval"}, {"step", 4}, {"val_accuracy", 0.9}}).stop);
  ASSERT_TRUE(stopping->PassedFirstRung("ahead"));
  EXPECT_FALSE(stopping->Observe(base, ProgressAt(3, 1000)).stop);
  EXPECT_FALSE(stopping->Stopped("ahead").has_value()) << "ASHA let it go on at equal fidelity";
  ASSERT_TRUE(stopping->Stopped("waiting").has_value()) << "0.3x, not scored yet: screened out";
  EXPECT_EQ(stopping->Stopped("waiting")->reason.rfind("screened out: ", 0), 0u);
}

TEST(ScreenInTrial, AConstraintOnAScreenedMetricDropsAtOnceWithoutTheBaseline) {
  std::unique_ptr<EarlyStopping> stopping =
      MakeEarlyStopping(ParseSearchSpace(InTrialSpace("{metric: step_time_ms, max: 20}"), "s.yaml"));
  const StopDecision over = stopping->Observe(RunningTrial{"t1", "heavy", 1, false, 8}, ProgressAt(3, 200));
  EXPECT_TRUE(over.stop) << "40 ms a step, over 20 + 5%";
  EXPECT_NE(over.reason.find("step_time_ms 40 over the limit 20"), std::string::npos) << over.reason;
  EXPECT_FALSE(stopping->Observe(RunningTrial{"t2", "light", 1, false, 8}, ProgressAt(3, 400)).stop);
}

TEST_F(ScreenSchedulerTest, InTrialScreeningRunsNoScreeningTrialsAndStopsTheSlowConfigurationEarly) {
  const auto run = [&](Scheduler& scheduler, int trials) {
    for (int i = 0; i < trials; ++i) {
      std::optional<TrialRow> t = scheduler.Lease("w1");
      if (!t) return;
      EXPECT_NE(t->proposer, kScreenProposer);
      const double throughput = t->is_baseline ? 1000 : t->config_json == kMbconv ? 300 : 990;
      ProgressReply reply = scheduler.Progress("w1", t->id, t->attempt, ProgressAt(3, throughput).dump());
      if (!reply.stop) {
        reply = scheduler.Progress("w1", t->id, t->attempt,
                                   nlohmann::json{{"event", "eval"},
                                                  {"step", 4},
                                                  {"val_accuracy", t->is_baseline ? 0.8 : 0.9},
                                                  {"train_time_s", 4 * 8 / throughput}}
                                       .dump());
      }
      if (reply.stop) {
        EXPECT_EQ(t->config_json, kMbconv) << reply.reason;
        EXPECT_EQ(reply.reason.rfind("screened out: throughput 300 against the baseline's 1000", 0), 0u)
            << reply.reason;
        scheduler.Fail("w1", t->id, t->attempt, "stopped: " + reply.reason, false, "");
      } else {
        scheduler.Complete("w1", t->id, t->attempt, FullResult());
      }
    }
  };
  std::string id;
  {
    Scheduler scheduler(store_, clock_, Options());
    id = scheduler.Submit(InTrialSpace(), "screened.yaml").id;
    const std::vector<TrialRow> first = store_.ListTrials(id);
    ASSERT_EQ(first.size(), 4u) << "the baseline's two seeds and each variant's first: no screening trials";
    run(scheduler,
        2);  // the baseline's seeds, then a restart: the variants are judged against the replayed baseline
  }
  Scheduler after(store_, clock_, Options());
  run(after, 100);
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kCompleted);
  std::map<std::string, std::vector<std::string>> states;  // config -> its trials' states
  for (const TrialRow& row : store_.ListTrials(id)) states[row.config_json].push_back(row.state);
  EXPECT_EQ(states.at(kMbconv), std::vector<std::string>{"stopped"}) << "its second seed never added";
  EXPECT_EQ(states.at(kConvnext), (std::vector<std::string>{"completed", "completed"}));

  // The report lists the configuration screened out inside its trial, and why.
  const Report report = BuildReport(id, ParseSearchSpace(InTrialSpace(), "screened.yaml"), Records(id));
  ASSERT_TRUE(report.screening.has_value());
  EXPECT_TRUE(report.screening->in_trial);
  EXPECT_EQ(report.screening->trials, 0);
  EXPECT_EQ(report.screening->dropped(), 1);
  EXPECT_EQ(report.screening->configs.size(), 2u);
  const std::string table = RenderTable(report);
  EXPECT_NE(
      table.find("screening inside the trials (no screening trials): 1 of 2 configs screened out by step 3"),
      std::string::npos)
      << table;
  EXPECT_NE(table.find("screened out: mbconv: throughput 300 against the baseline's 1000"), std::string::npos)
      << table;
  EXPECT_EQ(ReportToJson(report)["screening"]["in_trial"], true);
  // The CSV: the dropped config is one row of the table (it has its stopped trial), with its reason.
  const std::string csv = RenderCsv(report);
  size_t mbconv_rows = 0;
  for (size_t start = 0; start < csv.size();) {
    const size_t end = std::min(csv.find('\n', start), csv.size());
    const std::string line = csv.substr(start, end - start);
    if (line.find("mbconv") != std::string::npos) {
      ++mbconv_rows;
      EXPECT_NE(line.find("worse than the baseline by more than the margin"), std::string::npos) << line;
    }
    start = end + 1;
  }
  EXPECT_EQ(mbconv_rows, 1u) << csv;
  EXPECT_NE(RenderHtml(report).find("no screening trials"), std::string::npos);
  // --pareto keeps only the front in the table, but the screening still lists every config.
  ReportBuilder builder(id, ParseSearchSpace(InTrialSpace(), "screened.yaml"));
  for (TrialRecord& r : Records(id)) builder.Add(std::move(r));
  const Report front = builder.Build(/*front_only=*/true);
  ASSERT_TRUE(front.screening.has_value());
  EXPECT_EQ(front.screening->dropped(), 1);
  EXPECT_EQ(front.screening->configs.size(), 2u);
}

// The SQL views count no screening trial: config_results' trials and the results rows.
TEST(ScreenViews, LeaveScreeningTrialsOut) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "frontier_screen_views.db";
  std::filesystem::remove(path);
  std::string id;
  {
    SqliteStore store(path.string());
    FakeClock clock;
    Scheduler scheduler(store, clock, SchedulerOptions{});
    id = scheduler.Submit(kSpace, "screened.yaml").id;
    while (std::optional<TrialRow> t = scheduler.Lease("w1")) {
      const bool screening = t->proposer == kScreenProposer;
      const double throughput = !screening || t->is_baseline ? 1000 : t->config_json == kMbconv ? 300 : 990;
      scheduler.Complete("w1", t->id, t->attempt, screening ? ScreenResult(throughput, 40) : FullResult());
    }
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  std::map<std::string, std::string> trials;  // config_json -> trials, from config_results
  const std::string sql = "SELECT config_json, trials FROM config_results WHERE experiment_id = '" + id +
                          "' UNION ALL SELECT 'results', COUNT(*) FROM results WHERE experiment_id = '" + id + "'";
  ASSERT_EQ(sqlite3_exec(
                db, sql.c_str(),
                [](void* out, int, char** values, char**) {
                  (*static_cast<std::map<std::string, std::string>*>(out))[values[0]] = values[1];
                  return 0;
                },
                &trials, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  std::filesystem::remove(path);
  EXPECT_EQ(trials, (std::map<std::string, std::string>{{"{}", "2"}, {kConvnext, "2"}, {"results", "4"}}));
}

TEST(ScreenSpace, RefusesWhatCannotBeScreened) {
  const std::string space(kSpace);
  auto refused = [](const std::string& yaml) -> std::string {
    try {
      ParseSearchSpace(yaml, "s.yaml");
    } catch (const SpaceError& e) {
      return e.what();
    }
    return "";
  };
  std::string bad = space;
  bad.replace(bad.find("screen: {steps: 3, margin: 0.5}"), 31, "screen: {steps: 8, margin: 0.5}");
  EXPECT_NE(refused(bad).find("screen.steps"), std::string::npos) << refused(bad);
  bad = space;
  bad.replace(bad.find("screen: {steps: 3, margin: 0.5}"), 31, "screen: {steps: 3, speed: 1}");
  EXPECT_NE(refused(bad).find("unknown field"), std::string::npos) << refused(bad);
  bad = space;
  bad.replace(bad.find("screen: {steps: 3, margin: 0.5}"), 31, "screen: {steps: 3, margin: 1.5}");
  EXPECT_NE(refused(bad).find("margin"), std::string::npos) << refused(bad);
  EXPECT_EQ(ParseSearchSpace(kSpace, "s.yaml").screen.steps, 3);
  // Inside the trials: strategy asha only, and a boolean.
  bad = space;
  bad.replace(bad.find("screen: {steps: 3, margin: 0.5}"), 31, "screen: {steps: 3, in_trial: true}");
  EXPECT_NE(refused(bad).find("screen.in_trial: screening inside the trials needs strategy asha"),
            std::string::npos)
      << refused(bad);
  EXPECT_NE(refused(Replaced(InTrialSpace(), "in_trial: true", "in_trial: 1")).find("expected true or false"),
            std::string::npos);
  EXPECT_TRUE(ParseSearchSpace(InTrialSpace(), "s.yaml").screen.in_trial);
  const std::string late = Replaced(InTrialSpace(), "screen: {steps: 3,", "screen: {steps: 5,");
  EXPECT_NE(refused(late).find("before ASHA's first rung (4 steps), not at 5"), std::string::npos)
      << refused(late);
}

}  // namespace
}  // namespace frontier
