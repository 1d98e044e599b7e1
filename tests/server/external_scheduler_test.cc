// The scheduler driving strategy external (docs/proposers.md) over a
// scripted proposer client and an in-memory SQLite store: proposals become
// trials labelled with their proposer and rationale, outcomes are told back,
// a proposer that fails pauses the experiment (stored, not failed, not
// completed) until it answers again, every call is recorded (at a tick, or
// when the experiment completes before one took it), the experiment
// completes once the proposer is finished, and a restarted scheduler tells
// the proposer everything stored; a trial that found its output wrong is
// told as incorrect.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "server/proposer/proposer_conversion.h"
#include "server/scheduler/scheduler.h"
#include "server/search/external.h"
#include "server/store/sqlite_store.h"
#include "tests/server/fake_clock.h"

namespace frontier {
namespace {

using nlohmann::json;

constexpr const char* kExternalSpace = R"(
name: ext
task: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3},
       batch_size: 8, steps: 4, warmup_steps: 1, eval_every: 0}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
  runtime: {threads: 1}
space:
  stages[*].block: [basic, mbconv, convnext]
objectives: [{metric: val_accuracy, goal: maximize}]
repeats: 2
strategy: {name: external, address: "fake:1", batch: 1}
)";

// One shared script for every client the factory makes (a restart makes a new one).
struct Script {
  std::mutex mu;
  std::deque<std::function<ProposerAnswer(const ProposerCall&)>> steps;
  std::vector<ProposerCall> calls;
  // Where() is called under the strategy's lock while it applies an answer
  // that pauses it: once counted, that answer and its call's record are in.
  std::atomic<int> where_calls{0};

  void Add(std::function<ProposerAnswer(const ProposerCall&)> step) {
    std::lock_guard<std::mutex> lock(mu);
    steps.push_back(std::move(step));
  }
  size_t Calls() {
    std::lock_guard<std::mutex> lock(mu);
    return calls.size();
  }
  ProposerCall Last() {
    std::lock_guard<std::mutex> lock(mu);
    return calls.back();
  }
};

class ScriptClient final : public ProposerClient {
 public:
  explicit ScriptClient(Script& script) : script_(script) {}
  ProposerAnswer Propose(const ProposerCall& call) override {
    std::function<ProposerAnswer(const ProposerCall&)> step;
    {
      std::lock_guard<std::mutex> lock(script_.mu);
      script_.calls.push_back(call);
      if (script_.steps.empty()) throw ProposerUnavailable("no answer scripted");
      step = std::move(script_.steps.front());
      script_.steps.pop_front();
    }
    return step(call);
  }
  void Cancel() override {}
  std::string Where() const override {
    ++script_.where_calls;
    return "fake:1";
  }

 private:
  Script& script_;
};

ProposerAnswer Propose(int block, const std::string& rationale, bool finished = false) {
  ProposerAnswer answer;
  answer.configs.push_back({{{"stages[*].block", block}}, rationale, 0, ""});
  answer.finished = finished;
  answer.proposer = "scripted";
  answer.usage.prompt_tokens = 10;
  answer.usage.completion_tokens = 3;
  return answer;
}

class ExternalSchedulerTest : public ::testing::Test {
 protected:
  SchedulerOptions Options() {
    SchedulerOptions o;
    o.proposers = [this](const SearchSpace&) { return std::make_unique<ScriptClient>(script_); };
    return o;
  }
  // Ticks until `done` holds, at most 10 s (the proposer answers in the background).
  void TickUntil(Scheduler& scheduler, const std::function<bool()>& done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      scheduler.Tick();
      if (done()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    FAIL() << "timed out";
  }
  // Leases and completes every pending trial.
  void RunAll(Scheduler& scheduler, const std::string& worker) {
    while (std::optional<TrialRow> t = scheduler.Lease(worker)) {
      const json result = {{"event", "result"}, {"status", "completed"}, {"val_accuracy", 0.5 + 0.01 * t->seed}};
      ASSERT_EQ(scheduler.Complete(worker, t->id, t->attempt, result.dump()), Transition::kApplied);
    }
  }
  std::vector<TrialRow> Proposed(const std::string& id) {
    std::vector<TrialRow> out;
    for (TrialRow& t : store_.ListTrials(id)) {
      if (!t.is_baseline) out.push_back(std::move(t));
    }
    return out;
  }

  Script script_;
  SqliteStore store_{":memory:"};
  FakeClock clock_;
};

TEST_F(ExternalSchedulerTest, ProposalsBecomeLabelledTrialsUntilTheProposerIsFinished) {
  Scheduler scheduler(store_, clock_, Options());
  script_.Add([](const ProposerCall&) { return Propose(1, "mbconv is cheaper"); });
  const std::string id = scheduler.Submit(kExternalSpace, "ext.yaml").id;
  EXPECT_EQ(store_.ListTrials(id).size(), 2u) << "the baseline's seeds; the proposer answers in the background";
  TickUntil(scheduler, [&] { return Proposed(id).size() == 2; });
  for (const TrialRow& t : Proposed(id)) {
    EXPECT_EQ(t.config_json, R"({"stages[*].block":"mbconv"})");
    EXPECT_EQ(t.proposer, "scripted");
    EXPECT_EQ(t.rationale, "mbconv is cheaper");
  }
  EXPECT_EQ(store_.ListTrials(id)[0].proposer, "") << "the baseline has no proposer";
  const std::string worker = scheduler.RegisterWorker({});
  // The next answer waits for the gate: everything ran, the proposer has not answered yet.
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  script_.Add([opened](const ProposerCall&) {
    opened.wait();
    return Propose(2, "convnext, the last one", /*finished=*/true);
  });
  RunAll(scheduler, worker);
  for (int i = 0; i < 5; ++i) scheduler.Tick();
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kRunning) << "it waits for the proposer";
  gate.set_value();
  TickUntil(scheduler, [&] { return Proposed(id).size() == 4; });
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kRunning);
  const ProposerCall second = script_.Last();
  ASSERT_EQ(second.proposals.size(), 1u);
  ASSERT_TRUE(second.proposals[0].evaluation) << "the first proposal is told";
  EXPECT_EQ(second.proposals[0].evaluation->trials.size(), 2u);
  ASSERT_TRUE(second.baseline);
  RunAll(scheduler, worker);
  scheduler.Tick();
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kCompleted);
  const std::vector<ProposerCallRow> calls = store_.ListProposerCalls(id);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].proposer, "scripted");
  EXPECT_EQ(calls[0].accepted, 1);
  EXPECT_EQ(calls[0].prompt_tokens, 10);
  EXPECT_EQ(calls[1].completion_tokens, 3);
}

// The proposer's calls that no tick took are recorded when the experiment
// completes. Here the second (last) answer comes while the baseline still
// runs, and no Tick runs after it: it proposes the one configuration left,
// stride 2 with an 8x8 window (the map is then 4x4: an invalid trial spec),
// which leaves nothing to propose.
TEST_F(ExternalSchedulerTest, CallsNoTickTookAreRecordedWhenTheExperimentCompletes) {
  std::string space = kExternalSpace;
  space.replace(space.find("stages[*].block: [basic, mbconv, convnext]"), 42,
                "stem.stride: [1, 2]\n  stages[0].attention.kind: [none, {kind: window, window: 8}]");
  space.replace(space.find("repeats: 2"), 10, "repeats: 1");
  space.replace(space.find("batch: 1}"), 9, "batch: 2, max_invalid: 1}");
  auto answer = [](std::vector<Choices> configs) {
    ProposerAnswer a;
    for (Choices& choices : configs) a.configs.push_back({std::move(choices), "", 0, ""});
    a.proposer = "scripted";
    a.usage = {10, 3, 1, 0};
    return a;
  };
  script_.Add([answer](const ProposerCall&) {
    return answer({{{"stem.stride", 0}, {"stages[0].attention.kind", 1}}, {{"stem.stride", 1}}});
  });
  script_.Add([answer](const ProposerCall&) {
    return answer({{{"stem.stride", 1}, {"stages[0].attention.kind", 1}}});
  });
  Scheduler scheduler(store_, clock_, Options());
  const std::string id = scheduler.Submit(space, "ext.yaml").id;
  TickUntil(scheduler, [&] { return Proposed(id).size() == 2; });
  ASSERT_EQ(store_.ListProposerCalls(id).size(), 1u) << "the tick that added the first answer's trials";
  const std::string worker = scheduler.RegisterWorker({});
  const std::optional<TrialRow> baseline = scheduler.Lease(worker);
  ASSERT_TRUE(baseline && baseline->is_baseline);
  const std::optional<TrialRow> first = scheduler.Lease(worker);
  ASSERT_TRUE(first);
  const json result = {{"event", "result"}, {"status", "completed"}, {"val_accuracy", 0.5}};
  // Told: a slot of the batch is free, the strategy asks for 1.
  ASSERT_EQ(scheduler.Complete(worker, first->id, first->attempt, result.dump()), Transition::kApplied);
  // Where() is called under the strategy's lock while it applies the pausing
  // answer; every later Tell and Ask waits for that lock, so the answer is in first.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (script_.where_calls == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GT(script_.where_calls, 0) << "the second answer was not applied";
  RunAll(scheduler, worker);  // the other proposal
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kRunning) << "the baseline runs";
  clock_.now = 2'000'000;
  ASSERT_EQ(scheduler.Complete(worker, baseline->id, baseline->attempt, result.dump()), Transition::kApplied);
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kCompleted);
  EXPECT_EQ(script_.Calls(), 2u);
  const std::vector<ProposerCallRow> calls = store_.ListProposerCalls(id);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].experiment_id, id);
  EXPECT_EQ(calls[1].at_ms, 2'000'000);
  EXPECT_EQ(calls[1].proposer, "scripted");
  EXPECT_EQ(calls[1].asked, 1);
  EXPECT_EQ(calls[1].accepted, 0);
  EXPECT_EQ(calls[1].rejected, 1);
  EXPECT_EQ(calls[1].prompt_tokens, 10);
  EXPECT_EQ(calls[1].completion_tokens, 3);
  EXPECT_EQ(calls[1].model_calls, 1);
  EXPECT_EQ(calls[1].error, "");
}

TEST_F(ExternalSchedulerTest, AFailingProposerPausesTheExperimentUntilItAnswers) {
  Scheduler scheduler(store_, clock_, Options());
  const std::string id =
      scheduler.Submit(kExternalSpace, "ext.yaml").id;  // nothing scripted: every call fails
  const std::string worker = scheduler.RegisterWorker({});
  RunAll(scheduler, worker);
  TickUntil(scheduler, [&] { return !store_.GetExperiment(id)->paused.empty(); });
  EXPECT_EQ(store_.GetExperiment(id)->paused, "proposer at fake:1 unavailable: no answer scripted");
  for (int i = 0; i < 20; ++i) scheduler.Tick();
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kRunning) << "paused, neither failed nor completed";
  EXPECT_FALSE(store_.ListProposerCalls(id).empty());
  EXPECT_EQ(store_.ListProposerCalls(id).front().error, "no answer scripted");

  script_.Add([](const ProposerCall&) { return Propose(1, "back", /*finished=*/true); });
  TickUntil(scheduler, [&] { return Proposed(id).size() == 2; });
  EXPECT_EQ(store_.GetExperiment(id)->paused, "") << "resumed";
  RunAll(scheduler, worker);
  scheduler.Tick();
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kCompleted);
}

TEST_F(ExternalSchedulerTest, ARestartedSchedulerTellsTheProposerWhatIsStored) {
  std::string id;
  {
    Scheduler first(store_, clock_, Options());
    script_.Add([](const ProposerCall&) { return Propose(1, "first"); });
    id = first.Submit(kExternalSpace, "ext.yaml").id;
    TickUntil(first, [&] { return Proposed(id).size() == 2; });
    RunAll(first, first.RegisterWorker({}));
  }
  const size_t before = script_.Calls();
  script_.Add([](const ProposerCall&) { return Propose(2, "after the restart", /*finished=*/true); });
  Scheduler restarted(store_, clock_, Options());
  TickUntil(restarted, [&] { return Proposed(id).size() == 4; });
  ASSERT_GT(script_.Calls(), before);
  const ProposerCall call = script_.Last();
  ASSERT_TRUE(call.baseline);
  ASSERT_EQ(call.proposals.size(), 1u);
  EXPECT_EQ(call.proposals[0].proposal.rationale, "first");
  EXPECT_EQ(call.proposals[0].proposal.proposer, "scripted");
  ASSERT_TRUE(call.proposals[0].evaluation);
  EXPECT_EQ(call.experiment_id, id);
  RunAll(restarted, restarted.RegisterWorker({}));
  restarted.Tick();
  EXPECT_EQ(store_.GetExperiment(id)->state, experiment_state::kCompleted);
}

// A trial program that found its output wrong fails with error_kind
// incorrect (final, as the worker reports it): stored failed with that kind,
// and the proposer's next request tells the configuration as incorrect.
TEST_F(ExternalSchedulerTest, AnIncorrectTrialIsStoredFailedAndToldIncorrect) {
  Scheduler scheduler(store_, clock_, Options());
  script_.Add([](const ProposerCall&) { return Propose(1, "a custom kernel"); });
  const std::string id = scheduler.Submit(kExternalSpace, "ext.yaml").id;
  TickUntil(scheduler, [&] { return Proposed(id).size() == 2; });
  const std::string worker = scheduler.RegisterWorker({});
  const json incorrect = {{"event", "result"},
                          {"schema", 1},
                          {"status", "failed"},
                          {"error_kind", "incorrect"},
                          {"error", "output differs from the reference by 0.31"}};
  while (std::optional<TrialRow> t = scheduler.Lease(worker)) {
    if (t->is_baseline) {
      const json result = {{"event", "result"}, {"status", "completed"}, {"val_accuracy", 0.5}};
      ASSERT_EQ(scheduler.Complete(worker, t->id, t->attempt, result.dump()), Transition::kApplied);
    } else {
      ASSERT_EQ(scheduler.Fail(worker, t->id, t->attempt, incorrect["error"], /*retryable=*/false,
                               incorrect.dump()),
                Transition::kApplied);
    }
  }
  for (const TrialRow& t : Proposed(id)) {
    EXPECT_EQ(t.state, "failed");
    EXPECT_EQ(t.attempt, 1) << "not retried";
    EXPECT_EQ(json::parse(t.result_json)["error_kind"], "incorrect");
  }
  script_.Add([](const ProposerCall&) { return Propose(2, "the last one", /*finished=*/true); });
  TickUntil(scheduler, [&] { return Proposed(id).size() == 4; });
  const ProposerCall call = script_.Last();
  ASSERT_EQ(call.proposals.size(), 1u);
  ASSERT_TRUE(call.proposals[0].evaluation) << "the incorrect configuration is told";
  const v1::ProposerOutcome outcome = ToProposerOutcome(ParseSearchSpace(kExternalSpace, "ext.yaml"),
                                                        *call.proposals[0].evaluation, "scripted", "");
  EXPECT_EQ(outcome.status(), "incorrect");
  EXPECT_EQ(outcome.seeds(), 2);
  EXPECT_EQ(outcome.seeds_completed(), 0);
  EXPECT_EQ(outcome.reason(), "incorrect: output differs from the reference by 0.31");
}

std::string WithStrategy(const std::string& strategy) {
  std::string space = kExternalSpace;
  space.replace(space.find("strategy: "), std::string::npos, "strategy: " + strategy + "\n");
  return space;
}

std::string ParseError(const std::string& strategy) {
  try {
    ParseSearchSpace(WithStrategy(strategy), "ext.yaml");
  } catch (const SpaceError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(ExternalSpaceTest, TheParserChecksTheProposersSettings) {
  const SearchSpace space = ParseSearchSpace(
      WithStrategy("{name: external, address: 'proposer.local:50070', batch: 8, trials: 20, deadline_s: 2.5, "
                   "max_invalid: 5, token_file: t.token, tls_ca: ca.pem}"),
      "ext.yaml");
  EXPECT_EQ(space.strategy.name, "external");
  EXPECT_EQ(space.strategy.trials, 20);
  EXPECT_EQ(space.strategy.options,
            (json{{"address", "proposer.local:50070"}, {"batch", 8}, {"max_invalid", 5}, {"deadline_s", 2.5},
                  {"token_file", "t.token"}, {"tls_ca", "ca.pem"}}));
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"{name: external}", "strategy: missing field 'address'"},
      {"{name: external, address: localhost}",
       "strategy.address: expected HOST:PORT of a Proposer service, got 'localhost'"},
      {"{name: external, address: 'h:1', batch: 0}", "strategy.batch: must be in [1, 1000], got 0"},
      {"{name: external, address: 'h:1', deadline_s: -1}", "strategy.deadline_s: must be in (0, 3600] seconds"},
      {"{name: external, address: 'h:1', tls_cert: c.pem}", "strategy.tls_cert: tls_cert and tls_key go together"},
      {"{name: external, address: 'h:1', population: 4}",
       "strategy.population: applies to strategies asha, nsga2 only"},
      {"{name: grid, address: 'h:1'}", "strategy.address: applies to strategy external only"},
  };
  for (const auto& [strategy, message] : errors) {
    EXPECT_NE(ParseError(strategy).find(message), std::string::npos) << strategy << " -> " << ParseError(strategy);
  }
}

TEST_F(ExternalSchedulerTest, WithoutAProposerClientTheSpaceIsRefused) {
  Scheduler scheduler(store_, clock_, SchedulerOptions{});
  EXPECT_THROW(scheduler.Submit(kExternalSpace, "ext.yaml"), SpaceError);
  EXPECT_TRUE(store_.ListExperiments(10).empty());
}

}  // namespace
}  // namespace frontier
