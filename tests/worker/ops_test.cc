// The op registry, the correctness gate and plugins (docs/plugins.md).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/op_bench.h"
#include "worker/trial/ops/bev_pool.h"
#include "worker/trial/ops/correctness.h"
#include "worker/trial/ops/op.h"
#include "worker/trial/plugin.h"
#include "worker/trial/trainer.h"

namespace frontier {
namespace {

std::string TestPlugin(const std::string& name) { return std::string(TEST_PLUGIN_DIR) + "/lib" + name + ".so"; }

void LoadTestPlugins() {
  LoadPlugins({TestPlugin("test_plugin_wrong_ops"), EXAMPLE_PLUGIN});  // once per process
}

// The recorded call of `variant` on a small frustum: 2 samples, 2 cameras,
// 4 depth bins, 3x5 pixels, 6 channels, an 8x8 grid with some points outside.
ops::OpCall SmallCall(const std::string& variant, torch::ScalarType dtype = torch::kFloat) {
  const bev::FrustumShape shape{2, 4, 3, 5};
  torch::manual_seed(7);
  const bev::PoolPlan plan = bev::MakePoolPlan(torch::randint(-8, 64, {shape.points()}, torch::kLong), 64, shape);
  const torch::Tensor depth = torch::rand({2, 2, 4, 3, 5}).to(dtype);
  const torch::Tensor features = torch::randn({2, 2, 3, 5, 6}).to(dtype);
  ops::CallRecorder recorder;
  bev::Pool(variant, depth, features, plan);
  bev::Pool(variant, depth, features, plan);  // the same shapes: kept once
  EXPECT_EQ(recorder.calls().size(), 1u);
  return recorder.calls().at(0);
}

TEST(OpRegistryTest, BevPoolIsAnOpWithItsReferenceAndVariants) {
  const ops::Op& op = ops::OpRegistry().At("bev_pool");
  EXPECT_EQ(op.reference, "naive");
  const std::vector<std::string> variants = op.variants();
  for (const std::string v : {"naive", "fused", "depth_fused"}) {
    EXPECT_NE(std::find(variants.begin(), variants.end(), v), variants.end()) << v;
  }
  const ops::OpCall call = SmallCall("fused");
  EXPECT_EQ(call.op, "bev_pool");
  EXPECT_EQ(call.Shapes(), "depth (2, 2, 4, 3, 5) fp32, features (2, 2, 3, 5, 6) fp32");
  ASSERT_TRUE(call.edge_cases);
  EXPECT_EQ(call.edge_cases().size(), 4u);
  EXPECT_GT(call.bytes_moved(true), call.bytes_moved(false));
}

TEST(OpRegistryTest, NothingIsRecordedWithoutARecorder) {
  const ops::OpCall call = SmallCall("naive");  // records inside its own recorder
  EXPECT_NO_THROW({ ops::CallRecorder again; });  // and released it
}

TEST(CorrectnessGateTest, BuiltInVariantsPassInEveryDtype) {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kDouble}) {
    for (const std::string v : {"naive", "fused", "depth_fused"}) {  // naive: the reference in the dtype vs float64
      const ops::VariantCheck c = ops::CheckVariant(SmallCall(v, dtype), 3, 11);
      EXPECT_TRUE(c.passed) << v << " " << dtype << ": " << c.problem << " at " << c.where;
      EXPECT_EQ(c.checks, 3 + 4);  // draws + edge cases
      EXPECT_LE(c.worst_rel, c.tolerance);
    }
  }
}

TEST(CorrectnessGateTest, EveryWrongVariantIsCaughtEachTime) {
  LoadTestPlugins();
  const std::map<std::string, std::string> wrong = {
      {"scaled", "forward"},                   // off by a scale of 1.001
      {"wrong_grad", "gradient of features"},  // 1% too large a gradient
      {"cached", "forward"},                   // a kept output buffer
      {"detached", "draw 1"}};                 // no backward
  for (const auto& [variant, where] : wrong) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const ops::VariantCheck c = ops::CheckVariant(SmallCall(variant), 3, seed);
      EXPECT_FALSE(c.passed) << variant << " seed " << seed;
      EXPECT_NE(c.where.find(where), std::string::npos) << variant << ": " << c.where << " / " << c.problem;
      EXPECT_FALSE(c.problem.empty());
    }
  }
  const ops::VariantCheck scaled = ops::CheckVariant(SmallCall("scaled"), 3, 1);
  EXPECT_GT(scaled.worst_rel, 5e-4);  // about 1e-3 (relative to |ref| + mean |ref|)
  EXPECT_LT(scaled.worst_rel, 2e-3);
  EXPECT_GT(scaled.worst_abs, 0);
}

TEST(CorrectnessGateTest, RightPluginVariantsPass) {
  LoadTestPlugins();
  for (const std::string v : {"right_copy", "quick_cumsum"}) {
    for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
      const ops::VariantCheck c = ops::CheckVariant(SmallCall(v, dtype), 3, 2);
      EXPECT_TRUE(c.passed) << v << ": " << c.problem << " at " << c.where;
    }
  }
}

TEST(CorrectnessGateTest, TheGateChecksOnlyNonReferenceVariantsAndStopsAtTheFirstFailure) {
  LoadTestPlugins();
  const ops::GateResult all_right = ops::RunGate({SmallCall("naive"), SmallCall("fused")}, 2, 1);
  ASSERT_EQ(all_right.checks.size(), 1u);
  EXPECT_TRUE(all_right.passed());
  EXPECT_GE(all_right.seconds, 0);
  const ops::GateResult wrong = ops::RunGate({SmallCall("scaled"), SmallCall("fused")}, 2, 1);
  ASSERT_EQ(wrong.checks.size(), 1u);
  ASSERT_NE(wrong.failure(), nullptr);
  EXPECT_EQ(wrong.failure()->variant, "scaled");
  const nlohmann::json j = wrong.ToJson();
  EXPECT_FALSE(j["passed"].get<bool>());
  EXPECT_EQ(j["variants"][0]["reference"], "naive");
  EXPECT_TRUE(j["variants"][0].contains("where"));
}

TEST(PluginTest, LoadErrorsNameThePluginAndTheProblem) {
  const auto error_of = [](const std::string& path) -> std::string {
    try {
      LoadPlugins({path});
    } catch (const PluginError& e) {
      return e.what();
    }
    return "(loaded)";
  };
  EXPECT_NE(error_of("/nonexistent/libnothing.so").find("/nonexistent/libnothing.so"), std::string::npos);
  EXPECT_NE(error_of(TestPlugin("test_plugin_not_plugin")).find("is not a Frontier plugin"), std::string::npos);
  const std::string old = error_of(TestPlugin("test_plugin_old_torch"));
  EXPECT_NE(old.find("built against LibTorch 1.12.1"), std::string::npos) << old;
  const std::string throws = error_of(TestPlugin("test_plugin_throws"));
  EXPECT_NE(throws.find("registration failed: this plugin's registration fails on purpose"), std::string::npos)
      << throws;
  const std::string text_file = std::string(FRONTIER_SOURCE_DIR) + "/README.md";
  EXPECT_NE(error_of(text_file).find("could not be loaded"), std::string::npos);
  // A second copy of a loaded plugin registers its names twice.
  LoadTestPlugins();
  const std::string copy = (std::filesystem::temp_directory_path() / "frontier_wrong_ops_copy.so").string();
  std::filesystem::copy_file(TestPlugin("test_plugin_wrong_ops"), copy,
                             std::filesystem::copy_options::overwrite_existing);
  const std::string twice = error_of(copy);
  EXPECT_NE(twice.find("'scaled' is registered twice"), std::string::npos) << twice;
  std::filesystem::remove(copy);
  EXPECT_EQ(error_of(TestPlugin("test_plugin_wrong_ops")), "(loaded)");  // the same file again: a no-op
}

nlohmann::json BevTrial(const std::string& pooling, const std::string& block = "basic") {
  nlohmann::json j = {
      {"schema", 1},
      {"seed", 1},
      {"task",
       {{"dataset", "bev-synthetic"},
        {"bev",
         {{"cameras", 4}, {"height", 24}, {"width", 64}, {"grid", 32}, {"max_boxes", 4}, {"train_samples", 8},
          {"val_samples", 4}, {"test_samples", 4}}},
        {"batch_size", 2},
        {"steps", 4},
        {"eval_every", 0},
        {"warmup_steps", 1}}},
      {"arch",
       {{"stem", {{"kind", "conv3x3"}, {"width", 8}, {"stride", 2}, {"depth", 1}}},
        {"stages", {{{"block", block}, {"width", 8}, {"depth", 1}, {"stride", 2}}}},
        {"bev",
         {{"view_transform", "lss"},
          {"pooling", pooling},
          {"depth_bins", 8},
          {"channels", 8},
          {"encoder", {{{"block", "basic"}, {"width", 8}, {"depth", 1}, {"stride", 1}}}}}}}},
      {"runtime",
       {{"threads", 1}, {"plugins", {TestPlugin("test_plugin_wrong_ops"), std::string(EXAMPLE_PLUGIN)}}}},
      {"profile", {{"steps", 0}}},
      {"latency", {{"repetitions", 0}}}};
  return j;
}

TEST(TrialGateTest, AWrongVariantFailsTheTrialAsIncorrectBeforeAnyTiming) {
  TrialOptions options;
  const nlohmann::json r = RunTrial(ParseTrialSpec(BevTrial("wrong_grad")), options);
  EXPECT_EQ(r["status"], "failed") << r.dump();
  EXPECT_EQ(r["error_kind"], "incorrect");
  EXPECT_NE(r["error"].get<std::string>().find("bev_pool variant 'wrong_grad'"), std::string::npos) << r["error"];
  EXPECT_NE(r["incorrect"]["where"].get<std::string>().find("gradient of features"), std::string::npos);
  EXPECT_GT(r["incorrect"]["worst_rel_error"].get<double>(), 1e-3);
  EXPECT_FALSE(r.contains("step_time_ms")) << "never timed";
  EXPECT_EQ(r.value("steps_run", -1), 0);
}

TEST(TrialGateTest, ARightPluginVariantAndBlockAreCheckedThenTimed) {
  TrialOptions options;
  const nlohmann::json r = RunTrial(ParseTrialSpec(BevTrial("quick_cumsum", "fused_cna")), options);
  ASSERT_EQ(r["status"], "completed") << r.dump();
  ASSERT_TRUE(r.contains("correctness"));
  EXPECT_TRUE(r["correctness"]["passed"].get<bool>());
  EXPECT_EQ(r["correctness"]["variants"][0]["variant"], "quick_cumsum");
  EXPECT_EQ(r["correctness"]["variants"][0]["checks"], 3 + 4);
  EXPECT_GE(r["correctness"]["seconds"].get<double>(), 0);
  // The variant against the reference at the model's shapes, outside step time.
  EXPECT_EQ(r["op"]["variant"], "quick_cumsum");
  EXPECT_EQ(r["op"]["reference"], "naive");
  EXPECT_GT(r["op"]["speedup"].get<double>(), 0);
  EXPECT_GT(r["op"]["forward_backward_ms"].get<double>(), 0);
  EXPECT_GT(r["op"]["reference_forward_backward_ms"].get<double>(), 0);
  EXPECT_GT(r["op"]["bandwidth_share"].get<double>(), 0);
  // The reference itself is not checked or timed: no correctness section, a speed-up of 1 by definition.
  const nlohmann::json naive = RunTrial(ParseTrialSpec(BevTrial("naive")), options);
  ASSERT_EQ(naive["status"], "completed") << naive.dump();
  EXPECT_FALSE(naive.contains("correctness"));
  EXPECT_EQ(naive["op"]["speedup"], 1.0);
  EXPECT_FALSE(naive["op"].contains("forward_backward_ms"));
}

TEST(TrialGateTest, AMissingPluginOrAnUnregisteredNameFailsTheTrialNamingIt) {
  TrialOptions options;
  nlohmann::json j = BevTrial("naive");
  j["runtime"]["plugins"] = {"/nonexistent/libmissing.so"};
  nlohmann::json r = RunTrial(ParseTrialSpec(j), options);
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(r["error_kind"], "plugin");
  EXPECT_NE(r["error"].get<std::string>().find("/nonexistent/libmissing.so"), std::string::npos);
  r = RunTrial(ParseTrialSpec(BevTrial("no_such_variant")), options);
  EXPECT_EQ(r["status"], "failed");
  EXPECT_NE(r["error"].get<std::string>().find("no_such_variant"), std::string::npos) << r["error"];
}

TEST(OpBenchTest, TimesTheCorrectVariantsAtTheModelsShapesAndNeverTheWrongOnes) {
  OpBenchOptions options;
  options.rounds = 3;
  options.warmup = 1;
  const nlohmann::json r = RunOpBench(ParseTrialSpec(BevTrial("naive")), options);
  EXPECT_EQ(r["event"], "op_bench");
  EXPECT_GT(r["copy_bandwidth_gb_s"].get<double>(), 0);
  ASSERT_EQ(r["ops"].size(), 1u);
  const nlohmann::json& op = r["ops"][0];
  EXPECT_EQ(op["op"], "bev_pool");
  EXPECT_EQ(op["reference"], "naive");
  EXPECT_EQ(op["shapes"], "depth (2, 4, 8, 6, 16) fp32, features (2, 4, 6, 16, 8) fp32");
  std::map<std::string, nlohmann::json> by_name;
  for (const nlohmann::json& v : op["variants"]) by_name[v["variant"]] = v;
  for (const std::string right : {"naive", "fused", "depth_fused", "right_copy", "quick_cumsum"}) {
    ASSERT_TRUE(by_name.count(right)) << right;
    EXPECT_TRUE(by_name[right]["correct"].get<bool>()) << right;
    EXPECT_EQ(by_name[right]["forward_backward_ms"]["n"], 3) << right;
    EXPECT_GT(by_name[right]["forward_backward_ms"]["median"].get<double>(), 0) << right;
    EXPECT_GT(by_name[right]["speedup"]["median"].get<double>(), 0) << right;
    EXPECT_LE(by_name[right]["speedup"]["low"].get<double>(), by_name[right]["speedup"]["high"].get<double>());
    EXPECT_GT(by_name[right]["bytes_moved_mb"].get<double>(), 0) << right;
  }
  EXPECT_DOUBLE_EQ(by_name["naive"]["speedup"]["median"].get<double>(), 1.0);  // the reference against itself
  for (const std::string wrong : {"scaled", "wrong_grad", "cached", "detached"}) {
    ASSERT_TRUE(by_name.count(wrong)) << wrong;
    EXPECT_FALSE(by_name[wrong]["correct"].get<bool>()) << wrong;
    EXPECT_FALSE(by_name[wrong].contains("forward_backward_ms")) << wrong << " was timed";
    EXPECT_FALSE(by_name[wrong]["correctness"]["problem"].get<std::string>().empty());
  }
}

}  // namespace
}  // namespace frontier
