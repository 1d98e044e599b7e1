// Strategy external (server/search/external.h) over scripted proposer
// clients: proposals arrive through Ask without blocking it, every proposal
// is validated and the rejected ones are told back with their reasons, a
// proposer that is down or answers only invalid proposals pauses the search
// and an answer resumes it, the state comes back from stored proposals, and
// the request carries the outcomes as the report measures them
// (server/proposer/proposer_conversion.h).
#include "server/search/external.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "server/proposer/proposer_conversion.h"

namespace frontier {
namespace {

using nlohmann::json;

// 2 x 3 x 2 = 12 configurations; the baseline is {stride 2, basic, none}; with
// stride 4 the 7x7 window does not fit the feature map.
constexpr char kSpace[] = R"(name: ext
task: {dataset: synthetic, input: {channels: 1, height: 28, width: 28, classes: 3}, batch_size: 8, steps: 40,
       eval_every: 10}
baseline:
  arch:
    stem: {kind: conv3x3, width: 16, stride: 2, depth: 1}
    stages:
      - {block: basic, width: 16, depth: 1}
      - {block: basic, width: 32, depth: 1, stride: 2}
objectives: [{metric: val_accuracy}, {metric: params, goal: minimize}]
constraints: [{metric: val_accuracy, min: 0.5}]
repeats: 2
space:
  stem.stride: [2, 4]
  block: [basic, mbconv, convnext]
  stages[1].attention.kind: [none, {kind: window, window: 7}]
)";

SearchSpace Space() {
  SearchSpace space = ParseSearchSpace(kSpace, "ext.yaml");
  space.strategy.name = "external";
  return space;
}

// Answers from a script, one per call; records every call.
class ScriptedClient final : public ProposerClient {
 public:
  using Step = std::function<ProposerAnswer(const ProposerCall&)>;

  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Step> script;
    std::vector<ProposerCall> calls;
    bool cancelled = false;
  };

  explicit ScriptedClient(std::shared_ptr<Shared> shared) : shared_(std::move(shared)) {}

  ProposerAnswer Propose(const ProposerCall& call) override {
    Step step;
    {
      std::unique_lock<std::mutex> lock(shared_->mu);
      shared_->calls.push_back(call);
      shared_->cv.wait(lock, [&] { return shared_->cancelled || !shared_->script.empty(); });
      if (shared_->cancelled) throw ProposerUnavailable("cancelled");
      step = std::move(shared_->script.front());
      shared_->script.pop_front();
    }
    return step(call);
  }
  void Cancel() override {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->cancelled = true;
    shared_->cv.notify_all();
  }
  std::string Where() const override { return "fake:1"; }

 private:
  std::shared_ptr<Shared> shared_;
};

struct Fixture {
  SearchSpace space = Space();
  std::shared_ptr<ScriptedClient::Shared> shared = std::make_shared<ScriptedClient::Shared>();
  std::unique_ptr<Strategy> strategy;

  explicit Fixture(ExternalOptions options = {}) {
    options.retry_ms = 1;
    options.max_retry_ms = 2;
    strategy = MakeExternalStrategy(space, 40, std::make_unique<ScriptedClient>(shared), options);
  }

  void Script(ScriptedClient::Step step) {
    std::lock_guard<std::mutex> lock(shared->mu);
    shared->script.push_back(std::move(step));
    shared->cv.notify_all();
  }
  size_t Calls() {
    std::lock_guard<std::mutex> lock(shared->mu);
    return shared->calls.size();
  }
  ProposerCall Call(size_t i) {
    std::lock_guard<std::mutex> lock(shared->mu);
    return shared->calls.at(i);
  }
  // Asks until `done` holds (the background call answered), at most 10 s.
  std::vector<Proposal> AskUntil(const std::function<bool(const std::vector<Proposal>&)>& done) {
    std::vector<Proposal> all;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      for (Proposal& p : strategy->Ask()) all.push_back(std::move(p));
      if (done(all)) return all;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ADD_FAILURE() << "timed out";
    return all;
  }
  void WaitUntil(const std::function<bool()>& done) {
    AskUntil([&](const std::vector<Proposal>&) { return done(); });
  }
};

ProposedChoices Choose(int stride, int block, int attention, std::string rationale = "") {
  return {{{"stem.stride", stride}, {"block", block}, {"stages[1].attention.kind", attention}},
          std::move(rationale), 0, ""};
}

ProposerAnswer Answer(std::vector<ProposedChoices> configs, bool finished = false) {
  ProposerAnswer answer;
  answer.configs = std::move(configs);
  answer.finished = finished;
  answer.proposer = "scripted";
  return answer;
}

Evaluation Completed(const Config& config, double accuracy, int64_t params) {
  Evaluation evaluation{config, 40, {}};
  for (int64_t seed = 1; seed <= 2; ++seed) {
    evaluation.trials.push_back(
        {seed, "completed", json{{"status", "completed"}, {"val_accuracy", accuracy}, {"params", params}}, ""});
  }
  return evaluation;
}

TEST(ExternalStrategy, AsksOnlyOnceAttachedAndReturnsTheAnswerWithRationale) {
  Fixture f;
  EXPECT_TRUE(f.strategy->Ask().empty());
  EXPECT_TRUE(f.strategy->Asynchronous());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(f.Calls(), 0u) << "no call before the experiment has an id";
  f.strategy->Attach("exp-000007");
  f.Script([](const ProposerCall&) { return Answer({Choose(0, 1, 0, "mbconv is cheaper")}); });
  const std::vector<Proposal> got = f.AskUntil([](const auto& all) { return !all.empty(); });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].config, (json{{"stem.stride", 2}, {"block", "mbconv"}, {"stages[1].attention.kind", "none"}}));
  EXPECT_EQ(got[0].steps, 40);
  EXPECT_EQ(got[0].proposer, "scripted");
  EXPECT_EQ(got[0].rationale, "mbconv is cheaper");
  const ProposerCall first = f.Call(0);
  EXPECT_EQ(first.experiment_id, "exp-000007");
  EXPECT_EQ(first.count, 4);  // the default batch
  EXPECT_FALSE(f.strategy->Finished());
  EXPECT_EQ(f.strategy->Paused(), "");
}

TEST(ExternalStrategy, RationaleAndNameAreOneBoundedLineWithoutControlCharacters) {
  Fixture f;
  f.strategy->Attach("e");
  f.Script([](const ProposerCall&) {
    ProposerAnswer answer = Answer({Choose(0, 1, 0, std::string("two\nlines\0nul\ttab", 17) + std::string(3000, 'x'))});
    answer.proposer = std::string("llm\0x", 5);
    return answer;
  });
  const std::vector<Proposal> got = f.AskUntil([](const auto& all) { return !all.empty(); });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rationale.size(), 2000u);
  EXPECT_EQ(got[0].rationale.substr(0, 17), "two lines nul tab");
  EXPECT_EQ(got[0].proposer, "llm x");
}

TEST(ExternalStrategy, RejectsInvalidProposalsAndTellsWhyInTheNextCall) {
  ExternalOptions options;
  options.batch = 8;
  Fixture f(options);
  f.strategy->Attach("e");
  ProposedChoices unknown{{{"depth", 1}}, "", 0, ""};
  ProposedChoices wrong_steps = Choose(0, 2, 0);
  wrong_steps.steps = 20;
  f.Script([&](const ProposerCall&) {
    return Answer({Choose(0, 0, 0),  // the baseline
                   Choose(0, 3, 0),  // no fourth block
                   unknown, wrong_steps,
                   Choose(1, 0, 1),  // window 7 on a map it does not tile
                   Choose(0, 1, 1), Choose(0, 1, 1)});  // the second one is a duplicate
  });
  const std::vector<Proposal> got = f.AskUntil([](const auto& all) { return !all.empty(); });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].config["block"], "mbconv");
  // The next call (asked for the slots left) carries the six rejections.
  f.Script([](const ProposerCall&) { return Answer({}); });
  f.WaitUntil([&] { return f.Calls() >= 2; });
  const ProposerCall second = f.Call(1);
  ASSERT_EQ(second.rejections.size(), 6u);
  std::vector<std::string> reasons;
  for (const ProposerRejection& r : second.rejections) reasons.push_back(r.reason);
  EXPECT_EQ(reasons[0], "the baseline (it runs anyway)");
  EXPECT_EQ(reasons[1], "dimension 'block': choice 3 out of range (3 choices, 0..2)");
  EXPECT_EQ(reasons[2], "unknown dimension 'depth'");
  EXPECT_NE(reasons[3].find("steps 20"), std::string::npos) << reasons[3];
  EXPECT_EQ(reasons[4].rfind("invalid trial spec: ", 0), 0u) << reasons[4];
  EXPECT_EQ(reasons[5], "proposed before");
  EXPECT_EQ(second.rejections[1].choices.at("block"), 3);
  EXPECT_EQ(second.count, 7);
  ASSERT_EQ(second.proposals.size(), 1u);
  EXPECT_FALSE(second.proposals[0].evaluation);
}

TEST(ExternalStrategy, AProposerThatIsDownPausesTheSearchUntilItAnswers) {
  Fixture f;
  f.strategy->Attach("e");
  f.Script([](const ProposerCall&) -> ProposerAnswer { throw ProposerUnavailable("unreachable: connection refused"); });
  f.WaitUntil([&] { return !f.strategy->Paused().empty(); });
  EXPECT_EQ(f.strategy->Paused(), "proposer at fake:1 unavailable: unreachable: connection refused");
  EXPECT_FALSE(f.strategy->Finished()) << "paused, not failed";
  f.Script([](const ProposerCall&) { return Answer({Choose(0, 2, 0)}); });
  const std::vector<Proposal> got = f.AskUntil([](const auto& all) { return !all.empty(); });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(f.strategy->Paused(), "");
  // Both calls are on record: the failure with its reason, the answer with its counts.
  const std::vector<ProposerCallRecord> calls = f.strategy->TakeCalls();
  ASSERT_GE(calls.size(), 2u);
  EXPECT_EQ(calls.front().error, "unreachable: connection refused");
  EXPECT_EQ(calls.front().proposer, "fake:1");
  EXPECT_EQ(calls.back().error, "");
  EXPECT_EQ(calls.back().proposer, "scripted");
  EXPECT_EQ(calls.back().accepted, 1);
  EXPECT_EQ(calls.back().asked, 4);
  EXPECT_TRUE(f.strategy->TakeCalls().empty());
}

TEST(ExternalStrategy, OnlyInvalidAnswersPauseAfterTheLimit) {
  ExternalOptions options;
  options.max_invalid_answers = 2;
  Fixture f(options);
  f.strategy->Attach("e");
  f.Script([](const ProposerCall&) { return Answer({Choose(0, 0, 0)}); });
  f.WaitUntil([&] { return f.Calls() >= 1; });
  f.Script([](const ProposerCall&) { return Answer({Choose(0, 9, 0)}); });
  f.WaitUntil([&] { return !f.strategy->Paused().empty(); });
  EXPECT_EQ(f.strategy->Paused(),
            "proposer at fake:1 proposed no valid configuration in 2 answers in a row (last rejected: "
            "dimension 'block': choice 9 out of range (3 choices, 0..2))");
  f.Script([](const ProposerCall&) { return Answer({Choose(1, 1, 0)}); });
  const std::vector<Proposal> got = f.AskUntil([](const auto& all) { return !all.empty(); });
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(f.strategy->Paused(), "");
}

TEST(ExternalStrategy, AProposerThatSaysItCannotProposePausesAtOnceWithItsReason) {
  Fixture f;  // max_invalid_answers is 3: the proposer's own error does not wait for it
  f.strategy->Attach("e");
  f.Script([](const ProposerCall&) {
    ProposerAnswer answer = Answer({});
    answer.proposer = "llm:m";
    answer.error = "model call failed: HTTP 401 Unauthorized: the key was refused";
    return answer;
  });
  f.WaitUntil([&] { return !f.strategy->Paused().empty(); });
  EXPECT_EQ(f.strategy->Paused(),
            "proposer llm:m at fake:1 cannot propose: model call failed: HTTP 401 Unauthorized: the key was refused");
  EXPECT_FALSE(f.strategy->Finished()) << "paused, not failed";
  const std::vector<ProposerCallRecord> calls = f.strategy->TakeCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].error, "model call failed: HTTP 401 Unauthorized: the key was refused");
  EXPECT_EQ(calls[0].accepted, 0);
}

TEST(ExternalStrategy, AFallbackConfigIsLabelledAFallbackAndTheCallCarriesTrials) {
  ExternalOptions options;
  options.trials = 6;
  Fixture f(options);
  f.strategy->Attach("e");
  f.Script([](const ProposerCall&) {
    ProposedChoices drawn = Choose(0, 2, 0, "seeded random");
    drawn.fallback = "random";
    ProposerAnswer answer = Answer({Choose(0, 1, 0), drawn});
    answer.proposer = "llm:m";
    answer.error = "model unreachable";  // with configs: what it did propose is still taken
    return answer;
  });
  const std::vector<Proposal> got = f.AskUntil([](const auto& all) { return all.size() >= 2; });
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].proposer, "llm:m");
  EXPECT_EQ(got[1].proposer, FallbackProposer("llm:m", "random"));
  EXPECT_TRUE(IsFallbackProposer(got[1].proposer));
  EXPECT_FALSE(IsFallbackProposer(got[0].proposer));
  EXPECT_EQ(f.Call(0).max_configs, 6);
}

TEST(ExternalStrategy, FinishesWhenTheProposerSaysSoOrAtTrials) {
  {
    Fixture f;
    f.strategy->Attach("e");
    f.Script([](const ProposerCall&) { return Answer({Choose(0, 1, 0)}, /*finished=*/true); });
    f.AskUntil([](const auto& all) { return !all.empty(); });
    EXPECT_TRUE(f.strategy->Finished());
  }
  ExternalOptions options;
  options.trials = 2;
  options.batch = 4;
  Fixture f(options);
  f.strategy->Attach("e");
  f.Script([](const ProposerCall& call) {
    EXPECT_EQ(call.count, 2);
    return Answer({Choose(0, 1, 0), Choose(0, 2, 0), Choose(1, 1, 0)});
  });
  const std::vector<Proposal> got = f.AskUntil([](const auto& all) { return !all.empty(); });
  EXPECT_EQ(got.size(), 2u) << "the third is beyond what was asked";
  EXPECT_TRUE(f.strategy->Finished());
}

TEST(ExternalStrategy, KeepsBatchInFlightAndAsksAgainAfterTells) {
  ExternalOptions options;
  options.batch = 1;
  Fixture f(options);
  f.strategy->Attach("e");
  f.Script([](const ProposerCall&) { return Answer({Choose(0, 1, 0)}); });
  const std::vector<Proposal> first = f.AskUntil([](const auto& all) { return !all.empty(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(f.strategy->Ask().empty());
  EXPECT_EQ(f.Calls(), 1u) << "one configuration in flight: no call until it is told";
  f.strategy->Tell(Completed(first[0].config, 0.8, 1000));
  f.Script([](const ProposerCall&) { return Answer({Choose(0, 2, 0)}); });
  f.AskUntil([](const auto& all) { return !all.empty(); });
  const ProposerCall second = f.Call(1);
  ASSERT_EQ(second.proposals.size(), 1u);
  ASSERT_TRUE(second.proposals[0].evaluation);
  EXPECT_EQ(second.proposals[0].proposal.rationale, "");
}

TEST(ExternalStrategy, RestoresFromStoredProposalsWithoutAskingThemAgain) {
  Fixture f;
  const Config told = {{"stem.stride", 2}, {"block", "mbconv"}, {"stages[1].attention.kind", "none"}};
  const Config running = {{"stem.stride", 2}, {"block", "convnext"}, {"stages[1].attention.kind", "none"}};
  std::vector<StoredProposal> history = {
      {{told, 40, "llm:x", "smaller"}, Completed(told, 0.7, 900)},
      {{running, 40, "llm:x", "bigger"}, std::nullopt}};
  EXPECT_TRUE(Replay(*f.strategy, Completed(Config::object(), 0.75, 1000), history).empty());
  f.strategy->Attach("e");
  f.Script([](const ProposerCall&) { return Answer({Choose(0, 1, 0), Choose(1, 0, 0)}); });
  const std::vector<Proposal> got = f.AskUntil([](const auto& all) { return !all.empty(); });
  ASSERT_EQ(got.size(), 1u) << "the told one was proposed before";
  EXPECT_EQ(got[0].config["stem.stride"], 4);
  const ProposerCall call = f.Call(0);
  EXPECT_TRUE(call.baseline);
  ASSERT_EQ(call.proposals.size(), 2u);
  EXPECT_EQ(call.count, 3);  // batch 4, one running
  EXPECT_EQ(call.proposals[0].proposal.rationale, "smaller");
}

TEST(ExternalStrategy, DestroyingItCancelsACallInFlight) {
  Fixture f;
  f.strategy->Attach("e");
  f.WaitUntil([&] { return f.Calls() >= 1; });  // the client now waits for a script that never comes
  f.strategy.reset();                           // must not hang
  SUCCEED();
}

TEST(ProposerConversion, TheRequestCarriesSpaceGoalsAndOutcomesAsTheReportMeasures) {
  const SearchSpace space = Space();
  ProposerCall call;
  call.experiment_id = "exp-1";
  call.count = 3;
  call.baseline = Completed(Config::object(), 0.75, 1000);
  const Config failed = {{"stem.stride", 4}, {"block", "basic"}, {"stages[1].attention.kind", "none"}};
  Evaluation evaluation{failed, 40, {{1, "completed", json{{"val_accuracy", 0.4}, {"params", 800}}, ""},
                                     {2, "failed", nullptr, "out of memory"}}};
  call.proposals.push_back({{failed, 40, "me", "why not"}, evaluation});
  call.rejections.push_back({{{"block", 7}}, "dimension 'block': choice 7 out of range"});
  const v1::ProposeRequest request = ToProposeRequest(space, call, 40);
  EXPECT_EQ(request.experiment_id(), "exp-1");
  EXPECT_EQ(request.experiment_name(), "ext");
  ASSERT_EQ(request.dimensions_size(), 3);
  EXPECT_EQ(request.dimensions(0).name(), "stem.stride");
  EXPECT_TRUE(request.dimensions(0).ordinal());
  EXPECT_EQ(request.dimensions(1).choices_json(1), "\"mbconv\"");
  EXPECT_FALSE(request.dimensions(1).ordinal());
  EXPECT_EQ(request.dimensions(2).baseline_index(), 0);
  ASSERT_EQ(request.objectives_size(), 2);
  EXPECT_FALSE(request.objectives(1).maximize());
  ASSERT_EQ(request.constraints_size(), 1);
  EXPECT_TRUE(request.constraints(0).has_min());
  EXPECT_FALSE(request.constraints(0).has_max());
  EXPECT_DOUBLE_EQ(request.baseline().metrics().at("val_accuracy"), 0.75);
  EXPECT_DOUBLE_EQ(request.baseline().violation(), 0);
  ASSERT_EQ(request.outcomes_size(), 1);
  const v1::ProposerOutcome& outcome = request.outcomes(0);
  EXPECT_EQ(outcome.status(), "completed");
  EXPECT_EQ(outcome.seeds(), 2);
  EXPECT_EQ(outcome.seeds_completed(), 1);
  EXPECT_DOUBLE_EQ(outcome.metrics().at("params"), 800);
  EXPECT_NEAR(outcome.violation(), (0.5 - 0.4) / 0.5, 1e-12);
  EXPECT_EQ(outcome.reason(), "failed: out of memory");
  EXPECT_EQ(outcome.config().choices().at("stem.stride"), 1);
  EXPECT_EQ(outcome.rationale(), "why not");
  EXPECT_EQ(request.rejections(0).config().choices().at("block"), 7);
  EXPECT_EQ(request.count(), 3);
  EXPECT_EQ(request.repeats(), 2);
  EXPECT_EQ(request.space_size(), 11);

  v1::ProposeResponse response;
  for (int i = 0; i < 5; ++i) {
    v1::ProposedConfig* c = response.add_configs();
    (*c->mutable_config()->mutable_choices())["block"] = i;
    c->set_rationale("r" + std::to_string(i));
  }
  response.set_proposer("optuna:tpe");
  response.mutable_usage()->set_prompt_tokens(-5);
  const ProposerAnswer answer = FromProposeResponse(response, 3);
  ASSERT_EQ(answer.configs.size(), 3u);
  EXPECT_EQ(answer.configs[2].choices.at("block"), 2);
  EXPECT_EQ(answer.configs[2].rationale, "r2");
  EXPECT_EQ(answer.proposer, "optuna:tpe");
  EXPECT_EQ(answer.usage.prompt_tokens, 0);
}

// A seed whose program found its output wrong (error_kind incorrect) is told
// as incorrect, even next to a completed seed; other failures keep the rule
// "completed when a seed completed, else most seeds' state".
TEST(ProposerConversion, AnIncorrectSeedMakesTheOutcomeIncorrect) {
  const SearchSpace space = Space();
  const Config config = {{"stem.stride", 4}, {"block", "mbconv"}, {"stages[1].attention.kind", "none"}};
  const json incorrect = {
      {"event", "result"},
      {"schema", 1},
      {"status", "failed"},
      {"error_kind", "incorrect"},
      {"error", "fused pooling differs from the naive reference by 0.31 (tolerance 1e-4)"}};
  const json runtime = {{"event", "result"}, {"schema", 1}, {"status", "failed"}, {"error_kind", "runtime"}};
  const std::string why = incorrect["error"];
  const auto outcome = [&](std::vector<TrialOutcome> trials) {
    return ToProposerOutcome(space, Evaluation{config, 40, std::move(trials)}, "optuna:tpe", "");
  };

  const v1::ProposerOutcome all = outcome({{1, "failed", incorrect, why}, {2, "failed", incorrect, why}});
  EXPECT_EQ(all.status(), "incorrect");
  EXPECT_EQ(all.seeds_completed(), 0);
  EXPECT_EQ(all.reason(), "incorrect: " + why);
  EXPECT_TRUE(std::isinf(all.violation()));

  const v1::ProposerOutcome one = outcome(
      {{1, "completed", json{{"val_accuracy", 0.6}, {"params", 700}}, ""}, {2, "failed", incorrect, why}});
  EXPECT_EQ(one.status(), "incorrect");
  EXPECT_EQ(one.seeds_completed(), 1);
  EXPECT_DOUBLE_EQ(one.metrics().at("val_accuracy"), 0.6);  // still told: what the completed seed measured

  // A failure of another kind is failed; a completed seed makes it completed.
  EXPECT_EQ(outcome({{1, "failed", runtime, "boom"}, {2, "failed", nullptr, "crash"}}).status(), "failed");
  EXPECT_EQ(
      outcome({{1, "completed", json{{"val_accuracy", 0.6}}, ""}, {2, "failed", runtime, "boom"}}).status(),
      "completed");
  EXPECT_EQ(outcome({{1, "diverged", json{{"status", "diverged"}}, "nan"}, {2, "failed", runtime, "boom"}})
                .status(),
            "diverged");  // a tie: the first
}

}  // namespace
}  // namespace frontier
