#include "search_spaces/search_space.h"

#include <limits>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace frontier {
namespace {

using nlohmann::json;

// A valid space without dimensions, 8 lines long, so that rows below can
// append fields starting at line 9. Maps: 28 -> 14 (stem) -> 14 -> 7.
constexpr char kHead[] = R"(name: t
baseline:
  arch:
    stem: {kind: conv3x3, width: 16, stride: 2, depth: 1}
    stages:
      - {block: basic, width: 16, depth: 1}
      - {block: basic, width: 32, depth: 1, stride: 2}
objectives: [{metric: val_accuracy}]
)";

SearchSpace Parse(const std::string& tail) { return ParseSearchSpace(kHead + tail, "t.yaml"); }

std::string ErrorOf(const std::string& yaml) {
  try {
    ParseSearchSpace(yaml, "t.yaml");
  } catch (const SpaceError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::string ShippedFile(const std::string& name) {
  return std::string(FRONTIER_SOURCE_DIR) + "/search_spaces/" + name;
}

TEST(SearchSpaceTest, PluginPathsAreResolvedAgainstTheSpaceFolder) {
  const SearchSpace space = ParseSearchSpace(R"(name: t
baseline:
  arch:
    stem: {kind: conv3x3, width: 16, stride: 2, depth: 1}
    stages:
      - {block: fused_cna, width: 16, depth: 1}
  runtime: {plugins: [lib/libmine.so, /abs/libtheirs.so]}
objectives: [{metric: val_accuracy}]
space:
  stages[0].block: [basic, fused_cna]
)",
                                             "/work/spaces/t.yaml");
  EXPECT_EQ(space.base["runtime"]["plugins"][0], "/work/spaces/lib/libmine.so");
  EXPECT_EQ(space.base["runtime"]["plugins"][1], "/abs/libtheirs.so");
  // Without plugins the same names are unknown.
  EXPECT_NE(ErrorOf(std::string(kHead) + "space:\n  stages[0].block: [basic, fused_cna]\n").find("fused_cna"),
            std::string::npos);
}

TEST(SearchSpaceTest, OpsAttentionKernelIsADimensionAndUnknownKernelsAreErrors) {
  const SearchSpace space = Parse(
      "space:\n  stages[1].attention.kind: [none, mhsa]\n"
      "  ops.attention_kernel: [naive, chunked]\n");
  ASSERT_EQ(space.dimensions.size(), 2u);
  const Dimension& kernel = space.dimensions[1];
  EXPECT_EQ(kernel.paths, std::vector<std::string>{"arch.ops.attention_kernel"});
  EXPECT_TRUE(IsOpDimension(kernel));
  EXPECT_FALSE(IsOpDimension(space.dimensions[0]));
  Config chunked;
  chunked["stages[1].attention.kind"] = "mhsa";
  chunked["ops.attention_kernel"] = "chunked";
  const TrialSpec spec = MakeTrialSpec(space, chunked, 1, "t1");
  EXPECT_EQ(spec.arch.ops.attention_kernel, "chunked");
  EXPECT_EQ(ToJson(spec)["arch"]["ops"]["attention_kernel"], "chunked");
  EXPECT_EQ(ResolveArch(spec.arch, spec.task).ops.attention_kernel, "chunked");
  // The baseline runs the reference.
  EXPECT_EQ(ParseTrialSpec(space.base).arch.ops.attention_kernel, "naive");
  // An unknown kernel is an error at its choice, naming the known ones.
  const std::string error = ErrorOf(std::string(kHead) + "space:\n  ops.attention_kernel: [naive, flash]\n");
  EXPECT_NE(error.find("space.ops.attention_kernel: unknown choice 'flash'; expected one of naive, chunked"),
            std::string::npos)
      << error;
  // A spec's own field: the same check, and no unknown fields under arch.ops.
  json j = space.base;
  j["arch"]["ops"] = {{"attention_kernel", "flash"}};
  EXPECT_THROW(ParseTrialSpec(j), SpecError);
  j["arch"]["ops"] = {{"attention_kernal", "chunked"}};
  try {
    ParseTrialSpec(j);
    ADD_FAILURE() << "accepted";
  } catch (const SpecError& e) {
    EXPECT_EQ(e.path(), "arch.ops.attention_kernal");
  }
}

TEST(SearchSpaceTest, OpsBevPoolIsTheBevPoolingField) {
  std::string text = ReadSearchSpaceFile(ShippedFile("bev_lss.yaml"));
  const SearchSpace shipped = ParseSearchSpace(text, "bev_lss.yaml");
  const size_t at = text.find("  bev.pooling:");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("  bev.pooling:").size(), "  ops.bev_pool:");
  const SearchSpace space = ParseSearchSpace(text, "bev_lss.yaml");
  const auto pooling = [](const SearchSpace& s) -> const Dimension* {
    for (const Dimension& d : s.dimensions) {
      if (d.paths == std::vector<std::string>{"arch.bev.pooling"}) return &d;
    }
    return nullptr;
  };
  ASSERT_NE(pooling(shipped), nullptr);
  ASSERT_NE(pooling(space), nullptr);
  EXPECT_EQ(pooling(space)->name, "ops.bev_pool");
  EXPECT_EQ(pooling(space)->choices, pooling(shipped)->choices);
  EXPECT_TRUE(IsOpDimension(*pooling(shipped)));
}

// The onboard quickstart: every trial, every seed, carries the deploy section; a deploy metric can be a
// constraint; a deploy section of the wrong shape or format is refused by name.
TEST(SearchSpaceTest, OnboardQuickstartDeploysEveryTrial) {
  SearchSpace space = LoadSearchSpaceFile(ShippedFile("quickstart_onboard.yaml"));
  const std::vector<Config> grid = EnumerateGrid(space);
  ASSERT_EQ(grid.size(), 9u);
  for (int64_t seed : {1, 2}) {
    const TrialSpec spec = MakeTrialSpec(space, grid.back(), seed, "t");
    EXPECT_TRUE(spec.deploy.enabled);
    EXPECT_EQ(spec.deploy.formats, (std::vector<std::string>{"float", "int8"}));
    EXPECT_EQ(spec.deploy.batch, (std::vector<int>{1, 8}));
  }
  const SearchSpace without = Parse("");
  EXPECT_FALSE(MakeTrialSpec(without, EnumerateGrid(without).front(), 1, "t").deploy.enabled);
  const SearchSpace constrained =
      Parse("deploy: {formats: [int8]}\nconstraints: [{metric: deploy.int8.latency_ms, max: 5}]\n");
  ASSERT_EQ(constrained.constraints.size(), 1u);
  EXPECT_EQ(constrained.constraints[0].metric, "deploy.int8.latency_ms");
  EXPECT_NE(ErrorOf(std::string(kHead) + "deploy: [int8]\n").find("deploy: expected a mapping"), std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kHead) + "deploy: {formats: [onnx]}\n").find("format \"onnx\" is not in this build"),
            std::string::npos)
      << ErrorOf(std::string(kHead) + "deploy: {formats: [onnx]}\n");
}

TEST(SearchSpaceTest, QuickstartParsesAndEveryConfigRuns) {
  SearchSpace space = LoadSearchSpaceFile(ShippedFile("quickstart.yaml"));
  EXPECT_EQ(space.name, "quickstart");
  EXPECT_EQ(space.base["task"]["dataset"], "fashion-mnist");
  EXPECT_EQ(space.repeats, 2);
  EXPECT_EQ(space.strategy.name, "grid");
  ASSERT_EQ(space.objectives.size(), 2u);
  EXPECT_EQ(space.objectives[0].metric, "val_accuracy");
  EXPECT_EQ(space.objectives[1].metric, "throughput");
  EXPECT_TRUE(space.objectives[1].maximize);
  ASSERT_EQ(space.constraints.size(), 1u);
  EXPECT_EQ(space.constraints[0].metric, "peak_memory_mb");
  EXPECT_EQ(space.parity.metric, "val_accuracy");
  EXPECT_DOUBLE_EQ(space.parity.margin, 0.01);

  std::vector<Config> grid = EnumerateGrid(space);
  ASSERT_EQ(grid.size(), GridSize(space));
  EXPECT_GE(grid.size(), 13u);  // 12-20 variants plus the baseline
  EXPECT_LE(grid.size(), 21u);
  int baselines = 0;
  for (const Config& config : grid) {
    EXPECT_EQ(WhyInvalid(space, config), std::nullopt) << ConfigKey(config);
    baselines += IsBaseline(space, config);
  }
  EXPECT_EQ(baselines, 1);
}

TEST(SearchSpaceTest, ClusterSpaceParsesAsARandomSearch) {
  SearchSpace space = LoadSearchSpaceFile(ShippedFile("cluster_bev_backbones.yaml"));
  EXPECT_EQ(space.strategy.name, "random");
  EXPECT_GT(space.strategy.trials, 0);
  EXPECT_GT(GridSize(space), static_cast<size_t>(space.strategy.trials));
  EXPECT_GE(space.dimensions.size(), 6u);
  EXPECT_EQ(WhyInvalid(space, Config::object()), std::nullopt);
  // The grid is enumerable, and most of it runs.
  std::vector<Config> grid = EnumerateGrid(space);
  size_t valid = 0;
  for (const Config& config : grid) valid += !WhyInvalid(space, config);
  EXPECT_GT(valid, grid.size() / 2);
}

struct PathCase {
  std::string dimension;
  std::string choices;
  std::vector<std::string> paths;
};

class DimensionPathTest : public testing::TestWithParam<PathCase> {};

TEST_P(DimensionPathTest, ExpandsToTrialSpecFields) {
  const PathCase& c = GetParam();
  SearchSpace space = Parse("space:\n  " + c.dimension + ": " + c.choices + "\n");
  ASSERT_EQ(space.dimensions.size(), 1u);
  EXPECT_EQ(space.dimensions[0].name, c.dimension);
  EXPECT_EQ(space.dimensions[0].paths, c.paths);
}

INSTANTIATE_TEST_SUITE_P(
    ShorthandsAndPaths, DimensionPathTest,
    testing::Values(
        PathCase{
            "attention", "[none, mhsa]", {"arch.stages[0].attention.kind", "arch.stages[1].attention.kind"}},
        PathCase{"block", "[basic, convnext]", {"arch.stages[0].block", "arch.stages[1].block"}},
        PathCase{"kernel", "[3, 5]", {"arch.stages[0].kernel", "arch.stages[1].kernel"}},
        PathCase{"depth", "[1, 2]", {"arch.stages[0].depth", "arch.stages[1].depth"}},
        PathCase{"stem", "[conv3x3, patchify]", {"arch.stem.kind"}},
        PathCase{"norm", "[batch, layer]", {"arch.norm"}},
        PathCase{"activation", "[relu, gelu]", {"arch.activation"}},
        PathCase{"width_mult", "[1.0, 1.5]", {"arch.width_mult"}},
        PathCase{"depth_mult", "[1, 2]", {"arch.depth_mult"}},
        PathCase{"precision", "[fp32, bf16]", {"runtime.precision"}},
        PathCase{"memory_format", "[contiguous, channels_last]", {"runtime.memory_format"}},
        PathCase{"stages[*].block", "[basic, mbconv]", {"arch.stages[0].block", "arch.stages[1].block"}},
        PathCase{"stages[1].attention.kind", "[none, gqa]", {"arch.stages[1].attention.kind"}},
        PathCase{"stages[1].attention", "[{kind: mhsa}, {kind: linear}]", {"arch.stages[1].attention"}},
        PathCase{"arch.stem.width", "[16, 24]", {"arch.stem.width"}},
        PathCase{"runtime.threads", "[1, 2]", {"runtime.threads"}},
        PathCase{"task.optimizer.lr", "[0.1, 0.05]", {"task.optimizer.lr"}},
        PathCase{"task.batch_size", "[64, 128]", {"task.batch_size"}}),
    [](const testing::TestParamInfo<PathCase>& info) { return "case" + std::to_string(info.index); });

TEST(SearchSpaceTest, DefaultsAndOptionalFields) {
  SearchSpace space = Parse("");
  EXPECT_EQ(space.source, "t.yaml");
  EXPECT_EQ(space.repeats, 1);
  EXPECT_EQ(space.max_attempts, 3);
  EXPECT_EQ(space.strategy.name, "grid");
  EXPECT_EQ(space.parity.metric, "val_accuracy");
  EXPECT_TRUE(space.dimensions.empty());
  EXPECT_EQ(GridSize(space), 1u);
  EXPECT_EQ(EnumerateGrid(space), std::vector<Config>{Config::object()});
  EXPECT_EQ(space.base["schema"], kTrialSpecSchema);
  EXPECT_EQ(space.base["task"], json::object());
  EXPECT_EQ(space.base["runtime"], json::object());
}

TEST(SearchSpaceTest, GoalsDefaultToEachMetricsDirection) {
  SearchSpace space = ParseSearchSpace(R"(name: t
baseline: {arch: {stages: [{block: basic}]}}
objectives: [{metric: step_time_ms}, {metric: mfu}, {metric: params, goal: maximize}]
constraints: [{metric: peak_memory_mb, max: 512}, {metric: val_accuracy, min: 0.5, max: 1}]
repeats: 3
parity: {metric: val_loss, margin: 0.02}
strategy: {name: random, trials: 10, seed: 7}
max_attempts: 5
)",
                                       "t.yaml");
  EXPECT_FALSE(space.objectives[0].maximize);
  EXPECT_TRUE(space.objectives[1].maximize);
  EXPECT_TRUE(space.objectives[2].maximize);
  EXPECT_EQ(space.constraints[0].max, 512);
  EXPECT_EQ(space.constraints[0].min, std::nullopt);
  EXPECT_EQ(space.constraints[1].min, 0.5);
  EXPECT_EQ(space.repeats, 3);
  EXPECT_EQ(space.parity.metric, "val_loss");
  EXPECT_DOUBLE_EQ(space.parity.margin, 0.02);
  EXPECT_EQ(space.strategy.trials, 10);
  EXPECT_EQ(space.strategy.seed, 7);
  EXPECT_EQ(space.max_attempts, 5);
}

TEST(SearchSpaceTest, GridVariesTheFirstDimensionSlowest) {
  SearchSpace space = Parse("space:\n  precision: [fp32, bf16]\n  block: [basic, convnext, mbconv]\n");
  std::vector<Config> grid = EnumerateGrid(space);
  ASSERT_EQ(grid.size(), 6u);
  EXPECT_EQ(ConfigKey(grid[0]), R"({"block":"basic","precision":"fp32"})");
  EXPECT_EQ(ConfigKey(grid[1]), R"({"block":"convnext","precision":"fp32"})");
  EXPECT_EQ(ConfigKey(grid[2]), R"({"block":"mbconv","precision":"fp32"})");
  EXPECT_EQ(ConfigKey(grid[3]), R"({"block":"basic","precision":"bf16"})");
  EXPECT_EQ(ConfigKey(grid[5]), R"({"block":"mbconv","precision":"bf16"})");
  std::set<std::string> keys;
  for (const Config& config : grid) keys.insert(ConfigKey(config));
  EXPECT_EQ(keys.size(), 6u);
  EXPECT_THROW(EnumerateGrid(space, 5), SpaceError);
}

TEST(SearchSpaceTest, GridSizeSaturates) {
  SearchSpace space;
  for (int i = 0; i < 70; ++i) space.dimensions.push_back({"d" + std::to_string(i), {}, {1, 2}});
  EXPECT_EQ(GridSize(space), SIZE_MAX);
  try {
    EnumerateGrid(space, 1000);
    FAIL() << "expected a SpaceError";
  } catch (const SpaceError& e) {
    EXPECT_EQ(e.field(), "space");
  }
}

TEST(SearchSpaceTest, ConfigKeyIsCanonical) {
  Config a = {{"stem.kind", "patchify"}, {"runtime.precision", "bf16"}};
  Config b = {{"runtime.precision", "bf16"}, {"stem.kind", "patchify"}};
  EXPECT_EQ(ConfigKey(a), R"({"runtime.precision":"bf16","stem.kind":"patchify"})");
  EXPECT_EQ(ConfigKey(a), ConfigKey(b));
  EXPECT_EQ(ConfigKey(Config::object()), "{}");
}

TEST(SearchSpaceTest, BaselineDetection) {
  SearchSpace space = Parse("space:\n  block: [convnext, basic]\n  stem.width: [16, 32]\n");
  EXPECT_TRUE(IsBaseline(space, Config::object()));
  EXPECT_TRUE(IsBaseline(space, {{"block", "basic"}}));
  EXPECT_TRUE(IsBaseline(space, {{"block", "basic"}, {"stem.width", 16}}));
  EXPECT_FALSE(IsBaseline(space, {{"block", "convnext"}}));
  EXPECT_FALSE(IsBaseline(space, {{"block", "basic"}, {"stem.width", 32}}));
  int baselines = 0;
  for (const Config& config : EnumerateGrid(space)) baselines += IsBaseline(space, config);
  EXPECT_EQ(baselines, 1);
}

TEST(SearchSpaceTest, BaselineDetectionSeesDefaults) {
  // The baseline leaves attention unset (kind none): choosing none is the baseline.
  SearchSpace space = Parse("space:\n  attention: [none, mhsa]\n");
  EXPECT_TRUE(IsBaseline(space, {{"attention", "none"}}));
  EXPECT_FALSE(IsBaseline(space, {{"attention", "mhsa"}}));
}

TEST(SearchSpaceTest, MakeTrialSpecAppliesChoicesSeedAndId) {
  SearchSpace space = Parse(R"(task: {batch_size: 64, steps: 100}
space:
  block: [basic, convnext]
  precision: [fp32, bf16]
  task.optimizer.lr: [0.1, 0.05]
)");
  TrialSpec spec = MakeTrialSpec(
      space, {{"block", "convnext"}, {"precision", "bf16"}, {"task.optimizer.lr", 0.05}}, 2, "exp-1/7");
  EXPECT_EQ(spec.seed, 2);
  EXPECT_EQ(spec.trial_id, "exp-1/7");
  EXPECT_EQ(spec.task.batch_size, 64);
  EXPECT_EQ(spec.task.steps, 100);
  EXPECT_DOUBLE_EQ(spec.task.optimizer.lr, 0.05);
  ASSERT_EQ(spec.arch.stages.size(), 2u);
  EXPECT_EQ(spec.arch.stages[0].block, "convnext");
  EXPECT_EQ(spec.arch.stages[1].block, "convnext");
  EXPECT_EQ(spec.arch.stages[1].width, 32);  // untouched fields keep the baseline's values
  EXPECT_EQ(spec.runtime.precision, Precision::kBf16);

  TrialSpec baseline = MakeTrialSpec(space, Config::object(), 1, "exp-1/0");
  EXPECT_EQ(baseline.arch.stages[0].block, "basic");
  EXPECT_EQ(baseline.runtime.precision, Precision::kFp32);
  EXPECT_DOUBLE_EQ(baseline.task.optimizer.lr, 0.1);
}

TEST(SearchSpaceTest, ObjectChoicesMergeIntoTheField) {
  SearchSpace space = Parse(R"(space:
  attention: [none, {kind: window, window: 7}, {kind: gqa, heads: 4, kv_heads: 2}]
)");
  json applied = ApplyConfig(space, {{"attention", {{"kind", "window"}, {"window", 7}}}});
  EXPECT_EQ(applied["arch"]["stages"][0]["attention"], json({{"kind", "window"}, {"window", 7}}));
  EXPECT_EQ(applied["arch"]["stages"][0]["width"], 16);
  TrialSpec spec =
      MakeTrialSpec(space, {{"attention", {{"kind", "gqa"}, {"heads", 4}, {"kv_heads", 2}}}}, 1, "x");
  EXPECT_EQ(spec.arch.stages[1].attention.kind, "gqa");
  EXPECT_EQ(spec.arch.stages[1].attention.kv_heads, 2);
  EXPECT_EQ(spec.arch.stages[1].attention.window, 7);  // fields the choice leaves out keep their values
  EXPECT_EQ(MakeTrialSpec(space, {{"attention", "none"}}, 1, "x").arch.stages[0].attention.kind, "none");
}

TEST(SearchSpaceTest, ObjectChoicesOfAKindDoNotOverlapAnotherField) {
  // attention objects write whole attention objects, so a dimension on one of
  // their fields would overlap.
  EXPECT_EQ(ErrorOf(std::string(kHead) + R"(space:
  attention: [none, {kind: window, window: 7}]
  stages[1].attention.window: [7]
)"),
            "t.yaml:11: space.stages[1].attention.window: overlaps dimension 'attention' (both set "
            "arch.stages[1].attention)");
  // Scalar kinds write only the kind.
  EXPECT_NO_THROW(Parse("space:\n  attention: [none, window]\n  stages[1].attention.window: [7]\n"));
}

TEST(SearchSpaceTest, IncompatibleCombinationsAreFilteredNotRejected) {
  // Alone, each choice runs; a stem stride of 4 leaves stage 1 a 4x4 map that
  // a 7x7 window does not tile.
  SearchSpace space = Parse(R"(space:
  stem.stride: [2, 4]
  stages[1].attention.kind: [none, {kind: window, window: 7}]
)");
  json window = {{"kind", "window"}, {"window", 7}};
  EXPECT_EQ(WhyInvalid(space, {{"stem.stride", 2}, {"stages[1].attention.kind", window}}), std::nullopt);
  EXPECT_EQ(WhyInvalid(space, {{"stem.stride", 4}, {"stages[1].attention.kind", "none"}}), std::nullopt);
  Config bad = {{"stem.stride", 4}, {"stages[1].attention.kind", window}};
  EXPECT_EQ(WhyInvalid(space, bad),
            "arch.stages[1].attention.window: window 7 does not divide the stage's 4x4 feature map");
  EXPECT_THROW(MakeTrialSpec(space, bad, 1, "x"), SpecError);
  int invalid = 0;
  for (const Config& config : EnumerateGrid(space)) invalid += WhyInvalid(space, config).has_value();
  EXPECT_EQ(invalid, 1);
}

TEST(SearchSpaceTest, ConfigsNameOnlyTheSpacesDimensionsAndChoices) {
  SearchSpace space = Parse("space:\n  block: [basic, convnext]\n");
  auto error = [&](const Config& config) {
    try {
      ApplyConfig(space, config);
    } catch (const SpaceError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(error({{"blocks", "basic"}}), "t.yaml: config.blocks: not a dimension of this space (block)");
  EXPECT_EQ(error({{"block", "mbconv"}}),
            "t.yaml: config.block: 'mbconv' is not one of its choices (basic, convnext)");
  EXPECT_EQ(error(json::array()), "t.yaml: config: expected an object {dimension: choice}, got a list");
  EXPECT_EQ(error({{"block", "convnext"}}), "(accepted)");
}

TEST(SearchSpaceTest, ScalarsFollowYamlTypes) {
  // A quoted number is a string, so the trial spec rejects it as a width.
  EXPECT_EQ(ErrorOf(std::string(kHead) + "space:\n  stem.width: [16, \"24\"]\n"),
            "t.yaml:10: space.stem.width: expected an integer");
  SearchSpace space =
      Parse("space:\n  width_mult: [1, 1.5, 2.0e0]\n  stages[0].se: [false]\n  block: [mbconv]\n");
  EXPECT_EQ(space.dimensions[0].choices, (std::vector<json>{1, 1.5, 2.0}));
  EXPECT_EQ(space.dimensions[1].choices, std::vector<json>{false});
}

TEST(SearchSpaceTest, RepeatsMayBeAdaptive) {
  SearchSpace fixed = Parse("repeats: 3\n");
  EXPECT_EQ(fixed.repeats, 3);
  EXPECT_EQ(fixed.max_repeats, 3);
  EXPECT_FALSE(fixed.AdaptiveSeeds());
  EXPECT_EQ(fixed.parity.looks, 1);
  EXPECT_EQ(fixed.parity.test, "paired");  // seed k of every config shares data order and init
  SearchSpace adaptive = Parse("repeats: {min: 2, max: 6}\n");
  EXPECT_EQ(adaptive.repeats, 2);
  EXPECT_EQ(adaptive.max_repeats, 6);
  EXPECT_TRUE(adaptive.AdaptiveSeeds());
  EXPECT_EQ(adaptive.parity.looks, 5);  // seed counts 2, 3, 4, 5, 6
  EXPECT_EQ(GoalsOnlySpace("g", GoalsJson(adaptive))->parity.looks, 5);
  EXPECT_EQ(ErrorOf(std::string(kHead) + "repeats: {min: 4, max: 2}\n"),
            "t.yaml:9: repeats.max: must be at least repeats.min (4), got 2");
  EXPECT_EQ(ErrorOf(std::string(kHead) + "repeats: {min: 2}\n"), "t.yaml:9: repeats: missing field 'max'");
  EXPECT_EQ(ErrorOf(std::string(kHead) + "repeats: {min: 2, max: 3, step: 1}\n"),
            "t.yaml:9: repeats.step: unknown field; expected one of min, max");
  EXPECT_EQ(ErrorOf(std::string(kHead) + "repeats: {min: 0, max: 3}\n"),
            "t.yaml:9: repeats.min: must be in [1, 1000], got 0");
}

// A command trial over 20 dimensions of 10 choices (10^20 configurations): its
// space on line 6, the strategy on line 28 and repeats on 29.
std::string TwentyByTen(const std::string& strategy, int repeats = 1) {
  std::string yaml =
      "name: big\ntask: {steps: 100, eval_every: 25, warmup_steps: 10}\n"
      "trial:\n  command: [/bin/sh, train.sh]\n  params: {";
  for (int d = 0; d < 20; ++d) yaml += (d ? ", p" : "p") + std::to_string(d) + ": 1";
  yaml += "}\nspace:\n";
  for (int d = 0; d < 20; ++d)
    yaml += "  params.p" + std::to_string(d) + ": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n";
  yaml += "objectives: [{metric: val_accuracy}]\n";
  return yaml + "strategy: " + strategy + "\nrepeats: " + std::to_string(repeats) + "\n";
}

// What a strategy proposes at once is built up front, each seed a trial:
// every list (grid, random, sobol, alone or under asha; asha over sobol
// without trials once made the coordinator build proposals without end), an
// NSGA-II generation and an ablation round are bounded when the space is read.
TEST(SearchSpaceTest, WhatAStrategyProposesAtOnceIsBounded) {
  EXPECT_EQ(GridCountText(12), "12");
  EXPECT_EQ(GridCountText(std::numeric_limits<size_t>::max()), "at least 2^64");  // where the report says it too
  const std::string grid = "at least 2^64 configurations";  // 10^20: GridSize saturates
  EXPECT_EQ(ErrorOf(TwentyByTen("{name: asha, proposer: sobol, min_steps: 25, eta: 3}")),
            "t.yaml:28: strategy: the grid has " + grid +
                ", more than 100000, and asha's proposer sobol without trials lists every one when the "
                "experiment is submitted; set trials");
  EXPECT_EQ(ErrorOf(TwentyByTen("{name: sobol}")),
            "t.yaml:28: strategy: the grid has " + grid +
                ", more than 100000, and strategy sobol without trials lists every one when the experiment "
                "is submitted; set trials");
  EXPECT_EQ(ErrorOf(TwentyByTen("{name: sobol, trials: 2000000000}")),
            "t.yaml:28: strategy.trials: must be at most 100000: strategy sobol lists every configuration it "
            "runs when the experiment is submitted");
  EXPECT_EQ(ErrorOf(TwentyByTen("{name: asha, proposer: sobol, trials: 100001}")),
            "t.yaml:28: strategy.trials: must be at most 100000: asha's proposer sobol lists every "
            "configuration it runs when the experiment is submitted");
  EXPECT_EQ(
      ErrorOf(TwentyByTen("{name: random, trials: 10}")),
      "t.yaml:28: strategy: strategy random shuffles every configuration of the grid, and the grid has " +
          grid + ", more than 100000; use proposer sobol with trials");
  EXPECT_EQ(ErrorOf(TwentyByTen("{name: asha, proposer: random, trials: 10}")),
            "t.yaml:28: strategy: asha's proposer random shuffles every configuration of the grid, and the "
            "grid has " +
                grid + ", more than 100000; use proposer sobol with trials");
  EXPECT_EQ(ErrorOf(TwentyByTen("{name: grid}")), "t.yaml:6: space: the grid has " + grid +
                                                      ", more than 100000; use strategy sobol with trials, "
                                                      "nsga2 or tpe");
  // Configurations proposed at once x their first seeds (ASHA starts later
  // seeds after the first rung), a list or a generation.
  EXPECT_EQ(ErrorOf(TwentyByTen("{name: sobol, trials: 100000}", 11)),
            "t.yaml:29: repeats: strategy sobol proposes 100000 configurations at once, x 11 seeds: 1100000 "
            "trials, more than 1000000");
  EXPECT_EQ(ErrorOf(TwentyByTen("{name: nsga2, population: 2000}", 501)),
            "t.yaml:29: repeats: strategy nsga2 proposes 2000 configurations at once, x 501 seeds: 1002000 "
            "trials, more than 1000000");
  for (const std::string& accepted :
       {TwentyByTen("{name: sobol, trials: 100000}", 10),
        TwentyByTen("{name: asha, proposer: sobol, trials: 100000}", 11), TwentyByTen("{name: nsga2}"),
        TwentyByTen("{name: nsga2, population: 2000}", 500), TwentyByTen("{name: tpe}"),
        TwentyByTen("{name: asha, proposer: nsga2}"), TwentyByTen("{name: ablation}")}) {
    EXPECT_EQ(ErrorOf(accepted), "(accepted)") << accepted.substr(accepted.find("strategy:"));
  }
  // Screening enumerates and times every configuration first: 7 dimensions of
  // 1000 choices (10^21) are refused, named as the product that overflowed.
  std::string screened = std::string(kHead) + "screen: {steps: 2}\nspace:\n";
  for (const char* path : {"stem.width", "stages[0].width", "stages[0].depth", "stages[1].width",
                           "stages[1].depth", "task.batch_size", "runtime.threads"}) {
    screened += std::string("  ") + path + ": [8";
    for (int choice = 9; choice < 1008; ++choice) screened += ", " + std::to_string(choice);
    screened += "]\n";
  }
  EXPECT_EQ(
      ErrorOf(screened),
      "t.yaml:9: screen: the grid has at least 2^64 configurations, more than 10000: screening runs one "
      "trial per configuration, so every one is enumerated and timed first");
}

TEST(SearchSpaceTest, MissingFileIsASpaceError) {
  EXPECT_THROW(LoadSearchSpaceFile("/nonexistent/space.yaml"), SpaceError);
}

// The metrics a space's objectives and constraints may name, as an unknown one's message lists them.
constexpr char kSelectableMetrics[] =
    "val_accuracy, test_accuracy, val_iou, test_iou, val_loss, throughput, step_time_ms, mfu, peak_memory_mb, "
    "params, time_to_target_s, flops, latency_ms, latency_p99_ms, latency_b1_ms, latency_b1_p99_ms, comms_ms, "
    "comms_exposed_share, per_rank_throughput, scaling_efficiency, op_speedup, op_bandwidth_share, "
    "deploy.float.latency_ms, deploy.float.latency_p99_ms, deploy.float.size_bytes, deploy.float.val_accuracy, "
    "deploy.float.val_iou, deploy.torchscript.latency_ms, deploy.torchscript.latency_p99_ms, "
    "deploy.torchscript.size_bytes, deploy.torchscript.val_accuracy, deploy.torchscript.val_iou, "
    "deploy.int8.latency_ms, deploy.int8.latency_p99_ms, deploy.int8.size_bytes, deploy.int8.val_accuracy, "
    "deploy.int8.val_iou";

struct ErrorCase {
  std::string name;
  std::string yaml;  // appended to kHead unless it starts with "!"
  std::string message;
};

class SpaceErrorTest : public testing::TestWithParam<ErrorCase> {};

TEST_P(SpaceErrorTest, NamesFileLineFieldAndProblem) {
  const ErrorCase& c = GetParam();
  std::string yaml = c.yaml.rfind("!", 0) == 0 ? c.yaml.substr(1) : kHead + c.yaml;
  EXPECT_EQ(ErrorOf(yaml), c.message);
}

INSTANTIATE_TEST_SUITE_P(
    InvalidFiles, SpaceErrorTest,
    testing::Values(
        ErrorCase{"BadYamlSyntax", "space:\n  block: [basic, convnext\nrepeats: 2\n",
                  "t.yaml:11: invalid YAML: end of sequence flow not found"},
        ErrorCase{"BadIndentation", "repeats: 2\n  max_attempts: 3\n",
                  "t.yaml:10: invalid YAML: illegal map value"},
        ErrorCase{"NotAMapping", "!- a\n- b\n",
                  "t.yaml:1: expected a mapping of fields (name, task, baseline, space, objectives, ...)"},
        ErrorCase{"DuplicateKey", "repeats: 2\nrepeats: 3\n", "t.yaml:10: repeats: duplicate key"},
        ErrorCase{"UnknownTopLevelKey", "spaec:\n  block: [basic]\n",
                  "t.yaml:9: spaec: unknown field; expected one of name, description, task, baseline, trial, "
                  "space, "
                  "objectives, constraints, repeats, parity, strategy, screen, max_attempts, retry_timeouts, "
                  "profile, latency, "
                  "deploy"},
        ErrorCase{"MissingName", "!baseline: {arch: {stages: [{}]}}\nobjectives: [{metric: mfu}]\n",
                  "t.yaml: missing field 'name'"},
        ErrorCase{"BadName", "!name: my space\n",
                  "t.yaml:1: name: 'my space' is not a valid name (letters, "
                  "digits, '_', '.', '-'; at most 100)"},
        ErrorCase{"WrongTypeInteger", "repeats: two\n", "t.yaml:9: repeats: expected an integer, got 'two'"},
        ErrorCase{"WrongTypeString", "description: [a, b]\n",
                  "t.yaml:9: description: expected a string, got a list"},
        ErrorCase{"WrongTypeSpace", "space: [block]\n",
                  "t.yaml:9: space: expected a mapping of dimension: [choices], got a list"},
        ErrorCase{"ChoicesNotAList", "space:\n  block: basic\n",
                  "t.yaml:10: space.block: expected a list of choices, got 'basic'"},
        ErrorCase{"EmptyChoices", "space:\n  block: []\n",
                  "t.yaml:10: space.block: needs at least one choice"},
        ErrorCase{"DuplicateChoice", "space:\n  block:\n    - basic\n    - convnext\n    - basic\n",
                  "t.yaml:13: space.block: duplicate choice 'basic'"},
        ErrorCase{
            "UnknownChoice", "space:\n  precision: [fp32, bf16]\n  attention:\n    - none\n    - flash\n",
            "t.yaml:13: space.attention: unknown choice 'flash'; expected one of none, mhsa, window, gqa, "
            "linear"},
        ErrorCase{"ChoiceOutOfRange", "space:\n  stages[0].depth: [1, 0]\n",
                  "t.yaml:10: space.stages[0].depth: must be in [1, 1024], got 0"},
        ErrorCase{"ObjectChoiceInvalidInside", "space:\n  attention: [none, {kind: window, window: 4}]\n",
                  "t.yaml:10: space.attention: arch.stages[0].attention.window: window 4 does not divide the "
                  "stage's 14x14 feature map"},
        ErrorCase{"ObjectChoiceUnknownField", "space:\n  stages[1].attention: [{kind: mhsa, head: 2}]\n",
                  "t.yaml:10: space.stages[1].attention: arch.stages[1].attention.head: unknown field"},
        ErrorCase{
            "UnknownPathField", "space:\n  stages[0].widht: [8, 16]\n",
            "t.yaml:10: space.stages[0].widht: unknown field 'widht' in arch.stages[0]; expected one of "
            "attention, block, depth, expansion, kernel, moe, se, stride, width"},
        ErrorCase{"UnknownDimension", "space:\n  flavour: [a]\n",
                  "t.yaml:10: space.flavour: unknown field 'flavour' in arch; expected one of activation, "
                  "depth_mult, dropout, norm, norm_groups, ops, stages, stem, width_mult"},
        ErrorCase{
            "UnknownRuntimeField", "space:\n  runtime.dtype: [fp32]\n",
            "t.yaml:10: space.runtime.dtype: unknown field 'dtype' in runtime; expected one of "
            "batch_policy, bucket_cap_mb, device, memory_format, nodes, overlap, precision, ranks, spot_checks, threads"},
        ErrorCase{"IndexOutOfRange", "space:\n  stages[2].block: [basic]\n",
                  "t.yaml:10: space.stages[2].block: index 2 is out of range: arch.stages has 2 entries"},
        ErrorCase{"IndexIntoAScalar", "space:\n  norm[0]: [batch]\n",
                  "t.yaml:10: space.norm[0]: arch.norm is not a list"},
        ErrorCase{
            "MalformedPath", "space:\n  stages[x].block: [basic]\n",
            "t.yaml:10: space.stages[x].block: not a dimension: expected a shorthand (activation, attention, "
            "block, depth, depth_mult, kernel, memory_format, norm, ops.bev_pool, precision, stem, "
            "width_mult) or a "
            "field "
            "path like stages[1].attention.kind"},
        ErrorCase{
            "OverlappingDimensions", "space:\n  block: [basic]\n  stages[*].block: [convnext]\n",
            "t.yaml:11: space.stages[*].block: overlaps dimension 'block' (both set arch.stages[0].block)"},
        ErrorCase{
            "InvalidBaseline",
            "!name: t\nbaseline:\n  arch:\n    stages:\n      - {block: basic, width: 30,\n"
            "         attention: {kind: mhsa, heads: 4}}\nobjectives: [{metric: val_accuracy}]\n",
            "t.yaml:6: baseline.arch.stages[0].attention.heads: 4 heads do not divide the stage width 30 "
            "(set head_dim to decouple them)"},
        ErrorCase{
            "InvalidBaselineRuntime",
            "!name: t\nbaseline:\n  arch: {stages: [{}]}\n  runtime:\n"
            "    precision: fp8\nobjectives: [{metric: mfu}]\n",
            "t.yaml:5: baseline.runtime.precision: unknown choice 'fp8'; expected one of fp32, bf16, fp16"},
        ErrorCase{"BaselineMissingArch", "!name: t\nbaseline: {runtime: {}}\n",
                  "t.yaml:2: baseline: missing field 'arch'"},
        ErrorCase{"BaselineUnknownField", "!name: t\nbaseline:\n  arch: {stages: [{}]}\n  seed: 3\n",
                  "t.yaml:4: baseline.seed: unknown field; expected one of arch, runtime"},
        ErrorCase{
            "InvalidTask", "task:\n  steps: 5\n  warmup_steps: 10\n",
            "t.yaml:11: task.warmup_steps: must be below task.steps (5) so that some steps are measured"},
        ErrorCase{"UnknownTaskField", "task: {dataset: fashion-mnist, epochs: 3}\n",
                  "t.yaml:9: task.epochs: unknown field"},
        ErrorCase{"UnknownObjectiveMetric",
                  "!name: t\nbaseline: {arch: {stages: [{}]}}\nobjectives:\n"
                  "  - {metric: accuracy, goal: maximize}\n",
                  "t.yaml:4: objectives[0].metric: unknown metric 'accuracy'; expected one of " +
                      std::string(kSelectableMetrics)},
        ErrorCase{"TestSplitObjective",
                  "!name: t\nbaseline: {arch: {stages: [{}]}}\nobjectives: [{metric: "
                  "test_accuracy}]\n",
                  "t.yaml:3: objectives[0].metric: the test split is for the final report; select on "
                  "val_accuracy"},
        ErrorCase{"BadGoal",
                  "!name: t\nbaseline: {arch: {stages: [{}]}}\nobjectives: [{metric: mfu, goal: max}]\n",
                  "t.yaml:3: objectives[0].goal: unknown choice 'max'; expected one of maximize, minimize"},
        ErrorCase{"NoObjectives", "!name: t\nbaseline: {arch: {stages: [{}]}}\nobjectives: []\n",
                  "t.yaml:3: objectives: needs at least one objective"},
        ErrorCase{"UnknownConstraintMetric", "constraints: [{metric: memory, max: 10}]\n",
                  "t.yaml:9: constraints[0].metric: unknown metric 'memory'; expected one of " +
                      std::string(kSelectableMetrics)},
        ErrorCase{"ConstraintWithoutBound", "constraints:\n  - metric: mfu\n",
                  "t.yaml:10: constraints[0].metric: needs a min or a max"},
        ErrorCase{"ConstraintBoundNotANumber", "constraints: [{metric: mfu, min: high}]\n",
                  "t.yaml:9: constraints[0].min: expected a number, got 'high'"},
        ErrorCase{"RepeatsBelowOne", "repeats: 0\n", "t.yaml:9: repeats: must be in [1, 1000], got 0"},
        ErrorCase{
            "ParityNotQuality", "parity: {metric: throughput, margin: 0.1}\n",
            "t.yaml:9: parity.metric: 'throughput' is not a quality metric; expected one of val_accuracy, "
            "test_accuracy, val_iou, test_iou, val_loss, deploy.float.val_accuracy, deploy.float.val_iou, "
            "deploy.torchscript.val_accuracy, deploy.torchscript.val_iou, deploy.int8.val_accuracy, "
            "deploy.int8.val_iou"},
        ErrorCase{"NegativeMargin", "parity:\n  margin: -0.1\n",
                  "t.yaml:10: parity.margin: must be at least 0"},
        ErrorCase{"UnknownStrategy", "strategy: {name: bayes}\n",
                  "t.yaml:9: strategy.name: unknown choice 'bayes'; expected one of grid, random, sobol, "
                  "nsga2, tpe, asha, "
                  "ablation, external"},
        ErrorCase{"UnknownStrategyField", "strategy: {name: random, budget: 3}\n",
                  "t.yaml:9: strategy.budget: unknown field; expected one of name, trials, seed"},
        ErrorCase{"NegativeTrials", "strategy:\n  name: random\n  trials: -1\n",
                  "t.yaml:11: strategy.trials: must be in [0, 2147483647], got -1"},
        ErrorCase{"TrialsWithGrid", "strategy:\n  name: grid\n  trials: 5\n",
                  "t.yaml:11: strategy.trials: applies to strategies asha, external, nsga2, random, sobol, "
                  "tpe only"},
        ErrorCase{"MaxAttemptsZero", "max_attempts: 0\n",
                  "t.yaml:9: max_attempts: must be in [1, 100], got 0"},
        ErrorCase{
            "GridTooLarge",
            "space:\n  stem.width: [8, 16, 24, 32, 40, 48, 56, 64, 72, 80]\n"
            "  stages[0].width: [8, 16, 24, 32, 40, 48, 56, 64, 72, 80]\n"
            "  stages[1].width: [8, 16, 24, 32, 40, 48, 56, 64, 72, 80]\n"
            "  stages[0].kernel: [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]\n"
            "  stages[1].kernel: [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]\n"
            "  activation: [relu, gelu]\n",
            "t.yaml:9: space: the grid has 200000 configurations, more than 100000; use strategy sobol with "
            "trials, nsga2 or tpe"}),
    [](const testing::TestParamInfo<ErrorCase>& info) { return info.param.name; });

}  // namespace
}  // namespace frontier

namespace frontier {
namespace {

// The BEV spaces: IoU is a first-class quality metric, and every one-factor
// change from the baseline is a valid trial (the ablation strategy runs them all).
TEST(BevSearchSpaceTest, ShippedBevSpacesParseAndEveryOneFactorChangeRuns) {
  for (const char* file : {"bev_lss.yaml", "bev_lss_gpu.yaml"}) {
    SearchSpace space = LoadSearchSpaceFile(ShippedFile(file));
    EXPECT_EQ(space.base["task"]["dataset"], "bev-synthetic") << file;
    EXPECT_EQ(space.objectives[0].metric, "val_iou") << file;
    EXPECT_TRUE(space.objectives[0].maximize) << file;
    EXPECT_EQ(space.parity.metric, "val_iou") << file;
    EXPECT_EQ(WhyInvalid(space, Config::object()), std::nullopt) << file;
    size_t variants = 0;
    for (const Dimension& dim : space.dimensions) {
      for (const auto& choice : dim.choices) {
        Config config = {{dim.name, choice}};
        EXPECT_EQ(WhyInvalid(space, config), std::nullopt) << file << " " << ConfigKey(config);
        variants += !IsBaseline(space, config);
      }
    }
    EXPECT_GE(variants, 6u) << file;
  }
}

TEST(BevSearchSpaceTest, IouMetricsAreKnownAndTestIouIsNotSelectable) {
  const std::string bev_head = R"(name: t
task: {dataset: bev-synthetic, bev: {train_samples: 8, val_samples: 8, test_samples: 8}}
baseline:
  arch:
    stages: [{block: basic, width: 16, depth: 1}]
    bev: {view_transform: lss}
)";
  EXPECT_EQ(ErrorOf(bev_head + "objectives: [{metric: val_iou}]\nparity: {metric: test_iou, margin: 0.01}\n"),
            "(accepted)");
  EXPECT_NE(ErrorOf(bev_head + "objectives: [{metric: test_iou}]\n").find("select on val_iou"), std::string::npos)
      << ErrorOf(bev_head + "objectives: [{metric: test_iou}]\n");
}

TEST(SearchSpaceTest, ProfileAppliesToEveryTrial) {
  SearchSpace space = Parse("task: {steps: 20, warmup_steps: 5}\nprofile: {steps: 3}\nspace:\n  precision: [fp32, bf16]\n");
  for (const Config& config : EnumerateGrid(space)) {
    const TrialSpec spec = MakeTrialSpec(space, config, 1, "t");
    EXPECT_EQ(spec.profile.steps, 3);
    EXPECT_EQ(spec.profile.tool, "libtorch");
  }
  EXPECT_NE(ErrorOf(std::string(kHead) + "task: {steps: 20, warmup_steps: 5}\nprofile: {steps: 30}\n").find("profile"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kHead) + "profile: 3\n").find("profile"), std::string::npos);
}

}  // namespace
}  // namespace frontier

namespace frontier {
namespace {

// What an experiment is judged by survives the trip through the stored goals.
TEST(GoalsTest, GoalsOnlySpaceKeepsObjectivesConstraintsAndParity) {
  SearchSpace space = LoadSearchSpaceFile(ShippedFile("quickstart.yaml"));
  space.constraints = {{"peak_memory_mb", std::nullopt, 4096.0}, {"params", 1000.0, std::nullopt}};
  space.parity = {"val_loss", 0.02, "paired"};
  space.objectives.push_back({"step_time_ms", false});
  const nlohmann::json goals = nlohmann::json::parse(GoalsJson(space).dump());
  const std::optional<SearchSpace> back = GoalsOnlySpace("q", goals);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->name, "q");
  ASSERT_EQ(back->objectives.size(), space.objectives.size());
  for (size_t i = 0; i < space.objectives.size(); ++i) {
    EXPECT_EQ(back->objectives[i].metric, space.objectives[i].metric);
    EXPECT_EQ(back->objectives[i].maximize, space.objectives[i].maximize);
  }
  ASSERT_EQ(back->constraints.size(), 2u);
  EXPECT_EQ(back->constraints[0].max, 4096.0);
  EXPECT_EQ(back->constraints[0].min, std::nullopt);
  EXPECT_EQ(back->constraints[1].min, 1000.0);
  EXPECT_EQ(back->parity.metric, "val_loss");
  EXPECT_EQ(back->parity.margin, 0.02);
  EXPECT_EQ(back->parity.test, "paired");
  EXPECT_TRUE(back->dimensions.empty());
  // Stores older than goals: the space is parsed instead.
  EXPECT_EQ(GoalsOnlySpace("q", nlohmann::json::object()), std::nullopt);
  EXPECT_EQ(GoalsOnlySpace("q", {{"objectives", nlohmann::json::array()}, {"constraints", nlohmann::json::array()}}),
            std::nullopt);
}

}  // namespace
}  // namespace frontier
