// The scheduler's lease, attempt, idempotency and cancellation semantics,
// driven by a fake clock over an in-memory SQLite store: no sleeps.
#include "server/scheduler.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/sqlite_store.h"

namespace frontier {
namespace {

class FakeClock final : public Clock {
 public:
  int64_t NowMs() override { return now; }
  int64_t now = 1'000'000;
};

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
  EXPECT_EQ(scheduler_.Fail("w1", t->id, 1, "frontier-trial crashed: SIGSEGV", true, ""), Transition::kApplied);
  t = scheduler_.Lease("w1");
  ASSERT_EQ(t->attempt, 2);
  clock_.now += 10'001;
  scheduler_.Tick();  // second attempt expires: max_attempts (2) used
  auto row = store_.GetTrial(t->id);
  EXPECT_EQ(row->state, "failed");
  EXPECT_NE(row->error.find("lease expired"), std::string::npos);
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
  EXPECT_EQ(scheduler_.Fail("w1", running->id, 1, "stopped: experiment cancelled", false, ""), Transition::kApplied);
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

}  // namespace
}  // namespace frontier
