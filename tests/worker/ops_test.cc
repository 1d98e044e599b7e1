// The op registry, the correctness gate and plugins (docs/plugins.md).
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/measure/flop_counter.h"
#include "worker/trial/op_bench.h"
#include "worker/trial/ops/attention_kernel.h"
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

// The recorded attention call of `variant`: 2 samples, `heads` heads of 8
// channels, `length` tokens (more than one key block by default).
ops::OpCall AttentionCall(const std::string& variant, torch::ScalarType dtype = torch::kFloat,
                          int64_t heads = 3, int64_t length = 2 * attention::kKeyBlock + 5) {
  torch::manual_seed(5);
  const torch::Tensor q = torch::randn({2, heads, length, 8}).to(dtype);
  const torch::Tensor k = torch::randn({2, heads, length, 8}).to(dtype);
  const torch::Tensor v = torch::randn({2, heads, length, 8}).to(dtype);
  ops::CallRecorder recorder;
  attention::Attend(variant, q, k, v);
  attention::Attend(variant, q, k, v);  // the same shapes: kept once
  EXPECT_EQ(recorder.calls().size(), 1u);
  return recorder.calls().at(0);
}

TEST(OpRegistryTest, AttentionKernelIsAnOpWithItsReferenceAndVariants) {
  const ops::Op& op = ops::OpRegistry().At("attention_kernel");
  EXPECT_EQ(op.reference, "naive");
  const std::vector<std::string> variants = op.variants();
  for (const std::string v : {"naive", "chunked"}) {
    EXPECT_NE(std::find(variants.begin(), variants.end(), v), variants.end()) << v;
  }
  const ops::OpCall call = AttentionCall("chunked", torch::kFloat, 3, 10);
  EXPECT_EQ(call.op, "attention_kernel");
  EXPECT_EQ(call.Shapes(), "q (2, 3, 10, 8) fp32, k (2, 3, 10, 8) fp32, v (2, 3, 10, 8) fp32");
  ASSERT_TRUE(call.edge_cases);
  std::vector<std::string> edges;
  for (const ops::OpCall& edge : call.edge_cases()) edges.push_back(edge.edge + ": " + edge.Shapes());
  EXPECT_EQ(edges,
            (std::vector<std::string>{
                "sequence length 1: q (2, 3, 1, 8) fp32, k (2, 3, 1, 8) fp32, v (2, 3, 1, 8) fp32",
                "a single head: q (2, 1, 10, 8) fp32, k (2, 1, 10, 8) fp32, v (2, 1, 10, 8) fp32",
                "one key more than a block: q (2, 3, 65, 8) fp32, k (2, 3, 65, 8) fp32, v (2, 3, 65, 8) fp32",
                "logits 20 times larger: q (2, 3, 10, 8) fp32, k (2, 3, 10, 8) fp32, v (2, 3, 10, 8) fp32"}));
  EXPECT_GT(call.bytes_moved(true), call.bytes_moved(false));
  // An unknown kernel is an error naming it.
  const torch::Tensor x = torch::randn({1, 1, 2, 4});
  try {
    attention::Attend("flash9", x, x, x);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "unknown attention kernel 'flash9'");
  }
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
      EXPECT_EQ(c.checks, 3 + 5 + 4 + 2 + 1 + 2);  // draws, structured, edge cases, shapes, the repeat, no autograd
      EXPECT_LE(c.worst_rel, c.tolerance);
    }
  }
}

TEST(CorrectnessGateTest, ChunkedAttentionPassesInEveryDtypeWithItsEdgeCases) {
  for (const auto dtype : {torch::kFloat, torch::kBFloat16, torch::kDouble}) {
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const ops::VariantCheck c = ops::CheckVariant(AttentionCall("chunked", dtype), 3, seed);
      EXPECT_TRUE(c.passed) << dtype << " seed " << seed << ": " << c.problem << " at " << c.where;
      EXPECT_EQ(c.checks, 3 + 6 + 4 + 2 + 1 + 2);  // draws, structured, edge cases, shapes, the repeat, no autograd
      EXPECT_LE(c.worst_rel, c.tolerance);
    }
  }
  // The kernel against the float64 reference directly, forward and every
  // gradient, in fp32: the recurrence is exact up to float rounding.
  torch::manual_seed(3);
  std::vector<torch::Tensor> in, exact;
  for (int i = 0; i < 3; ++i) in.push_back(torch::randn({2, 2, 150, 16}).requires_grad_(true));
  for (const torch::Tensor& t : in) exact.push_back(t.detach().to(torch::kDouble).requires_grad_(true));
  const torch::Tensor out = attention::ChunkedAttention(in[0], in[1], in[2]);
  const torch::Tensor ref = attention::NaiveAttention(exact[0], exact[1], exact[2]);
  const torch::Tensor upstream = torch::randn(out.sizes());
  const auto g = torch::autograd::grad({out}, in, {upstream});
  const auto rg = torch::autograd::grad({ref}, exact, {upstream.to(torch::kDouble)});
  EXPECT_LT((out.to(torch::kDouble) - ref).abs().max().item<double>(), 1e-5);
  for (int i = 0; i < 3; ++i)
    EXPECT_LT((g[i].to(torch::kDouble) - rg[i]).abs().max().item<double>(), 1e-4) << i;
}

TEST(CorrectnessGateTest, EveryWrongAttentionVariantIsCaughtEachTime) {
  LoadTestPlugins();
  const std::map<std::string, std::string> wrong = {
      {"scaled", "forward"},            // logits off by a scale of 1.01
      {"wrong_grad", "gradient of k"},  // 1% too large a gradient
      {"cached", "draw 1"}};            // a kept output buffer (from the recorded call: stale)
  for (const auto& [variant, where] : wrong) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const ops::VariantCheck c = ops::CheckVariant(AttentionCall(variant), 3, seed);
      EXPECT_FALSE(c.passed) << variant << " seed " << seed;
      EXPECT_NE(c.where.find(where), std::string::npos) << variant << ": " << c.where << " / " << c.problem;
      EXPECT_FALSE(c.problem.empty());
    }
  }
  for (const auto dtype : {torch::kFloat, torch::kBFloat16}) {
    const ops::VariantCheck c = ops::CheckVariant(AttentionCall("right_copy", dtype), 3, 2);
    EXPECT_TRUE(c.passed) << "right_copy: " << c.problem << " at " << c.where;
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
  const std::string old_api = error_of(TestPlugin("test_plugin_old_api"));
  EXPECT_NE(old_api.find("was built for plugin API " + std::to_string(kPluginApiVersion - 1) +
                         ", this frontier-trial has API " + std::to_string(kPluginApiVersion)),
            std::string::npos)
      << old_api;
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
  EXPECT_EQ(r["correctness"]["variants"][0]["checks"], 3 + 5 + 4 + 2 + 1 + 2);
  EXPECT_GE(r["correctness"]["seconds"].get<double>(), 0);
  // The variant against the reference at the model's shapes, outside step time.
  EXPECT_EQ(r["op"]["variant"], "quick_cumsum");
  EXPECT_EQ(r["op"]["reference"], "naive");
  EXPECT_GT(r["op"]["speedup"].get<double>(), 0);
  EXPECT_GT(r["op"]["forward_backward_ms"].get<double>(), 0);
  EXPECT_GT(r["op"]["reference_forward_backward_ms"].get<double>(), 0);
  EXPECT_GT(r["op"]["bandwidth_share"].get<double>(), 0);
  EXPECT_EQ(r["op"]["rounds"], 7);
  EXPECT_GE(r["op"]["speedup_coverage"].get<double>(), 0.95) << "the interval must cover what it is read as";
  // The reference itself is not checked or timed: no correctness section, a speed-up of 1 by definition.
  const nlohmann::json naive = RunTrial(ParseTrialSpec(BevTrial("naive")), options);
  ASSERT_EQ(naive["status"], "completed") << naive.dump();
  EXPECT_FALSE(naive.contains("correctness"));
  EXPECT_EQ(naive["op"]["speedup"], 1.0);
  EXPECT_FALSE(naive["op"].contains("forward_backward_ms"));
}

TEST(TrialGateTest, SpotChecksInTrainingCatchAVariantRightOnlyWhereTheGateCallsIt) {
  TrialOptions options;
  // Right on the gate's and the benchmark's leaf tensors, wrong inside the model: the gate passes them.
  for (const auto& [variant, where] : std::map<std::string, std::string>{
           {"wrong_in_model", "training step"}, {"wrong_grad_in_model", "gradient of depth"}}) {
    const nlohmann::json r = RunTrial(ParseTrialSpec(BevTrial(variant)), options);
    EXPECT_EQ(r["status"], "failed") << r.dump();
    EXPECT_EQ(r["error_kind"], "incorrect") << variant;
    EXPECT_TRUE(r["correctness"]["passed"].get<bool>()) << variant;
    EXPECT_NE(r["error"].get<std::string>().find("bev_pool variant '" + variant + "'"), std::string::npos)
        << r["error"];
    EXPECT_NE(r["incorrect"]["where"].get<std::string>().find(where), std::string::npos) << r["incorrect"];
    EXPECT_NE(r["incorrect"]["where"].get<std::string>().find("training step"), std::string::npos);
    EXPECT_FALSE(r["spot_checks"].back()["passed"].get<bool>());
    EXPECT_GE(r["steps_run"].get<int>(), 1) << "caught after the warm-up step";
  }
  nlohmann::json unwatched = BevTrial("wrong_in_model");
  unwatched["runtime"]["spot_checks"] = 0;
  EXPECT_EQ(RunTrial(ParseTrialSpec(unwatched), options)["status"], "completed") << "the gate alone passes it";
  // A right variant: two of five measured steps checked (forward and both gradients), the training unchanged
  // by them.
  nlohmann::json six = BevTrial("right_copy");
  six["task"]["steps"] = 6;
  const nlohmann::json checked = RunTrial(ParseTrialSpec(six), options);
  ASSERT_EQ(checked["status"], "completed") << checked.dump();
  ASSERT_EQ(checked["spot_checks"].size(), 2u);
  for (const nlohmann::json& c : checked["spot_checks"]) {
    EXPECT_TRUE(c["passed"].get<bool>()) << c;
    EXPECT_EQ(c["variant"], "right_copy");
    EXPECT_GE(c["step"].get<int>(), 1);  // after the warm-up step
    EXPECT_GT(c["worst_rel_error"].get<double>(), 0) << "fused's summation order differs from naive's";
  }
  EXPECT_EQ(checked["step_time_ms"]["n"], 3) << "the checked steps are kept out of the step statistics";
  nlohmann::json off = six;
  off["runtime"]["spot_checks"] = 0;
  const nlohmann::json unchecked = RunTrial(ParseTrialSpec(off), options);
  ASSERT_EQ(unchecked["status"], "completed") << unchecked.dump();
  EXPECT_FALSE(unchecked.contains("spot_checks"));
  EXPECT_EQ(unchecked["step_time_ms"]["n"], 5);
  // At most half the measured steps are checked: the 4-step trial's 3 measured steps get one check.
  nlohmann::json many = BevTrial("right_copy");
  many["runtime"]["spot_checks"] = 64;
  const nlohmann::json capped = RunTrial(ParseTrialSpec(many), options);
  ASSERT_EQ(capped["status"], "completed") << capped.dump();
  EXPECT_EQ(capped["spot_checks"].size(), 1u);
  EXPECT_EQ(capped["step_time_ms"]["n"], 2);
  EXPECT_EQ(checked["final_train_loss"], unchecked["final_train_loss"]);
  // Their copies and float64 reference are outside the peak (1.88 MB against 1.28 MB when they were not).
  EXPECT_EQ(checked["peak_memory_mb"], unchecked["peak_memory_mb"]);
  EXPECT_EQ(checked["val_loss"], unchecked["val_loss"]);
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

// BevTrial with mhsa attention (2 heads) after its encoder's block, run with
// the attention kernel `kernel`: 32x32 = 1024 tokens of 8 channels.
nlohmann::json BevAttentionTrial(const std::string& kernel) {
  nlohmann::json j = BevTrial("naive");
  j["arch"]["bev"]["encoder"][0]["attention"] = {{"kind", "mhsa"}, {"heads", 2}};
  j["arch"]["ops"] = {{"attention_kernel", kernel}};
  return j;
}

TEST(TrialGateTest, MhsaWithTheChunkedKernelTrainsAsWithTheNaiveOne) {
  TrialOptions options;
  const nlohmann::json naive = RunTrial(ParseTrialSpec(BevAttentionTrial("naive")), options);
  const nlohmann::json chunked = RunTrial(ParseTrialSpec(BevAttentionTrial("chunked")), options);
  ASSERT_EQ(naive["status"], "completed") << naive.dump();
  ASSERT_EQ(chunked["status"], "completed") << chunked.dump();
  EXPECT_FALSE(naive.contains("correctness"));  // only reference variants
  EXPECT_TRUE(chunked["correctness"]["passed"].get<bool>());
  EXPECT_EQ(chunked["correctness"]["variants"][0]["op"], "attention_kernel");
  EXPECT_EQ(chunked["op"]["variant"], "chunked");
  EXPECT_GT(chunked["op"]["speedup"].get<double>(), 0);
  // The same model FLOPs: chunked computes naive's two matmuls block by block.
  EXPECT_EQ(chunked["flops"]["train_per_step"], naive["flops"]["train_per_step"]);
  EXPECT_TRUE(chunked["flops"]["forward_by_op"].contains("frontier::op::attention_kernel"))
      << chunked["flops"].dump();
  // Four steps from the same seed: the losses agree up to float rounding.
  const double a = naive["final_train_loss"].get<double>(), b = chunked["final_train_loss"].get<double>();
  EXPECT_NEAR(a, b, 1e-4 * std::abs(a)) << a << " vs " << b;
  const double va = naive["val_loss"].get<double>(), vb = chunked["val_loss"].get<double>();
  EXPECT_NEAR(va, vb, 1e-4 * std::abs(va)) << va << " vs " << vb;
  // A wrong kernel fails the trial as incorrect, never trained.
  const nlohmann::json wrong = RunTrial(ParseTrialSpec(BevAttentionTrial("wrong_grad")), options);
  EXPECT_EQ(wrong["status"], "failed");
  EXPECT_EQ(wrong["error_kind"], "incorrect");
  EXPECT_NE(wrong["error"].get<std::string>().find("attention_kernel variant 'wrong_grad'"),
            std::string::npos)
      << wrong["error"];
  EXPECT_EQ(wrong.value("steps_run", -1), 0);
}

// A variant that recomputes (the reference twice) and one that works on another thread (which the
// dispatcher's observers of this thread never see): each is charged the op's own formula, as the
// reference and the chunked kernel are, 2 * B*h * L*S * (d + dv) (the kernel takes dv = d).
torch::Tensor RecomputingAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  attention::NaiveAttention(q, k, v);
  return attention::NaiveAttention(q, k, v);
}
torch::Tensor OtherThreadAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  torch::Tensor out;
  std::thread worker([&] { out = attention::NaiveAttention(q, k, v); });
  worker.join();
  return out;
}

TEST(FlopCounterTest, EveryVariantOfAnOpIsChargedTheOpsOwnFormula) {
  static const bool registered = [] {
    attention::KernelRegistry().Add("flops_recomputes", RecomputingAttention);
    attention::KernelRegistry().Add("flops_other_thread", OtherThreadAttention);
    return true;
  }();
  (void)registered;
  const torch::Tensor q = torch::randn({2, 3, 10, 8}), k = torch::randn({2, 3, 12, 8}), v = torch::randn({2, 3, 12, 8});
  const int64_t formula = 2 * (2 * 3) * 10 * 12 * (8 + 8);
  for (const char* variant : {"naive", "chunked", "flops_recomputes", "flops_other_thread"}) {
    torch::NoGradGuard no_grad;
    FlopCounter counter;
    attention::Attend(variant, q, k, v);
    EXPECT_EQ(counter.total(), formula) << variant;
    EXPECT_EQ(counter.by_op(), (std::map<std::string, int64_t>{{"frontier::op::attention_kernel", formula}}))
        << variant;
  }
}

TEST(MedianIntervalTest, ReportsTheCoverageItAchievesNotANominalOne) {
  // Order statistics of the median: [x_1, x_n] at 3, 5 and 7 rounds, [x_4, x_12] at 15; the coverage is
  // P(lo < B <= hi), B ~ Binomial(n, 1/2): 6/8, 30/32, 126/128, 31616/32768.
  const struct {
    std::vector<double> ratios;
    double low, high, coverage;
  } cases[] = {{{3, 1, 2}, 1, 3, 0.75},
               {{5, 4, 3, 2, 1}, 1, 5, 0.9375},
               {{1, 2, 3, 4, 5, 6, 7}, 1, 7, 0.984375},
               {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, 4, 12, 0.96484375}};
  for (const auto& c : cases) {
    const nlohmann::json interval = MedianInterval(c.ratios);
    SCOPED_TRACE(interval.dump());
    EXPECT_EQ(interval["low"].get<double>(), c.low);
    EXPECT_EQ(interval["high"].get<double>(), c.high);
    EXPECT_NEAR(interval["coverage"].get<double>(), c.coverage, 1e-12);
    EXPECT_EQ(interval["rounds"], c.ratios.size());
  }
}

TEST(OpBenchTest, TimesTheAttentionKernelsAtTheModelsShapes) {
  OpBenchOptions options;
  options.rounds = 3;
  options.warmup = 1;
  const nlohmann::json r = RunOpBench(ParseTrialSpec(BevAttentionTrial("naive")), options);
  const nlohmann::json* attention_op = nullptr;
  for (const nlohmann::json& op : r["ops"]) {
    if (op["op"] == "attention_kernel") attention_op = &op;
  }
  ASSERT_NE(attention_op, nullptr) << r.dump();
  EXPECT_EQ((*attention_op)["shapes"],
            "q (2, 2, 1024, 4) fp32, k (2, 2, 1024, 4) fp32, v (2, 2, 1024, 4) fp32");
  std::map<std::string, nlohmann::json> by_name;
  for (const nlohmann::json& v : (*attention_op)["variants"]) by_name[v["variant"]] = v;
  for (const std::string right : {"naive", "chunked", "right_copy"}) {
    ASSERT_TRUE(by_name.count(right)) << right;
    EXPECT_TRUE(by_name[right]["correct"].get<bool>()) << right << ": " << by_name[right].dump();
    EXPECT_EQ(by_name[right]["forward_backward_ms"]["n"], 3) << right;
    EXPECT_GT(by_name[right]["speedup"]["median"].get<double>(), 0) << right;
    EXPECT_GT(by_name[right]["bytes_moved_mb"].get<double>(), 0) << right;
    EXPECT_GT(by_name[right]["peak_mb"].get<double>(), 0) << right;
  }
  // The chunked kernel never holds the (1024 x 1024) scores of a head: 8 MiB
  // in fp32 for the 4 (sample, head) pairs, forward alone.
  EXPECT_LT(by_name["chunked"]["peak_mb"].get<double>(), by_name["naive"]["peak_mb"].get<double>());
  for (const std::string wrong : {"scaled", "wrong_grad", "cached"}) {
    ASSERT_TRUE(by_name.count(wrong)) << wrong;
    EXPECT_FALSE(by_name[wrong]["correct"].get<bool>()) << wrong;
    EXPECT_FALSE(by_name[wrong].contains("forward_backward_ms")) << wrong << " was timed";
  }
}

// A command trial's spec: its op_calls are built from their shapes, as the kernel lab judges at them.
TEST(OpBenchTest, ACommandTrialsOpCallsAreBuiltFromTheirShapes) {
  nlohmann::json j = nlohmann::json::parse(R"({"schema": 1, "protocol": 1, "seed": 1, "params": {}, "task": {"steps": 20},
      "runtime": {"threads": 1, "precision": "bf16"}, "command": {"argv": ["/bin/true"]},
      "op_calls": [{"op": "attention_kernel", "shapes": [[2, 4, 9, 8], [2, 4, 11, 8], [2, 4, 11, 8]]}]})");
  const SpecOpCalls recorded = RecordSpecOpCalls(ParseTrialSpec(j));
  ASSERT_EQ(recorded.calls.size(), 1u);
  const ops::OpCall& call = recorded.calls[0];
  EXPECT_EQ(call.op, "attention_kernel");
  EXPECT_EQ(call.inputs[1].sizes(), torch::IntArrayRef({2, 4, 11, 8}));
  EXPECT_EQ(call.inputs[0].scalar_type(), torch::kBFloat16);
  ASSERT_TRUE(call.edge_cases);
  EXPECT_FALSE(call.edge_cases().empty()) << "the gate's edge cases at these shapes";

  j["op_calls"][0]["shapes"][2] = {2, 4, 11, 16};
  EXPECT_THROW(RecordSpecOpCalls(ParseTrialSpec(j)), c10::Error);  // k and v differ
  j["op_calls"][0] = {{"op", "bev_pool"}, {"shapes", {{1, 2, 3}, {1, 2, 3}}}};
  try {
    RecordSpecOpCalls(ParseTrialSpec(j));
    ADD_FAILURE() << "bev_pool from shapes alone";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bev_pool's calls need a frontier-trial model"), std::string::npos)
        << e.what();
  }
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
    EXPECT_TRUE(by_name[right]["correct"].get<bool>()) << right << ": " << by_name[right].dump();
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
