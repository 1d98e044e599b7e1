// The scheduler's lease, attempt, idempotency and cancellation semantics, and
// its search (adaptive strategies, ASHA's early stopping, rebuilding after a
// restart), driven by a fake clock over an in-memory SQLite store: no sleeps.
#include "server/scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/rpc/stored_report.h"
#include "server/store/sqlite_store.h"
#include "tests/server/fake_clock.h"
#include "tests/server/trial_events.h"

namespace frontier {
namespace {

// Two configurations (the baseline and one variant) x 2 seeds = 4 trials.
constexpr const char* kSpace = R"(
name: tiny
task: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3},
       batch_size: 8, steps: 4, warmup_steps: 1, eval_every: 0}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
  runtime: {threads: 1}
space:
  stages[*].block: [basic, mbconv]
objectives: [{metric: val_accuracy, goal: maximize}, {metric: throughput, goal: maximize}]
repeats: 2
max_attempts: 2
)";

class SchedulerTest : public ::testing::Test {
 protected:
  SchedulerTest() : scheduler_(store_, clock_, Options()) {}
  static SchedulerOptions Options() {
    SchedulerOptions o;
    o.lease_timeout_ms = 10'000;
    o.restart_grace_ms = 30'000;
    return o;
  }
  std::string Submit() { return scheduler_.Submit(kSpace, "tiny.yaml").id; }
  static std::string Result(const std::string& status) {
    return nlohmann::json{{"event", "result"}, {"status", status}, {"val_accuracy", 0.5}}.dump();
  }

  SqliteStore store_{":memory:"};
  FakeClock clock_;
  Scheduler scheduler_;
};

TEST_F(SchedulerTest, SubmitExpandsBaselineAndVariantsAtEverySeed) {
  const std::string id = Submit();
  auto trials = store_.ListTrials(id);
  ASSERT_EQ(trials.size(), 4u);
  EXPECT_TRUE(trials[0].is_baseline);
  EXPECT_TRUE(trials[1].is_baseline);
  EXPECT_EQ(trials[0].seed, 1);
  EXPECT_EQ(trials[1].seed, 2);
  EXPECT_EQ(trials[2].config_json, R"({"stages[*].block":"mbconv"})");
  auto spec = nlohmann::json::parse(trials[3].spec_json);
  EXPECT_EQ(spec["seed"], 2);
  EXPECT_EQ(spec["trial_id"], trials[3].id);
  EXPECT_EQ(spec["arch"]["stages"][0]["block"], "mbconv");
  EXPECT_EQ(trials[3].max_attempts, 2);
}

// Latency and the profile depend on the configuration, not the seed: seed 1 measures them, unless the
// space asks for all.
TEST_F(SchedulerTest, OnlyTheFirstSeedMeasuresLatencyAndIsProfiledUnlessTheSpaceAsksForAll) {
  for (const std::string& section :
       {std::string(), std::string("latency: {batch_size: 4, seeds: all}\nprofile: {steps: 2, seeds: all}\n"),
        std::string("profile: {steps: 2, tool: nsys, seeds: first}\n")}) {
    SCOPED_TRACE(section);
    const bool all = section.find("seeds: all") != std::string::npos;
    const bool nsys = section.find("nsys") != std::string::npos;
    SqliteStore store(":memory:");
    Scheduler scheduler(store, clock_, Options());
    const std::string id = scheduler.Submit(std::string(kSpace) + section, "tiny.yaml").id;
    for (const TrialRow& t : store.ListTrials(id)) {
      const auto spec = nlohmann::json::parse(t.spec_json);
      EXPECT_EQ(spec["latency"]["repetitions"], t.seed == 1 || all ? 100 : 0) << t.seed;
      EXPECT_FALSE(spec["latency"].contains("seeds")) << "the space's field, not the trial spec's";
      EXPECT_FALSE(spec["profile"].contains("seeds")) << "the space's field, not the trial spec's";
      if (all) {
        EXPECT_EQ(spec["latency"]["batch_size"], 4);
      }
      const int profiled = section.empty() ? 3 : 2;  // kDefaultProfileSteps, or the section's
      EXPECT_EQ(spec["profile"]["steps"], t.seed == 1 || all ? profiled : 0) << t.seed;
      // A later seed is not wrapped in nsys either: its profile is off, not an nsys run of 0 steps.
      EXPECT_EQ(spec["profile"]["tool"], t.seed == 1 && nsys ? "nsys" : "libtorch") << t.seed;
    }
  }
  for (const std::string section : {"latency", "profile"}) {
    try {
      scheduler_.Submit(std::string(kSpace) + section + ": {seeds: 2}\n", "tiny.yaml");
      FAIL() << "accepted";
    } catch (const SpaceError& e) {
      EXPECT_NE(std::string(e.what()).find(section + ".seeds: expected first"), std::string::npos) << e.what();
    }
  }
}

TEST_F(SchedulerTest, InvalidSpaceIsRejectedWithItsLine) {
  try {
    scheduler_.Submit("name: x\nspace:\n  attention: [flash]\n", "bad.yaml");
    FAIL() << "accepted";
  } catch (const SpaceError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("bad.yaml:", 0), 0u) << e.what();
  }
  EXPECT_TRUE(store_.ListExperiments(10).empty());
}

TEST_F(SchedulerTest, ExpiredLeaseRequeuesWithTheNextAttempt) {
  Submit();
  auto first = scheduler_.Lease("w1");
  ASSERT_TRUE(first.has_value());
  clock_.now += 9'000;
  EXPECT_TRUE(scheduler_.Heartbeat("w1", first->id, 1).lease_valid);  // extends to now + 10 s
  clock_.now += 9'000;
  scheduler_.Tick();
  EXPECT_EQ(store_.GetTrial(first->id)->state, "running");
  clock_.now += 10'001;
  scheduler_.Tick();
  EXPECT_EQ(store_.GetTrial(first->id)->state, "pending");
  // The first worker learns it lost the lease, and cannot report any more.
  const HeartbeatReply late = scheduler_.Heartbeat("w1", first->id, 1);
  EXPECT_FALSE(late.lease_valid);
  EXPECT_TRUE(late.stop);
  EXPECT_TRUE(scheduler_.Progress("w1", first->id, 1, R"({"event":"progress","step":5})").stop);
  EXPECT_EQ(scheduler_.Complete("w1", first->id, 1, Result("completed")), Transition::kStale);
  auto again = scheduler_.Lease("w2");
  ASSERT_EQ(again->id, first->id);  // oldest pending first
  EXPECT_EQ(again->attempt, 2);
  EXPECT_EQ(scheduler_.Complete("w2", again->id, 2, Result("completed")), Transition::kApplied);
  EXPECT_EQ(scheduler_.Complete("w2", again->id, 2, Result("completed")), Transition::kDuplicate);
  EXPECT_EQ(store_.GetTrial(first->id)->state, "completed");
}

TEST_F(SchedulerTest, AttemptsRunOutAfterMaxAttempts) {
  Submit();
  auto t = scheduler_.Lease("w1");
  EXPECT_EQ(scheduler_.Fail("w1", t->id, 1, "frontier-trial crashed: SIGSEGV", true, ""),
            Transition::kApplied);
  t = scheduler_.Lease("w1");
  ASSERT_EQ(t->attempt, 2);
  clock_.now += 10'001;
  scheduler_.Tick();  // second attempt expires: max_attempts (2) used
  auto row = store_.GetTrial(t->id);
  EXPECT_EQ(row->state, "failed");
  EXPECT_NE(row->error.find("lease expired"), std::string::npos);
}

// Retry policy (retry_policy.h): the same failure twice in a row is a bug, not bad luck.
TEST_F(SchedulerTest, AFailureThatRepeatsItselfIsFinalAfterOneRetry) {
  std::string space = kSpace;
  space.replace(space.find("max_attempts: 2"), 15, "max_attempts: 3");
  scheduler_.Submit(space, "tiny.yaml");
  const std::string traceback =
      "ValueError: bad shape; traceback tail: File \"train.py\", line 12, in <module>";
  const std::string result = nlohmann::json{{"event", "result"}, {"schema", 1}, {"status", "failed"},
                                            {"error_kind", "exception"}, {"error", traceback}}
                                 .dump();
  auto t = scheduler_.Lease("w1");
  bool retried = false;
  ASSERT_EQ(scheduler_.Fail("w1", t->id, 1, traceback, true, result, &retried), Transition::kApplied);
  EXPECT_TRUE(retried) << "the first failure may be bad luck";
  t = scheduler_.Lease("w1");
  ASSERT_EQ(t->attempt, 2);
  ASSERT_EQ(scheduler_.Fail("w1", t->id, 2, traceback, true, result, &retried), Transition::kApplied);
  EXPECT_FALSE(retried) << "a third attempt was left, but the second failed the same way";
  const auto row = store_.GetTrial(t->id);
  EXPECT_EQ(row->state, "failed");
  EXPECT_EQ(row->error, traceback + " (final: attempt 1 failed the same way)");

  // A different failure on the next attempt is retried as before.
  t = scheduler_.Lease("w1");
  ASSERT_EQ(scheduler_.Fail("w1", t->id, 1, "frontier-trial crashed: SIGSEGV", true, "", &retried),
            Transition::kApplied);
  t = scheduler_.Lease("w1");
  ASSERT_EQ(scheduler_.Fail("w1", t->id, 2, "frontier-trial crashed: SIGBUS", true, "", &retried),
            Transition::kApplied);
  EXPECT_TRUE(retried);
  EXPECT_EQ(store_.GetTrial(t->id)->state, "pending");
}

// A result the worker sends is one it parsed: text that is not a JSON object is a bug of the sender, final at
// once (a retry would cost a whole trial for the same text), with its start quoted.
TEST_F(SchedulerTest, AResultThatIsNotAJsonObjectFailsForGoodQuotingIt) {
  scheduler_.Submit(kSpace, "tiny.yaml");
  const std::string long_text = "{\"event\": \"result\"" + std::string(300, ' ');
  const std::pair<std::string, std::string> cases[] = {
      {"{\"event\": \"result\", oops}", "unreadable result: not JSON: {\"event\": \"result\", oops}"},
      {"[1, 2]", "unreadable result: not a JSON object: [1, 2]"},
      {long_text, "unreadable result: not JSON: " + long_text.substr(0, 200) + "..."}};
  for (const auto& [text, error] : cases) {
    SCOPED_TRACE(text);
    const auto t = scheduler_.Lease("w1");
    ASSERT_TRUE(t);
    ASSERT_EQ(scheduler_.Complete("w1", t->id, t->attempt, text), Transition::kApplied);
    const auto row = store_.GetTrial(t->id);
    EXPECT_EQ(row->state, "failed");
    EXPECT_EQ(row->error, error);
  }
}

TEST_F(SchedulerTest, TimeOutsAreFinalUnlessTheSpaceRetriesThem) {
  const std::string timeout = nlohmann::json{{"event", "result"}, {"schema", 1}, {"status", "failed"},
                                             {"error_kind", "timeout"}, {"error", "timed out after 60 s"}}
                                  .dump();
  for (const bool retry_timeouts : {false, true}) {
    SCOPED_TRACE(retry_timeouts);
    SqliteStore store(":memory:");
    Scheduler scheduler(store, clock_, Options());
    scheduler.Submit(std::string(kSpace) + (retry_timeouts ? "retry_timeouts: true\n" : ""), "tiny.yaml");
    auto t = scheduler.Lease("w1");
    bool retried = !retry_timeouts;
    ASSERT_EQ(scheduler.Fail("w1", t->id, 1, "timed out after 60 s", true, timeout, &retried),
              Transition::kApplied);
    EXPECT_EQ(retried, retry_timeouts);
    const auto row = store.GetTrial(t->id);
    EXPECT_EQ(row->state, retry_timeouts ? "pending" : "failed");
    if (!retry_timeouts) {
      EXPECT_EQ(row->error,
                "timed out after 60 s (final: time-outs are not retried unless the space sets "
                "retry_timeouts: true)");
    }
  }
}

TEST_F(SchedulerTest, DivergedIsAResultAndExperimentsComplete) {
  const std::string id = Submit();
  for (int i = 0; i < 4; ++i) {
    auto t = scheduler_.Lease("w1");
    ASSERT_TRUE(t.has_value());
    ASSERT_EQ(scheduler_.Complete("w1", t->id, t->attempt, Result(i == 3 ? "diverged" : "completed")),
              Transition::kApplied);
  }
  EXPECT_FALSE(scheduler_.Lease("w1").has_value());
  EXPECT_EQ(store_.CountTrials(id).diverged, 1);
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
}

TEST_F(SchedulerTest, CancelStopsRunningAndCancelsPending) {
  const std::string id = Submit();
  auto running = scheduler_.Lease("w1");
  EXPECT_TRUE(scheduler_.Cancel(id));
  EXPECT_TRUE(scheduler_.Cancel(id));  // idempotent
  EXPECT_FALSE(scheduler_.Cancel("exp-404"));
  EXPECT_TRUE(scheduler_.Heartbeat("w1", running->id, 1).stop);
  EXPECT_TRUE(scheduler_.Progress("w1", running->id, 1, R"({"event":"progress","step":2})").stop);
  EXPECT_FALSE(scheduler_.Lease("w2").has_value());
  EXPECT_EQ(store_.CountTrials(id).cancelled, 3);
  EXPECT_EQ(store_.GetExperiment(id)->state, "cancelled");
  // The worker stops the running trial and says so: it ends cancelled too.
  EXPECT_EQ(scheduler_.Fail("w1", running->id, 1, "stopped: experiment cancelled", false, ""),
            Transition::kApplied);
  EXPECT_EQ(store_.CountTrials(id).cancelled, 4);
}

TEST_F(SchedulerTest, RestartGivesRunningTrialsAGracePeriod) {
  Submit();
  auto t = scheduler_.Lease("w1");
  clock_.now += 9'000;
  Scheduler restarted(store_, clock_, Options());  // a new coordinator on the same store
  clock_.now += 20'000;                            // past the old lease, within the grace
  restarted.Tick();
  EXPECT_EQ(store_.GetTrial(t->id)->state, "running");
  EXPECT_TRUE(restarted.Heartbeat("w1", t->id, 1).lease_valid);
  EXPECT_EQ(restarted.Complete("w1", t->id, 1, Result("completed")), Transition::kApplied);
}

TEST_F(SchedulerTest, ProgressIsRecordedPerAttempt) {
  Submit();
  auto t = scheduler_.Lease("w1");
  EXPECT_FALSE(scheduler_.Progress("w1", t->id, 1, R"({"event":"progress","step":3,"loss":1.2})").stop);
  EXPECT_FALSE(scheduler_.Progress("w1", t->id, 1, "not json").stop);  // dropped, trial goes on
  EXPECT_TRUE(scheduler_.Progress("w2", t->id, 1, R"({"event":"progress","step":4})").stop);  // not its lease
  auto rows = store_.ListProgress(t->id);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].step, 3);
}

// A worker's JSON with a field of another type ("error_kind": 7 from a
// program's result line) reads it as absent: the failure is recorded (it
// answered INTERNAL, and the trial ran on until its lease expired); a
// completion whose status is not a string is a completion.
TEST_F(SchedulerTest, ReportedFieldsOfAnotherTypeReadAsAbsent) {
  Submit();
  auto failed = scheduler_.Lease("w1");
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(scheduler_.Fail("w1", failed->id, 1, "my program found bad input", false,
                            R"({"event":"result","status":"failed","error":"bad input","error_kind":7})"),
            Transition::kApplied);
  EXPECT_EQ(store_.GetTrial(failed->id)->state, "failed");
  EXPECT_EQ(store_.GetTrial(failed->id)->error, "my program found bad input");
  auto completed = scheduler_.Lease("w1");
  ASSERT_TRUE(completed.has_value());
  EXPECT_EQ(scheduler_.Complete("w1", completed->id, 1, R"({"status":5,"val_accuracy":0.5})"),
            Transition::kApplied);
  EXPECT_EQ(store_.GetTrial(completed->id)->state, "completed");
}

// ---------------------------------------------------------------- the search

// 4 x 4 x 3 = 48 configurations on a synthetic task; strategy and repeats are appended.
constexpr const char* kSearchSpace = R"(
name: search
task: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3},
       batch_size: 8, steps: 40, warmup_steps: 1, eval_every: 10}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
  runtime: {threads: 1}
space:
  stem.width: [8, 12, 16, 20]
  stages[0].width: [8, 12, 16, 20]
  activation: [relu, gelu, silu]
objectives: [{metric: val_accuracy, goal: maximize}, {metric: throughput, goal: maximize}]
)";

std::string SearchSpaceWith(const std::string& strategy, int repeats = 2) {
  return std::string(kSearchSpace) + "strategy: " + strategy + "\nrepeats: " + std::to_string(repeats) + "\n";
}

// A made-up outcome that depends only on the configuration: wider is more
// accurate and slower.
std::string ResultFor(const std::string& config_json) {
  const nlohmann::json config = nlohmann::json::parse(config_json);
  const double width = config.value("stem.width", 8) + config.value("stages[0].width", 8);
  const double bonus = config.value("activation", "relu") == "gelu" ? 0.02 : 0.0;
  return nlohmann::json{{"event", "result"},
                        {"status", "completed"},
                        {"val_accuracy", 0.5 + width / 100 + bonus},
                        {"throughput", {{"samples_per_s", 10000 / width}}}}
      .dump();
}

// Leases and completes trials in queue order until none is pending, or
// `limit` trials were completed, each with result(trial); returns how many were.
template <typename ResultOf>
int CompleteWith(Scheduler& scheduler, FakeClock& clock, int limit, ResultOf result) {
  int done = 0;
  while (done < limit) {
    auto t = scheduler.Lease("w1");
    if (!t) break;
    clock.now += 1000;
    EXPECT_EQ(scheduler.Complete("w1", t->id, t->attempt, result(*t)), Transition::kApplied);
    ++done;
  }
  return done;
}

// The same with ResultFor the trial's configuration.
int CompleteAll(Scheduler& scheduler, FakeClock& clock, int limit = 1 << 30) {
  return CompleteWith(scheduler, clock, limit, [](const TrialRow& t) { return ResultFor(t.config_json); });
}

// config key -> its seeds, in creation order of the configurations.
std::vector<std::pair<std::string, std::vector<int64_t>>> ConfigsOf(Store& store, const std::string& id) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> configs;
  std::map<std::string, size_t> index;
  for (const TrialRow& t : store.ListTrials(id)) {
    auto [it, added] = index.emplace(t.config_json, configs.size());
    if (added) configs.push_back({t.config_json, {}});
    configs[it->second].second.push_back(t.seed);
  }
  return configs;
}

TEST_F(SchedulerTest, Nsga2AddsGenerationsAsOutcomesArriveAtEverySeed) {
  const std::string id =
      scheduler_
          .Submit(SearchSpaceWith("{name: nsga2, population: 4, generations: 3, seed: 5}"), "search.yaml")
          .id;
  EXPECT_EQ(store_.ListTrials(id).size(), 10u);  // the baseline and 4 configurations, 2 seeds each
  // Until the whole first generation and the baseline are in, nothing new.
  EXPECT_EQ(CompleteAll(scheduler_, clock_, 9), 9);
  EXPECT_EQ(store_.ListTrials(id).size(), 10u);
  EXPECT_EQ(CompleteAll(scheduler_, clock_, 1), 1);
  EXPECT_EQ(store_.ListTrials(id).size(), 18u);
  EXPECT_EQ(store_.GetExperiment(id)->state, "running");
  CompleteAll(scheduler_, clock_);
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
  const auto configs = ConfigsOf(store_, id);
  ASSERT_EQ(configs.size(), 13u);  // the baseline and 3 generations of 4, none twice
  EXPECT_EQ(configs[0].first, "{}");
  for (const auto& [config, seeds] : configs) EXPECT_EQ(seeds, (std::vector<int64_t>{1, 2})) << config;
}

// A completion the store recorded whose call never returned (a commit in
// doubt: the worker sends it again and hears "duplicate") still reaches the
// search: the last outcome of a generation brings the next one.
TEST_F(SchedulerTest, ACompletionRecordedButNeverAnsweredStillReachesTheSearch) {
  const std::string id =
      scheduler_
          .Submit(SearchSpaceWith("{name: nsga2, population: 4, generations: 3, seed: 5}"), "search.yaml")
          .id;
  EXPECT_EQ(CompleteAll(scheduler_, clock_, 9), 9);
  const std::optional<TrialRow> last = scheduler_.Lease("w1");
  ASSERT_TRUE(last.has_value());
  ASSERT_EQ(store_.FinishTrial(last->id, last->attempt, "completed", Result("completed"), "", clock_.NowMs()),
            Transition::kApplied);  // recorded, the scheduler not told
  EXPECT_EQ(store_.ListTrials(id).size(), 10u);
  EXPECT_EQ(scheduler_.Complete("w1", last->id, last->attempt, Result("completed")), Transition::kDuplicate);
  EXPECT_EQ(store_.ListTrials(id).size(), 18u);  // the second generation
  CompleteAll(scheduler_, clock_);
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
}

TEST_F(SchedulerTest, ARestartedCoordinatorContinuesTheSameSearch) {
  const std::string yaml = SearchSpaceWith("{name: nsga2, population: 4, generations: 4, seed: 7}");
  // Uninterrupted.
  SqliteStore other(":memory:");
  FakeClock other_clock;
  Scheduler uninterrupted(other, other_clock, Options());
  const std::string reference = uninterrupted.Submit(yaml, "search.yaml").id;
  CompleteAll(uninterrupted, other_clock);
  // Restarted twice: mid-generation, and right after a generation was added.
  const std::string id = scheduler_.Submit(yaml, "search.yaml").id;
  CompleteAll(scheduler_, clock_, 13);
  auto restarted = std::make_unique<Scheduler>(store_, clock_, Options());
  CompleteAll(*restarted, clock_, 5);  // completes generation 1: generation 2 is added
  restarted = std::make_unique<Scheduler>(store_, clock_, Options());
  CompleteAll(*restarted, clock_);
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
  EXPECT_EQ(ConfigsOf(store_, id), ConfigsOf(other, reference));
  EXPECT_EQ(ConfigsOf(store_, id).size(), 17u);
}

TEST_F(SchedulerTest, AblationRunsTheOneFactorSetAndTheBaselineAtEverySeed) {
  const std::string id = scheduler_.Submit(SearchSpaceWith("{name: ablation}"), "search.yaml").id;
  const auto configs = ConfigsOf(store_, id);
  std::set<std::string> keys;
  for (const auto& [config, seeds] : configs) {
    keys.insert(config);
    EXPECT_EQ(seeds, (std::vector<int64_t>{1, 2})) << config;
  }
  EXPECT_EQ(keys, (std::set<std::string>{"{}", R"({"stem.width":12})", R"({"stem.width":16})",
                                         R"({"stem.width":20})", R"({"stages[0].width":12})",
                                         R"({"stages[0].width":16})", R"({"stages[0].width":20})",
                                         R"({"activation":"gelu"})", R"({"activation":"silu"})"}));
}

TEST_F(SchedulerTest, CumulativeAblationAddsRoundsUntilNothingImproves) {
  const std::string id =
      scheduler_.Submit(SearchSpaceWith("{name: ablation, cumulative: true}"), "search.yaml").id;
  CompleteAll(scheduler_, clock_);
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
  std::set<std::string> keys;
  for (const auto& [config, seeds] : ConfigsOf(store_, id)) keys.insert(config);
  // Round 1: 8 one-factor changes; the widest stem wins. Round 2 from it: 5; the
  // widest stage wins. Round 3: gelu and silu; gelu wins. Then nothing is left.
  EXPECT_EQ(keys.size(), 1u + 8 + 5 + 2);
  EXPECT_TRUE(keys.count(R"({"activation":"gelu","stages[0].width":20,"stem.width":20})"));
}

TEST_F(SchedulerTest, AshaStopsTrialsAtRungsButNeverTheBaseline) {
  const std::string id =
      scheduler_
          .Submit(SearchSpaceWith("{name: asha, min_steps: 10, eta: 2, trials: 3, seed: 1}", 1),
                  "search.yaml")
          .id;
  ASSERT_EQ(store_.ListTrials(id).size(), 4u);
  std::vector<std::string> states;
  const std::vector<double> accuracy = {0.2, 0.6, 0.4, 0.7};  // baseline first, in queue order
  for (double acc : accuracy) {
    auto t = scheduler_.Lease("w1");
    ASSERT_TRUE(t.has_value());
    clock_.now += 1000;
    const ProgressReply reply = scheduler_.Progress("w1", t->id, t->attempt, EvalEvent(10, acc));
    if (reply.stop) {
      EXPECT_EQ(reply.reason.rfind("asha: at step 10", 0), 0u) << reply.reason;
      EXPECT_EQ(scheduler_.Fail("w1", t->id, t->attempt, "stopped: " + reply.reason, false, ""),
                Transition::kApplied);
    } else {
      EXPECT_FALSE(scheduler_.Progress("w1", t->id, t->attempt, EvalEvent(20, acc)).stop);
      EXPECT_EQ(scheduler_.Complete("w1", t->id, t->attempt, ResultFor(t->config_json)),
                Transition::kApplied);
    }
    states.push_back(store_.GetTrial(t->id)->state);
  }
  // The worst baseline continues; 0.6 is best of 2; 0.4 is 2nd of 3 (1 continues); 0.7 is best of 4.
  EXPECT_EQ(states, (std::vector<std::string>{"completed", "completed", "stopped", "completed"}));
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
}

TEST_F(SchedulerTest, AshaDecisionsAreRebuiltAfterARestart) {
  const std::string id =
      scheduler_
          .Submit(SearchSpaceWith("{name: asha, min_steps: 10, eta: 2, trials: 3, seed: 1}", 1),
                  "search.yaml")
          .id;
  for (double acc : {0.5, 0.6}) {
    auto t = scheduler_.Lease("w1");
    clock_.now += 1000;
    EXPECT_FALSE(scheduler_.Progress("w1", t->id, t->attempt, EvalEvent(10, acc)).stop);
  }
  Scheduler restarted(store_, clock_, Options());
  auto t = restarted.Lease("w1");
  clock_.now += 1000;
  // 0.55 is 2nd of 3 at the rung: stopped, as before the restart. A fresh
  // ASHA would have let it through as the first at the rung.
  EXPECT_TRUE(restarted.Progress("w1", t->id, t->attempt, EvalEvent(10, 0.55)).stop);
  EXPECT_EQ(store_.ListTrials(id).size(), 4u);
}

// A progress event at `step` (no step time: the eval events' train_time_s give every trial the same speed).
std::string ProgressAt(int step) { return nlohmann::json{{"event", "progress"}, {"step", step}}.dump(); }

// Every trial as "config seed state", in creation order.
std::vector<std::string> TrialTable(Store& store, const std::string& id) {
  std::vector<std::string> table;
  for (const TrialRow& t : store.ListTrials(id)) {
    table.push_back(t.id + " " + t.config_json + " " + std::to_string(t.seed) + " " + t.state);
  }
  return table;
}

// A scripted ASHA run with delayed seeds: 4 configurations P, Q, R, S (in
// queue order) and the baseline, 2 seeds, rungs 10 and 20, eta 2, every trial
// equally fast (accuracy decides). `restart_before` lists the steps before
// which the coordinator restarts (a fresh Scheduler over the same store);
// with `lost_reply`, P's first-rung report is recorded but the coordinator
// stops before deciding on it (and adding P's second seed), and restarts.
// Returns the trial table at the end.
std::vector<std::string> RunDelayedSeedsScript(SqliteStore& store, FakeClock& clock, SchedulerOptions options,
                                               std::set<int> restart_before, bool lost_reply = false) {
  auto scheduler = std::make_unique<Scheduler>(store, clock, options);
  const std::string id =
      scheduler
          ->Submit(SearchSpaceWith("{name: asha, min_steps: 10, eta: 2, trials: 4, seed: 1}", 2),
                   "search.yaml")
          .id;
  int step = 0;
  const auto next = [&] {
    if (restart_before.count(++step)) scheduler = std::make_unique<Scheduler>(store, clock, options);
    clock.now += 1000;
  };
  const auto progress = [&](const TrialRow& t, const std::string& event) {
    ++clock.now;  // every event at its own millisecond: the restart replays them in this order
    return scheduler->Progress("w1", t.id, t.attempt, event);
  };
  const auto lease = [&] {
    std::optional<TrialRow> t = scheduler->Lease("w1");
    EXPECT_TRUE(t.has_value());
    return t.value_or(TrialRow{});
  };
  const auto stop = [&](const TrialRow& t, const ProgressReply& reply) {
    EXPECT_TRUE(reply.stop) << t.config_json << " seed " << t.seed;
    EXPECT_EQ(scheduler->Fail("w1", t.id, t.attempt, "stopped: " + reply.reason, false, ""),
              Transition::kApplied);
  };
  const auto seeds_of = [&](const std::string& config) {
    std::vector<int64_t> seeds;
    for (const TrialRow& t : store.ListTrials(id)) {
      if (t.config_json == config) seeds.push_back(t.seed);
    }
    return seeds;
  };

  // The baseline runs both seeds at once; each configuration its first seed only.
  EXPECT_EQ(store.ListTrials(id).size(), 6u);
  for (int seed = 1; seed <= 2; ++seed) {
    next();
    const TrialRow b = lease();
    EXPECT_TRUE(b.is_baseline);
    EXPECT_FALSE(progress(b, EvalEvent(10, 0.2)).stop);
    EXPECT_FALSE(progress(b, EvalEvent(20, 0.2)).stop);
    EXPECT_EQ(scheduler->Complete("w1", b.id, b.attempt, ResultFor(b.config_json)), Transition::kApplied);
  }
  next();  // step 3: P's first seed passes the first rung; then its second seed is queued.
  const TrialRow p1 = lease();
  EXPECT_EQ(seeds_of(p1.config_json), (std::vector<int64_t>{1}));
  if (lost_reply) {
    EXPECT_TRUE(store.RecordProgress({p1.id, p1.attempt, 10, EvalEvent(10, 0.6), clock.now}, "w1",
                                     clock.now + options.lease_timeout_ms,
                                     clock.now + options.lease_timeout_ms));
    scheduler = std::make_unique<Scheduler>(store, clock, options);
    EXPECT_EQ(seeds_of(p1.config_json), (std::vector<int64_t>{1}));  // not loaded yet
  } else {
    EXPECT_FALSE(progress(p1, EvalEvent(10, 0.6)).stop);
    EXPECT_EQ(seeds_of(p1.config_json), (std::vector<int64_t>{1, 2}));
  }
  next();  // Q: 2nd of 3 at rung 10 (the best 1 continue), dominated: stopped; its second seed never runs.
  const TrialRow q1 = lease();
  EXPECT_EQ(seeds_of(p1.config_json), (std::vector<int64_t>{1, 2}));  // rebuilt from the stored event
  stop(q1, progress(q1, EvalEvent(10, 0.4)));
  next();  // R: 1st of 4, and S: 2nd of 5 (the best 2 continue).
  const TrialRow r1 = lease();
  EXPECT_FALSE(progress(r1, EvalEvent(10, 0.7)).stop);
  const TrialRow s1 = lease();
  EXPECT_FALSE(progress(s1, EvalEvent(10, 0.65)).stop);
  next();  // The second seeds, queued behind every first seed, in the order their first seeds passed.
  const TrialRow p2 = lease();
  EXPECT_EQ(p2.config_json, p1.config_json);
  EXPECT_EQ(p2.seed, 2);
  EXPECT_FALSE(progress(p2, EvalEvent(10, 0.6)).stop);
  next();  // Rung 20: P 1st of 2; R 2nd of 3, stopped.
  EXPECT_FALSE(progress(p1, EvalEvent(20, 0.5)).stop);
  stop(r1, progress(r1, EvalEvent(20, 0.3)));
  next();  // R's second seed, still pending, is ended as stopped without running: S's comes instead.
  const TrialRow s2 = lease();
  EXPECT_EQ(s2.config_json, s1.config_json);
  EXPECT_EQ(s2.seed, 2);
  next();  // S: 3rd of 4 at rung 20, stopped; its running second seed stops at its next report.
  const ProgressReply s_at_20 = progress(s1, EvalEvent(20, 0.25));
  stop(s1, s_at_20);
  const ProgressReply s2_next = progress(s2, ProgressAt(5));
  EXPECT_EQ(s2_next.reason, s_at_20.reason);
  stop(s2, s2_next);
  next();  // P goes on to the end at both seeds.
  EXPECT_FALSE(progress(p2, ProgressAt(15)).stop);
  EXPECT_FALSE(progress(p2, EvalEvent(20, 0.5)).stop);
  for (const TrialRow& p : {p1, p2}) {
    EXPECT_EQ(scheduler->Complete("w1", p.id, p.attempt, ResultFor(p.config_json)), Transition::kApplied);
  }
  EXPECT_FALSE(scheduler->Lease("w1").has_value());
  EXPECT_EQ(store.GetExperiment(id)->state, "completed");

  std::map<std::string, std::vector<std::string>> ended;  // config -> states by seed
  for (const TrialRow& t : store.ListTrials(id)) ended[t.config_json].push_back(t.state);
  EXPECT_EQ(ended.at("{}"), (std::vector<std::string>{"completed", "completed"}));
  EXPECT_EQ(ended.at(p1.config_json), (std::vector<std::string>{"completed", "completed"}));
  EXPECT_EQ(ended.at(q1.config_json), (std::vector<std::string>{"stopped"}));
  EXPECT_EQ(ended.at(r1.config_json), (std::vector<std::string>{"stopped", "stopped"}));
  EXPECT_EQ(ended.at(s1.config_json), (std::vector<std::string>{"stopped", "stopped"}));
  const std::optional<TrialRow> r2 = store.GetTrial(store.ListTrials(id)[7].id);
  EXPECT_EQ(r2->config_json, r1.config_json);
  EXPECT_EQ(r2->error.rfind("stopped: asha: at step 20", 0), 0u) << r2->error;
  EXPECT_TRUE(store.ListProgress(r2->id).empty());  // never ran
  return TrialTable(store, id);
}

// A progress event whose fields early stopping reads are of another type is
// refused, naming the field, before it is stored (it was stored, then threw;
// replayed after a restart it kept the experiment's search from loading).
TEST_F(SchedulerTest, AProgressEventOfTheWrongShapeIsRefusedBeforeItIsStored) {
  scheduler_.Submit(SearchSpaceWith("{name: asha, min_steps: 10, eta: 2, trials: 3, seed: 1}", 1),
                    "search.yaml");
  auto t = scheduler_.Lease("w1");
  ASSERT_TRUE(t.has_value());
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"({"event":5,"step":10,"val_accuracy":0.5})", "event_json.event: expected a string, got 5"},
      {R"({"event":"eval","step":3000000000,"val_accuracy":0.5})",
       "event_json.step: expected an integer in [0, 2147483647], got 3000000000"},
      {R"({"event":"eval","step":-1})", "event_json.step: expected an integer in [0, 2147483647], got -1"},
      {R"({"event":"eval","step":"10"})",
       "event_json.step: expected an integer in [0, 2147483647], got \"10\""}};
  for (const auto& [event, message] : refused) {
    try {
      scheduler_.Progress("w1", t->id, t->attempt, event);
      ADD_FAILURE() << "accepted " << event;
    } catch (const SpecError& e) {
      EXPECT_EQ(std::string(e.what()), message);
    }
  }
  EXPECT_TRUE(store_.ListProgress(t->id).empty());
  EXPECT_FALSE(scheduler_.Progress("w1", t->id, t->attempt, EvalEvent(10, 0.5)).stop);
  EXPECT_EQ(store_.ListProgress(t->id).size(), 1u);
}

// Events stored unchecked (by an older version) replay with their fields of
// another type read as absent: after a restart the search loads and decides
// as before (AshaDecisionsAreRebuiltAfterARestart).
TEST_F(SchedulerTest, StoredEventsOfTheWrongShapeReplayAsAbsentFields) {
  scheduler_.Submit(SearchSpaceWith("{name: asha, min_steps: 10, eta: 2, trials: 3, seed: 1}", 1),
                    "search.yaml");
  for (double acc : {0.5, 0.6}) {
    auto t = scheduler_.Lease("w1");
    clock_.now += 1000;
    EXPECT_FALSE(scheduler_.Progress("w1", t->id, t->attempt, EvalEvent(10, acc)).stop);
    for (const char* event : {R"({"event":5,"step":10,"val_accuracy":0.01})",
                              R"({"event":"eval","step":3000000000,"val_accuracy":0.01})",
                              R"({"event":"eval","step":1e300,"val_accuracy":0.01})"}) {
      clock_.now += 1;
      ASSERT_TRUE(store_.RecordProgress({t->id, t->attempt, 10, event, clock_.now}, "w1", clock_.now + 10'000,
                                        clock_.now));
    }
  }
  Scheduler restarted(store_, clock_, Options());
  auto t = restarted.Lease("w1");
  ASSERT_TRUE(t.has_value());
  clock_.now += 1000;
  EXPECT_TRUE(restarted.Progress("w1", t->id, t->attempt, EvalEvent(10, 0.55)).stop);
}

// An experiment whose search cannot be rebuilt after a restart (here a stored
// trial row that is not JSON) runs the trials it has; it stops no other: the
// Tick that expires both experiments' leases serves the other one.
TEST_F(SchedulerTest, OneExperimentThatCannotBeRebuiltStopsNoOther) {
  std::string yaml = kSpace;
  yaml.replace(yaml.find("repeats: 2"), 10, "repeats: 1");
  yaml.replace(yaml.find("max_attempts: 2"), 15, "max_attempts: 1");
  const std::string served = scheduler_.Submit(yaml, "served.yaml").id;
  const std::string broken = scheduler_.Submit(yaml, "broken.yaml").id;
  auto baseline = scheduler_.Lease("w1");
  ASSERT_EQ(baseline->experiment_id, served);
  EXPECT_EQ(scheduler_.Complete("w1", baseline->id, 1, Result("completed")), Transition::kApplied);
  auto variant = scheduler_.Lease("w1");
  ASSERT_EQ(variant->experiment_id, served);
  auto other = scheduler_.Lease("w2");
  ASSERT_EQ(other->experiment_id, broken);
  TrialRow unreadable;
  unreadable.config_json = "not json";
  unreadable.spec_json = "{}";
  unreadable.max_attempts = 1;
  store_.AddTrials(broken, {unreadable}, clock_.now);
  Scheduler restarted(store_, clock_, Options());
  clock_.now += 30'001;  // past the restart's grace: both leases expire
  EXPECT_NO_THROW(restarted.Tick());
  EXPECT_EQ(store_.GetTrial(variant->id)->state, "failed");
  EXPECT_EQ(store_.GetExperiment(served)->state, "completed");
  EXPECT_EQ(store_.GetExperiment(broken)->state, "running");
  EXPECT_NO_THROW(restarted.Tick());
}

TEST_F(SchedulerTest, AshaRunsLaterSeedsOnlyAfterTheFirstSeedPassedTheFirstRung) {
  const std::vector<std::string> table = RunDelayedSeedsScript(store_, clock_, Options(), {});
  EXPECT_EQ(table.size(), 9u);  // Q's second seed was never added
}

TEST_F(SchedulerTest, AshaDelayedSeedsAreRebuiltAfterARestart) {
  SqliteStore reference_store(":memory:");
  FakeClock reference_clock;
  const std::vector<std::string> reference =
      RunDelayedSeedsScript(reference_store, reference_clock, Options(), {});
  // Restarted before every step: the same decisions, trials and states.
  EXPECT_EQ(RunDelayedSeedsScript(store_, clock_, Options(), {1, 2, 3, 4, 5, 6, 7, 8, 9}), reference);
  // A coordinator that stopped after recording a first-rung report but
  // before adding the second seed adds it when it reloads the search.
  SqliteStore lost_store(":memory:");
  FakeClock lost_clock;
  EXPECT_EQ(RunDelayedSeedsScript(lost_store, lost_clock, Options(), {}, /*lost_reply=*/true), reference);
}

TEST_F(SchedulerTest, ACancelledSearchProposesNothingMore) {
  const std::string id =
      scheduler_
          .Submit(SearchSpaceWith("{name: nsga2, population: 4, generations: 3, seed: 5}"), "search.yaml")
          .id;
  CompleteAll(scheduler_, clock_, 9);
  auto last = scheduler_.Lease("w1");
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(scheduler_.Cancel(id));
  EXPECT_EQ(scheduler_.Complete("w1", last->id, last->attempt, ResultFor(last->config_json)),
            Transition::kApplied);
  EXPECT_EQ(store_.ListTrials(id).size(), 10u);
  EXPECT_EQ(store_.GetExperiment(id)->state, "cancelled");
}

// ------------------------------------------------------------ adaptive seeds

// The baseline (stem width 8) and three variants, 2 seeds each, up to 4.
constexpr const char* kAdaptiveSpace = R"(
name: adaptive
task: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3},
       batch_size: 8, steps: 40, warmup_steps: 1, eval_every: 10}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
  runtime: {threads: 1}
space:
  stem.width: [8, 12, 16, 20]
objectives: [{metric: val_accuracy, goal: maximize}, {metric: throughput, goal: maximize}]
repeats: {min: 2, max: 4}
)";

// Per seed: width 12 is as accurate as the baseline on average but swings
// +-0.03 from seed to seed (inconclusive at every look) and is faster (on the
// front); width 16 is exactly the baseline's accuracy (paired: at parity at
// the first look) and fastest; width 20 swings too but is slower and less
// accurate than the baseline even one standard error in its favour
// (inconclusive, dominated).
std::string AdaptiveResult(const TrialRow& trial) {
  const int width = nlohmann::json::parse(trial.config_json).value("stem.width", 8);
  const double base = 0.7 + 0.01 * static_cast<double>(trial.seed);
  const double swing = trial.seed % 2 == 1 ? 0.03 : -0.03;
  double accuracy = base, throughput = 100;
  if (width == 12) accuracy = base + swing, throughput = 150;
  if (width == 16) throughput = 200;
  if (width == 20) accuracy = base - 0.04 + swing / 3, throughput = 50;
  return nlohmann::json{{"event", "result"},
                        {"status", "completed"},
                        {"val_accuracy", accuracy},
                        {"throughput", {{"samples_per_s", throughput}}}}
      .dump();
}

int CompleteAdaptive(Scheduler& scheduler, FakeClock& clock, int limit = 1 << 30) {
  return CompleteWith(scheduler, clock, limit, AdaptiveResult);
}

TEST_F(SchedulerTest, AdaptiveSeedsGoToInconclusiveConfigsThatCouldReachTheFront) {
  const std::string id = scheduler_.Submit(kAdaptiveSpace, "adaptive.yaml").id;
  EXPECT_EQ(store_.ListTrials(id).size(), 8u);  // min seeds first
  CompleteAdaptive(scheduler_, clock_);
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
  const std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {
      {"{}", {1, 2, 3, 4}},                    // the paired test needs the baseline's seeds 3 and 4
      {R"({"stem.width":12})", {1, 2, 3, 4}},  // inconclusive at every look, up to max
      {R"({"stem.width":16})", {1, 2}},        // at parity after the first look
      {R"({"stem.width":20})", {1, 2}},        // inconclusive but dominated
  };
  EXPECT_EQ(ConfigsOf(store_, id), expected);
}

TEST_F(SchedulerTest, AdaptiveSeedsAreRebuiltAfterARestart) {
  SqliteStore other(":memory:");
  FakeClock other_clock;
  Scheduler uninterrupted(other, other_clock, Options());
  const std::string reference = uninterrupted.Submit(kAdaptiveSpace, "adaptive.yaml").id;
  CompleteAdaptive(uninterrupted, other_clock);
  const std::string id = scheduler_.Submit(kAdaptiveSpace, "adaptive.yaml").id;
  CompleteAdaptive(scheduler_, clock_, 9);  // the first extra seeds were added
  auto restarted = std::make_unique<Scheduler>(store_, clock_, Options());
  CompleteAdaptive(*restarted, clock_);
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
  EXPECT_EQ(ConfigsOf(store_, id), ConfigsOf(other, reference));
}

TEST_F(SchedulerTest, AnIntegerRepeatsAddsNoSeeds) {
  std::string yaml = kAdaptiveSpace;
  yaml.replace(yaml.find("repeats: {min: 2, max: 4}"), 25, "repeats: 2");
  const std::string id = scheduler_.Submit(yaml, "adaptive.yaml").id;
  CompleteAdaptive(scheduler_, clock_);
  for (const auto& [config, seeds] : ConfigsOf(store_, id))
    EXPECT_EQ(seeds, (std::vector<int64_t>{1, 2})) << config;
}


// The unpaired test: the baseline runs all its max seeds before any other
// configuration gets an extra one, so every verdict is looked at only as its
// own seeds arrive (kAdaptiveSpace's width 12 is inconclusive at every look).
TEST_F(SchedulerTest, AdaptiveSeedsWithWelchRunTheBaselinesSeedsFirst) {
  std::string yaml = kAdaptiveSpace;
  yaml.replace(yaml.find("repeats: {min: 2, max: 4}"), 25,
               "repeats: {min: 2, max: 4}\nparity: {metric: val_accuracy, margin: 0.005, test: welch}");
  const std::string id = scheduler_.Submit(yaml, "adaptive.yaml").id;
  CompleteAdaptive(scheduler_, clock_, 8);  // the first min seeds
  std::vector<std::pair<std::string, std::vector<int64_t>>> configs = ConfigsOf(store_, id);
  EXPECT_EQ(configs[0].second, (std::vector<int64_t>{1, 2, 3, 4})) << "the baseline's seeds come first";
  for (size_t i = 1; i < configs.size(); ++i) EXPECT_EQ(configs[i].second.size(), 2u) << configs[i].first;
  CompleteAdaptive(scheduler_, clock_, 1);  // one baseline seed final, one still to run: no decision yet
  for (size_t i = 1; i < ConfigsOf(store_, id).size(); ++i) EXPECT_EQ(ConfigsOf(store_, id)[i].second.size(), 2u);
  CompleteAdaptive(scheduler_, clock_);
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
  configs = ConfigsOf(store_, id);
  EXPECT_EQ(configs[0].second, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_GT(configs[1].second.size(), 2u) << configs[1].first << " is inconclusive: it gets more seeds";
}

// Quality values far from 1 (the same results x 1e200): the comparisons
// that pick adaptive seeds compute (Welch's degrees of freedom were NaN, and
// the exception escaped the completion after its result was stored, before
// the strategy was told and any seed added).
TEST_F(SchedulerTest, HugeQualityValuesStillGetAdaptiveSeeds) {
  std::string yaml = kAdaptiveSpace;
  yaml.replace(yaml.find("repeats: {min: 2, max: 4}"), 25,
               "repeats: {min: 2, max: 4}\nparity: {metric: val_accuracy, margin: 0.005, test: welch}");
  const std::string id = scheduler_.Submit(yaml, "adaptive.yaml").id;
  CompleteWith(scheduler_, clock_, 1 << 30, [](const TrialRow& trial) {
    nlohmann::json result = nlohmann::json::parse(AdaptiveResult(trial));
    result["val_accuracy"] = result["val_accuracy"].get<double>() * 1e200;
    return result.dump();
  });
  EXPECT_EQ(store_.GetExperiment(id)->state, "completed");
  const std::vector<std::pair<std::string, std::vector<int64_t>>> configs = ConfigsOf(store_, id);
  EXPECT_EQ(configs[0].second, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(configs[1].first, R"({"stem.width":12})");
  EXPECT_EQ(configs[1].second, (std::vector<int64_t>{1, 2, 3, 4})) << "inconclusive at every look";
}

// Adaptive seeds with the unpaired test, simulated under the null hypothesis
// of non-inferiority (each variant's true gain is exactly -margin, every seed
// independent) through the scheduler and the stored report: the baseline and
// two variants that both stay on the front (one faster, one smaller), seeds
// 2..6. The report's "at parity" is false for every variant here; its rate
// stays at most 5% with the looks' split alpha. A ceiling check, no more: the
// same simulation without the baseline-first rule it was written for also
// stays under 5% (0.0213), so it cannot show that rule's loss;
// SchedulerTest.AdaptiveSeedsWithWelchRunTheBaselinesSeedsFirst checks the
// rule itself, and SequentialParityTest the split against a naive 95% arm.
TEST(AdaptiveSeedsNullTest, WelchFalseParityCeilingOfFivePercent) {
  constexpr const char* kSpace = R"(
name: welch-null
task: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3},
       batch_size: 8, steps: 40, warmup_steps: 1, eval_every: 0}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
  runtime: {threads: 1}
space:
  stem.width: [8, 12, 16]
objectives: [{metric: val_accuracy}, {metric: throughput}, {metric: peak_memory_mb}]
parity: {metric: val_accuracy, margin: 0.005, test: welch}
repeats: {min: 2, max: 6}
)";
  const double margin = 0.005;
  std::mt19937_64 rng(23);
  std::normal_distribution<double> noise(0.0, 0.02);
  const int runs = 400;
  int variants = 0, false_parity = 0, extra_seeds = 0;
  for (int run = 0; run < runs; ++run) {
    SqliteStore store(":memory:");
    FakeClock clock;
    Scheduler scheduler(store, clock, SchedulerOptions{});
    const std::string id = scheduler.Submit(kSpace, "welch-null.yaml").id;
    CompleteWith(scheduler, clock, 1 << 30, [&](const TrialRow& trial) {
      const int width = nlohmann::json::parse(trial.config_json).value("stem.width", 8);
      return nlohmann::json{{"event", "result"},
                            {"status", "completed"},
                            {"val_accuracy", 0.8 - (width == 8 ? 0.0 : margin) + noise(rng)},
                            {"throughput", {{"samples_per_s", width == 12 ? 150 : 100}}},
                            {"peak_memory_mb", width == 16 ? 5 : 10}}
          .dump();
    });
    ASSERT_EQ(store.GetExperiment(id)->state, "completed");
    const std::optional<Report> report = StoredReport(store, id, false);
    ASSERT_TRUE(report.has_value());
    for (const ConfigSummary& config : report->configs) {
      if (config.is_baseline) {
        EXPECT_EQ(config.seeds_completed, 6) << "the baseline runs every seed first";
        continue;
      }
      ++variants;
      extra_seeds += config.seeds_completed - 2;
      ASSERT_EQ(config.parity_test, "welch");
      if (config.parity == "at parity") ++false_parity;
    }
  }
  const double rate = static_cast<double>(false_parity) / variants;
  std::printf("welch under the null: false at-parity rate %.4f over %d variants, %.2f extra seeds a variant\n", rate,
              variants, static_cast<double>(extra_seeds) / variants);
  EXPECT_EQ(variants, 2 * runs);
  EXPECT_LE(rate, 0.05);
  EXPECT_GT(rate, 0.005);                                       // not vacuous: the rule does reach verdicts
  EXPECT_GT(static_cast<double>(extra_seeds) / variants, 0.5);  // and looks again
}
}  // namespace
}  // namespace frontier
