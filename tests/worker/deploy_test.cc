// Onboard inference (worker/trial/model/deploy.h, worker/trial/deploy.h):
// known answers for the folded float layer and the int8 layer, latency
// against a sleep of known length, refusals that name the problem.
#include "worker/trial/model/deploy.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <thread>
#include <vector>

#include "search_spaces/trial_spec.h"
#include "worker/trial/deploy.h"
#include "worker/trial/measure/latency.h"

namespace frontier::model {
namespace {

// A conv-BN-ReLU layer in eval mode with running statistics and affine
// parameters far from their initial values, and output channels whose
// weights differ 100-fold in size (per-tensor weights would lose the small
// ones).
ConvNormAct TrainedLayer() {
  torch::manual_seed(7);
  LayerStyle style;  // batch norm, relu
  ConvNormAct layer(style, 3, 4, 3, 1, 1, /*act=*/true);
  torch::NoGradGuard no_grad;
  torch::nn::Conv2dImpl& conv = *layer->conv();
  conv.weight.copy_(torch::randn_like(conv.weight) * torch::tensor({1.0, 0.01, 0.3, 2.0}).view({4, 1, 1, 1}));
  torch::nn::BatchNorm2dImpl& bn = *layer->norm()->batch();
  bn.running_mean.copy_(torch::tensor({0.2, -0.01, 0.5, -1.0}));
  bn.running_var.copy_(torch::tensor({1.5, 0.0004, 0.3, 4.0}));
  bn.weight.copy_(torch::tensor({1.2, 0.8, -0.5, 1.0}));
  bn.bias.copy_(torch::tensor({0.1, 0.3, -0.2, 0.5}));
  layer->eval();
  return layer;
}

TEST(DeployTest, FoldedFloatLayerComputesTheEvalLayer) {
  ConvNormAct layer = TrainedLayer();
  const torch::Tensor x = torch::randn({2, 3, 9, 9});
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = layer->forward(x);
  const DeployedLayers deployed = DeployFloat(*layer);
  const torch::Tensor folded = layer->forward(x);
  EXPECT_LT((folded - expected).abs().max().item<double>(), 1e-5);
  // conv weight and bias only: the batch norm's parameters and statistics are folded away
  EXPECT_EQ(deployed.size_bytes, (4 * 3 * 3 * 3 + 4) * 4);
  Undeploy(*layer);
  EXPECT_TRUE(torch::equal(layer->forward(x), expected));
}

// The int8 layer against the same arithmetic done by hand: input and output
// quantized with the observed ranges, weights per channel, the conv on the
// dequantized values in double.
TEST(DeployTest, Int8LayerMatchesAHandQuantizedReference) {
  const torch::Tensor x = torch::randn({2, 3, 9, 9}, torch::kDouble).to(torch::kFloat) * 1.5 + 0.3;
  for (const std::string& engine : QuantizedEngines()) {
    SCOPED_TRACE(engine);
    ConvNormAct layer = TrainedLayer();
    torch::NoGradGuard no_grad;
    // The fold, by hand, in double.
    torch::nn::BatchNorm2dImpl& bn = *layer->norm()->batch();
    const torch::Tensor factor =
        (bn.weight.to(torch::kDouble) / torch::sqrt(bn.running_var.to(torch::kDouble) + bn.options.eps()));
    const torch::Tensor w = layer->conv()->weight.to(torch::kDouble) * factor.view({-1, 1, 1, 1});
    const torch::Tensor b = -bn.running_mean.to(torch::kDouble) * factor + bn.bias.to(torch::kDouble);
    const torch::Tensor xd = x.to(torch::kDouble);
    auto affine = [](const torch::Tensor& t) {
      const double lo = std::min(0.0, t.min().item<double>()), hi = std::max(0.0, t.max().item<double>());
      const double scale = (hi - lo) / 255;
      return std::pair{scale, std::clamp<double>(std::nearbyint(-lo / scale), 0, 255)};
    };
    const auto [s_in, z_in] = affine(xd);
    const torch::Tensor x_dq = (torch::clamp(torch::round(xd / s_in) + z_in, 0, 255) - z_in) * s_in;
    const torch::Tensor s_w = std::get<0>(w.abs().flatten(1).max(1)) / 127;
    const torch::Tensor w_dq = torch::clamp(torch::round(w / s_w.view({-1, 1, 1, 1})), -128, 127) * s_w.view({-1, 1, 1, 1});
    const auto [s_out, z_out] = affine(torch::relu(torch::conv2d(xd, w, b, 1, 1)));
    const torch::Tensor acc = torch::relu(torch::conv2d(x_dq, w_dq, b, 1, 1));
    const torch::Tensor reference = (torch::clamp(torch::round(acc / s_out) + z_out, 0, 255) - z_out) * s_out;

    const DeployedLayers deployed = DeployInt8(*layer, engine, [&] { layer->forward(x); });
    EXPECT_EQ(deployed.engine, engine);
    EXPECT_EQ(deployed.quantized, 1);
    EXPECT_EQ(deployed.quantized_flops_per_sample, 2 * 4 * 9 * 9 * 3 * 3 * 3);
    const torch::Tensor y = layer->forward(x).to(torch::kDouble);
    ASSERT_EQ(y.sizes(), reference.sizes());
    // The engine rounds its int32 bias and requantization its own way: at most one output step apart,
    // and nearly everywhere the same value.
    EXPECT_LE((y - reference).abs().max().item<double>(), s_out * 1.001);
    EXPECT_GE((y - reference).abs().lt(s_out * 0.5).to(torch::kDouble).mean().item<double>(), 0.95);
    // Every channel is reproduced, the small one too (per-channel weights): its outputs are not all zero.
    EXPECT_GT(y.select(1, 1).abs().max().item<double>(), 0);
    EXPECT_LT((y.select(1, 1) - reference.select(1, 1)).abs().max().item<double>(), s_out * 1.001);
    // int8 weights (1 byte each) with a scale and zero point per channel, against 4 bytes per fp32 weight.
    EXPECT_EQ(deployed.size_bytes, 4 * 3 * 3 * 3 + 8 * 4 + 4 * 4 + 32);
  }
}

TEST(DeployTest, Int8NamesTheLayersThatStayFloat) {
  torch::manual_seed(1);
  torch::nn::Sequential net;
  net->push_back(ConvNormAct(LayerStyle{}, 1, 4, 3, 1, 1, true));
  net->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 4, 1)));
  net->push_back(torch::nn::Flatten());
  net->push_back(torch::nn::Linear(4 * 5 * 5, 3));
  net->eval();
  const torch::Tensor x = torch::randn({2, 1, 5, 5});
  const DeployedLayers d = DeployInt8(*net, "", [&] { net->forward(x); });
  ASSERT_EQ(d.float_layers.size(), 2u);
  EXPECT_EQ(d.float_layers[0].first, "1");
  EXPECT_NE(d.float_layers[0].second.find("conv"), std::string::npos);
  EXPECT_EQ(d.float_layers[1].first, "3");
  EXPECT_NE(d.float_layers[1].second.find("linear"), std::string::npos);
  EXPECT_EQ(net->forward(x).sizes(), (std::vector<int64_t>{2, 3}));
}

// Two int8 layers in a row: the first hands the second its quantized output (no dequantize and quantize
// between them), the second gives floats; together within a few output steps of the float layers.
TEST(DeployTest, Int8LayersInARowStayQuantizedBetweenThem) {
  torch::manual_seed(3);
  torch::nn::Sequential net;
  net->push_back(ConvNormAct(LayerStyle{}, 3, 8, 3, 1, 1, true));
  net->push_back(ConvNormAct(LayerStyle{}, 8, 8, 3, 1, 1, false));
  net->eval();
  const torch::Tensor x = torch::randn({2, 3, 9, 9});
  torch::NoGradGuard no_grad;
  const torch::Tensor expected = net->forward(x);
  DeployInt8(*net, "", [&] { net->forward(x); });
  auto first = net->ptr<ConvNormActImpl>(0), second = net->ptr<ConvNormActImpl>(1);
  const torch::Tensor handed = first->forward(x);
  EXPECT_TRUE(handed.is_quantized());
  const torch::Tensor y = second->forward(handed);
  EXPECT_FALSE(y.is_quantized());
  EXPECT_TRUE(torch::equal(y, net->forward(x)));
  const double range = (expected.max() - expected.min()).item<double>();
  EXPECT_LT((y - expected).abs().max().item<double>(), 0.05 * range);
}

TEST(DeployTest, RefusesWhatTheBuildLacks) {
  ConvNormAct layer = TrainedLayer();
  try {
    DeployInt8(*layer, "fbgemm", [] {});
    FAIL() << "fbgemm accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("the quantized engine 'fbgemm' is not in this LibTorch build"),
              std::string::npos)
        << e.what();
  }
  // A layer no calibration input reached has no activation range.
  try {
    DeployInt8(*layer, "", [] {});
    FAIL() << "uncalibrated layer accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no calibration input reached"), std::string::npos) << e.what();
  }
  nlohmann::json spec = nlohmann::json::parse(R"({
    "schema": 1, "trial_id": "t", "seed": 1,
    "task": {"dataset": "synthetic", "input": {"channels": 1, "height": 16, "width": 16, "classes": 10},
             "batch_size": 32, "steps": 12},
    "arch": {"stem": {"kind": "conv3x3", "width": 8, "stride": 2},
             "stages": [{"block": "basic", "width": 16, "depth": 1, "stride": 2}]},
    "deploy": {"formats": ["float", "tensorrt"]}
  })");
  try {
    ParseTrialSpec(spec);
    FAIL() << "tensorrt accepted";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("deploy.formats: format \"tensorrt\" is not in this build"), std::string::npos)
        << e.what();
  }
  spec["deploy"] = {{"formats", {"int8"}}, {"batch", {1, 8}}, {"threads", {1, 1}}};
  EXPECT_THROW(ParseTrialSpec(spec), SpecError);  // a thread count listed twice
  spec["deploy"] = {{"formats", {"int8"}}, {"batch", {1, 8}}, {"engine", "fbgemm"}};
  EXPECT_THROW(ParseTrialSpec(spec), SpecError);
  spec["deploy"] = {{"formats", {"int8"}}, {"batch", {1, 8}}, {"engine", "qnnpack"}};
  const TrialSpec parsed = ParseTrialSpec(spec);
  EXPECT_TRUE(parsed.deploy.enabled);
  EXPECT_EQ(parsed.deploy.batch, (std::vector<int>{1, 8}));
  EXPECT_EQ(ParseTrialSpec(ToJson(parsed)).deploy.engine, "qnnpack");
}

// A network whose C++ control flow reads its input: a trace bakes in the branch it took.
class BranchingNetImpl : public NetworkImpl {
 public:
  torch::Tensor forward(const torch::Tensor& x) override {
    const bool left_bright = x.select(-1, 0).sum().item<double>() > 0;
    return (left_bright ? x * 2 : x * 3).flatten(1).sum(1, /*keepdim=*/true);
  }
};

DeployHooks FakeHooks() {
  DeployHooks hooks;
  hooks.quality_metric = "val_accuracy";
  hooks.input = [](int batch) {
    torch::Tensor x = torch::ones({batch, 1, 4, 4});
    x.select(-1, 3).fill_(-5);  // left column bright, right column dark: mirrored, the other branch
    return x;
  };
  hooks.calibrate = [] {};
  hooks.quality = [input = hooks.input](NetworkImpl& network) { return network.forward(input(2)).mean().item<double>(); };
  hooks.synchronize = [] {};
  return hooks;
}

// One conv and a sum: traces to the same computation, so every format of it can be measured.
struct PlainConvNetImpl : NetworkImpl {
  torch::nn::Conv2d conv{torch::nn::Conv2dOptions(1, 2, 3)};
  PlainConvNetImpl() { register_module("conv", conv); }
  torch::Tensor forward(const torch::Tensor& x) override { return conv(x).flatten(1).sum(1, true); }
};

// TorchScript: a network that traces to the same computation runs as its graph (same outputs); one whose
// forward branches on its input is refused with the reason, and the other formats are still measured.
TEST(DeployTest, TorchScriptRefusesAForwardThatBranchesOnItsInput) {
  DeploySpec spec;
  spec.enabled = true;
  spec.formats = {"float", "torchscript"};
  spec.repetitions = 3;
  spec.warmup = 0;
  auto branching = std::make_shared<BranchingNetImpl>();
  nlohmann::json d = MeasureDeploy(*branching, spec, FakeHooks());
  EXPECT_FALSE(d["float"].contains("error")) << d.dump();
  ASSERT_TRUE(d["torchscript"].contains("error")) << d.dump();
  EXPECT_NE(d["torchscript"]["error"].get<std::string>().find("reads its input outside the ops a trace records"),
            std::string::npos);

  torch::manual_seed(2);
  auto net = std::make_shared<PlainConvNetImpl>();
  const DeployHooks hooks = FakeHooks();
  d = MeasureDeploy(*net, spec, hooks);
  ASSERT_FALSE(d["torchscript"].contains("error")) << d.dump();
  EXPECT_NEAR(d["torchscript"]["val_accuracy"].get<double>(), d["float"]["val_accuracy"].get<double>(), 1e-5);
  EXPECT_TRUE(net->conv->weight.requires_grad());  // given back as it was
}

// The formats in the reverse order (the trial's even seeds): the same figures, the order said.
TEST(DeployTest, FormatsTimedInReverseGiveTheSameFiguresAndSaySo) {
  DeploySpec spec;
  spec.enabled = true;
  spec.formats = {"float", "torchscript"};
  spec.repetitions = 2;
  spec.warmup = 0;
  torch::manual_seed(3);
  auto net = std::make_shared<PlainConvNetImpl>();
  DeployHooks hooks = FakeHooks();
  const nlohmann::json forward = MeasureDeploy(*net, spec, hooks);
  hooks.reverse_order = true;
  const nlohmann::json reverse = MeasureDeploy(*net, spec, hooks);
  EXPECT_EQ(forward["timed_order"], nlohmann::json({"float", "torchscript"}));
  EXPECT_EQ(reverse["timed_order"], nlohmann::json({"torchscript", "float"}));
  for (const char* format : {"float", "torchscript"}) {
    ASSERT_FALSE(reverse[format].contains("error")) << reverse.dump();
    EXPECT_EQ(reverse[format]["val_accuracy"], forward[format]["val_accuracy"]) << format;
    EXPECT_EQ(reverse[format]["size_bytes"], forward[format]["size_bytes"]) << format;
  }
}

// The timing deploy uses, against passes that sleep a known time: the median
// is the sleep (not less; the warm-up passes, ten times longer, are not in it).
TEST(DeployTest, LatencyOfASleepOfKnownLength) {
  int calls = 0;
  LatencyPlan plan;
  plan.warmup = 3;
  plan.repetitions = 30;
  const SeriesStats s = TimeRepeatedly(
      [&] { std::this_thread::sleep_for(std::chrono::milliseconds(++calls <= 3 ? 40 : 4)); }, plan);
  EXPECT_EQ(calls, 33);
  EXPECT_EQ(s.n, 30);
  EXPECT_GE(s.median, 0.004);
  EXPECT_LT(s.median, 0.030);  // a loaded machine oversleeps, but not past the warm-up's 40 ms
  EXPECT_GE(s.min, 0.004);  // no timed pass shorter than its sleep
  EXPECT_GE(s.p99, s.median);
}

// Passes already run (a final evaluation's) come first: the first `warmup` of
// them are the warm-up, and only the repetitions they leave are run and timed.
TEST(DeployTest, LatencyRunsOnlyThePassesEarlierOnesLeave) {
  LatencyPlan plan;
  plan.warmup = 2;
  plan.repetitions = 10;
  int calls = 0;
  const auto pass = [&] { ++calls; };
  // 2 warm-up passes (9 s, never in the figures) and 4 timed ones (0.5 s): 6 more passes, all fast.
  SeriesStats s = TimeRepeatedly(pass, plan, {9, 9, 0.5, 0.5, 0.5, 0.5});
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(s.n, 10);
  EXPECT_EQ(s.max, 0.5);
  EXPECT_LT(s.min, 0.5);
  EXPECT_EQ(TimedFromEarlier(plan, 6), 4u);

  // More than enough: the first 10 after the warm-up, no pass of its own (the 7 s pass is the 13th).
  calls = 0;
  std::vector<double> many(14, 0.25);
  many[0] = many[1] = 9;
  many[12] = 7;
  s = TimeRepeatedly(pass, plan, many);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(s.n, 10);
  EXPECT_EQ(s.max, 0.25);
  EXPECT_EQ(TimedFromEarlier(plan, 14), 10u);

  // Fewer than the warm-up: the rest of the warm-up, then every repetition.
  calls = 0;
  s = TimeRepeatedly(pass, plan, {9});
  EXPECT_EQ(calls, 11);
  EXPECT_EQ(s.n, 10);
  EXPECT_LT(s.max, 9);
  EXPECT_EQ(TimedFromEarlier(plan, 2), 0u);

  // The budget: 30 earlier timed passes that spent 6 s (over 5 s) are enough for a slow model.
  calls = 0;
  plan.repetitions = 100;
  std::vector<double> slow(32, 0.2);
  s = TimeRepeatedly(pass, plan, slow);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(s.n, kMinLatencyRepetitions);

  // What was timed, of an evaluation of 4 validation passes then test passes (warm-up 2, 10 wanted).
  plan.repetitions = 10;
  const std::string evaluation = "the final evaluation's passes ";
  EXPECT_EQ(EvaluationPassesInput(plan, 14, 4, 10), evaluation + "(validation, then test images)");
  EXPECT_EQ(EvaluationPassesInput(plan, 6, 6, 10),
            evaluation + "(validation images), then repeated training images");
  EXPECT_EQ(EvaluationPassesInput(plan, 14, 2, 10), evaluation + "(test images)");
  EXPECT_EQ(EvaluationPassesInput(plan, 2, 2, 10), "repeated training images");
}

}  // namespace
}  // namespace frontier::model
