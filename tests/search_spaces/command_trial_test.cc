// Command trials in the spec model (docs/byo-model.md, docs/trial-protocol.md):
// a search space naming a training command varies its free-form params, and
// the coordinator checks what it can before any worker sees a trial.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "search_spaces/trial_spec.h"

namespace frontier {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kSpace[] = R"(name: byo
task: {steps: 40, eval_every: 10, warmup_steps: 5}
trial:
  command: [/usr/bin/python3, train.py, --fast]
  params: {lr: 0.1, attention: none, width: 64, bf16: false, layers: [2, 2], opt: {name: sgd}}
space:
  params.attention: [none, window, linear]
  params.width: [48, 64, 96.5]
  params.layers: [[2, 2], [3, 4, 3]]
objectives: [{metric: val_accuracy}, {metric: throughput}]
)";

std::string CommandSpaceErrorOf(const std::string& yaml) {
  try {
    ParseSearchSpace(yaml, "/spaces/byo/space.yaml");
  } catch (const SpaceError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

// A space's deploy section reaches the program's spec (the SDK's measure_deploy reads it), checked as
// frontier-trial's is.
TEST(CommandTrialTest, DeploySectionGoesToTheProgram) {
  const SearchSpace space =
      ParseSearchSpace(std::string(kSpace) + "deploy: {formats: [float, torchscript, int8], batch: [1, 8]}\n",
                       "/spaces/byo/space.yaml");
  const json config = {{"params.attention", "linear"}, {"params.width", 96.5}, {"params.layers", {3, 4, 3}}};
  const TrialSpec spec = MakeTrialSpec(space, config, 2, "t");
  ASSERT_TRUE(spec.deploy.enabled);
  const json out = ToJson(spec);
  EXPECT_EQ(out["deploy"]["formats"], json({"float", "torchscript", "int8"}));
  EXPECT_EQ(out["deploy"]["batch"], json({1, 8}));
  EXPECT_EQ(ParseTrialSpec(out).deploy.formats, spec.deploy.formats);
  EXPECT_FALSE(ToJson(MakeTrialSpec(ParseSearchSpace(kSpace, "/spaces/byo/space.yaml"), config, 2, "t"))
                   .contains("deploy"));
  EXPECT_THAT(CommandSpaceErrorOf(std::string(kSpace) + "deploy: {formats: [tensorrt]}\n"),
              HasSubstr("deploy.formats: format \"tensorrt\" is not in this build"));
}

TEST(CommandTrialTest, SpaceBuildsCommandSpecsWithTheParamsExactlyAsGiven) {
  const SearchSpace space = ParseSearchSpace(kSpace, "/spaces/byo/space.yaml");
  ASSERT_EQ(space.dimensions.size(), 3u);
  EXPECT_EQ(space.dimensions[0].paths, std::vector<std::string>{"params.attention"});
  EXPECT_EQ(GridSize(space), 3u * 3u * 2u);

  const json config = {{"params.attention", "linear"}, {"params.width", 96.5}, {"params.layers", {3, 4, 3}}};
  const TrialSpec spec = MakeTrialSpec(space, config, 2, "exp-1-t7");
  ASSERT_TRUE(spec.command.enabled);
  EXPECT_EQ(spec.command.argv, (std::vector<std::string>{"/usr/bin/python3", "train.py", "--fast"}));
  EXPECT_EQ(spec.command.workdir, "/spaces/byo") << "the space file's folder";
  EXPECT_EQ(spec.task.steps, 40);
  EXPECT_EQ(spec.task.eval_every, 10);

  const json out = ToJson(spec);
  EXPECT_EQ(out["params"], json::parse(R"({"lr": 0.1, "attention": "linear", "width": 96.5, "bf16": false,
                                           "layers": [3, 4, 3], "opt": {"name": "sgd"}})"));
  EXPECT_EQ(out["protocol"], 1);
  EXPECT_EQ(out["seed"], 2);
  EXPECT_EQ(out["trial_id"], "exp-1-t7");
  EXPECT_FALSE(out.contains("arch"));
  // What the worker leases parses back to the same spec.
  EXPECT_EQ(ToJson(ParseTrialSpec(out)), out);
}

TEST(CommandTrialTest, NsysOrNcuWrapTheCommand) {
  const SearchSpace space = ParseSearchSpace(std::string(kSpace) + "profile: {tool: nsys}\n", "/s/space.yaml");
  const json out = ToJson(MakeTrialSpec(space, json::object(), 1, "t"));
  EXPECT_EQ(out["profile"]["tool"], "nsys");  // the worker wraps the command in nsys (agent_test)
  EXPECT_EQ(ToJson(ParseTrialSpec(out)), out);
}

TEST(CommandTrialTest, TheSdkProfilesAFewStepsUnlessTheSpaceSaysOff) {
  const SearchSpace space = ParseSearchSpace(kSpace, "/s/space.yaml");
  const json out = ToJson(MakeTrialSpec(space, json::object(), 1, "t"));
  EXPECT_EQ(out["profile"], json::parse(R"({"steps": 3, "start": -1, "tool": "libtorch"})"));
  EXPECT_EQ(ToJson(ParseTrialSpec(out)), out);
  const SearchSpace off = ParseSearchSpace(std::string(kSpace) + "profile: off\n", "/s/space.yaml");
  EXPECT_EQ(ToJson(MakeTrialSpec(off, json::object(), 1, "t"))["profile"]["steps"], 0);
}

TEST(CommandTrialTest, BaselineIsTheTrialsOwnParams) {
  const SearchSpace space = ParseSearchSpace(kSpace, "/spaces/byo/space.yaml");
  EXPECT_TRUE(IsBaseline(space, json::object()));
  EXPECT_TRUE(IsBaseline(space, {{"params.attention", "none"}, {"params.width", 64}}));
  EXPECT_FALSE(IsBaseline(space, {{"params.width", 48}}));
}

TEST(CommandTrialTest, WorkdirIsResolvedAgainstTheSpaceFile) {
  const SearchSpace relative =
      ParseSearchSpace(Replace(kSpace, "  params: {", "  workdir: ../code\n  params: {"), "/spaces/byo/space.yaml");
  EXPECT_EQ(MakeTrialSpec(relative, json::object(), 1, "t").command.workdir, "/spaces/code");
  const SearchSpace absolute =
      ParseSearchSpace(Replace(kSpace, "  params: {", "  workdir: /opt/model\n  params: {"), "/spaces/space.yaml");
  EXPECT_EQ(MakeTrialSpec(absolute, json::object(), 1, "t").command.workdir, "/opt/model");
}

TEST(CommandTrialTest, ChoicesKeepTheTypeOfTheBaselineValue) {
  EXPECT_THAT(
      CommandSpaceErrorOf(Replace(kSpace, "[48, 64, 96.5]", "[48, wide]")),
      HasSubstr("space.params.width: 'wide' is a string; the baseline's params.width (64) is a number"));
  EXPECT_THAT(CommandSpaceErrorOf(Replace(kSpace, "params.width: [48, 64, 96.5]", "params.bf16: [false, 1]")),
              HasSubstr("'1' is a number; the baseline's params.bf16 (false) is a boolean"));
  EXPECT_THAT(CommandSpaceErrorOf(Replace(kSpace, "[48, 64, 96.5]", "[48, 48]")),
              HasSubstr("duplicate choice '48'"));
}

TEST(CommandTrialTest, RefusesWhatCannotRun) {
  EXPECT_THAT(CommandSpaceErrorOf(Replace(kSpace, "params.width:", "params.depth:")),
              HasSubstr("unknown field 'depth' in params"));
  EXPECT_THAT(CommandSpaceErrorOf(Replace(kSpace, "params.width:", "block:")),
              HasSubstr("a trial command's dimensions are params.NAME"));
  EXPECT_THAT(CommandSpaceErrorOf(Replace(kSpace, "[/usr/bin/python3, train.py, --fast]", "[]")),
              HasSubstr("trial.command: expected the program and its arguments as a list"));
  EXPECT_THAT(
      CommandSpaceErrorOf(Replace(kSpace, "[/usr/bin/python3, train.py, --fast]", "python3 train.py")),
      HasSubstr("trial.command: expected the program and its arguments as a list"));
  EXPECT_THAT(CommandSpaceErrorOf(Replace(kSpace, "[/usr/bin/python3, train.py, --fast]", "[python3, 7]")),
              HasSubstr("trial.command.argv[1]: expected a non-empty string"));
  EXPECT_THAT(
      CommandSpaceErrorOf(Replace(kSpace, "task: {steps: 40,", "task: {dataset: fashion-mnist, steps: 40,")),
      HasSubstr("task.dataset: a command trial's task has steps, eval_every, warmup_steps and target only"));
  EXPECT_THAT(CommandSpaceErrorOf(Replace(kSpace, "  params: {", "  params: 3\n  x: {")),
              HasSubstr("trial.x: unknown field; expected one of command, workdir, params"));
  EXPECT_THAT(CommandSpaceErrorOf(Replace(kSpace, "  params: {lr", "  time_limit_s: -1\n  params: {lr")),
              HasSubstr("trial.command.time_limit_s: must be in [0, 1e+07]"));
  EXPECT_THAT(CommandSpaceErrorOf(std::string(kSpace) + "baseline: {arch: {stages: [{}]}}\n"),
              HasSubstr("either a baseline (frontier-trial's networks) or a trial command, not both"));
  EXPECT_THAT(CommandSpaceErrorOf(std::string(kSpace) + "profile: {steps: 50}\n"),
              HasSubstr("profile.steps: profiles 50 steps but the trial runs only 40 steps"));
  EXPECT_THAT(CommandSpaceErrorOf(std::string(kSpace) + "profile: sometimes\n"),
              HasSubstr("profile: expected a mapping like {steps: 3}, {tool: nsys} or off"));
}

TEST(CommandTrialTest, ParsedSpecRefusesMalformedCommandSections) {
  const json good = json::parse(R"({"schema": 1, "protocol": 1, "seed": 1, "params": {"a": 1},
                                    "task": {"steps": 20}, "command": {"argv": ["/bin/true"]}})");
  EXPECT_NO_THROW(ParseTrialSpec(good));
  const auto error = [&](const std::string& pointer, const json& value) {
    json spec = good;
    spec[json::json_pointer(pointer)] = value;
    try {
      ParseTrialSpec(spec);
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_THAT(error("/command/argv", json::array()), HasSubstr("command.argv: expected a non-empty list"));
  EXPECT_THAT(error("/command/workdir", "relative/dir"), HasSubstr("command.workdir: must be an absolute path"));
  EXPECT_THAT(error("/command/shell", true), HasSubstr("command.shell: unknown field"));
  EXPECT_THAT(error("/protocol", 2), HasSubstr("protocol: must be in [1, 1]"));
  EXPECT_THAT(error("/params", "x"), HasSubstr("params: expected an object"));
  EXPECT_THAT(error("/task/warmup_steps", 20), HasSubstr("task.warmup_steps: must be below task.steps (20)"));
  EXPECT_THAT(error("/op_calls", "attention"), HasSubstr("op_calls: expected a list of at most 64 op calls"));
  EXPECT_THAT(error("/op_calls", json::parse(R"([{"op": "attention_kernel"}])")),
              HasSubstr("op_calls[0]: expected {op: NAME, shapes: [[...], ...]}"));
  EXPECT_THAT(error("/op_calls", json::parse(R"([{"op": "attention_kernel", "shapes": [[2, 0, 3]]}])")),
              HasSubstr("op_calls[0].shapes: expected dimensions in [1, 2^20]"));
  EXPECT_THAT(error("/op_calls", json::parse(R"([{"op": "a", "shapes": [[65536, 65536]]}])")),
              HasSubstr("op_calls[0].shapes: an input of more than 2^28 elements"));
}

TEST(CommandTrialTest, TheKernelLabsOpCallsRoundTrip) {
  const json spec = json::parse(R"({"schema": 1, "protocol": 1, "seed": 1, "params": {}, "task": {"steps": 20},
      "command": {"argv": ["/bin/true"]},
      "op_calls": [{"op": "attention_kernel", "shapes": [[2, 4, 49, 8], [2, 4, 49, 8], [2, 4, 49, 8]]}]})");
  const TrialSpec parsed = ParseTrialSpec(spec);
  ASSERT_EQ(parsed.op_calls.size(), 1u);
  EXPECT_EQ(parsed.op_calls[0].shapes[2], (std::vector<int64_t>{2, 4, 49, 8}));
  EXPECT_EQ(ToJson(parsed)["op_calls"], spec["op_calls"]);
  EXPECT_EQ(ToJson(ParseTrialSpec(ToJson(parsed))), ToJson(parsed));
}

}  // namespace
}  // namespace frontier
