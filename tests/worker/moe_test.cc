// The moe block family (worker/trial/model/moe.h): shapes, top-k routing and
// capacity drops, the load-balancing loss against a hand computation,
// gradients, FLOPs against hand counts (with and without dropped tokens), the
// spec's validation and a trial that trains with it.
#include "worker/trial/model/moe.h"

#include <cmath>

#include <gtest/gtest.h>

#include "search_spaces/search_space.h"
#include "worker/trial/measure/flop_counter.h"
#include "worker/trial/trainer.h"

namespace frontier {
namespace {

using nlohmann::json;
using model::LayerStyle;

MoeSpec Moe(int experts, int top_k, double capacity_factor, double aux_loss_weight = 0.01) {
  MoeSpec m;
  m.experts = experts;
  m.top_k = top_k;
  m.capacity_factor = capacity_factor;
  m.aux_loss_weight = aux_loss_weight;
  return m;
}

model::BlockConfig MoeConfig(int in, int out, int stride, double expansion, const MoeSpec& moe) {
  model::BlockConfig c;
  c.family = "moe";
  c.in = in;
  c.out = out;
  c.stride = stride;
  c.expansion = expansion;
  c.moe = moe;
  return c;
}

// The MoeMlp inside a module (its only one).
model::MoeMlpImpl& MoeIn(torch::nn::Module& m) {
  for (const auto& sub : m.modules()) {
    if (auto* moe = dynamic_cast<model::MoeMlpImpl*>(sub.get())) return *moe;
  }
  throw std::logic_error("no moe layer");
}

// Router logits = bias only: every token ranks the experts by `bias`.
void RouteAllBy(model::MoeMlpImpl& moe, const std::vector<float>& bias) {
  torch::NoGradGuard no_grad;
  moe.router->weight.zero_();
  moe.router->bias.copy_(torch::tensor(bias));
}

TEST(MoeTest, BlockShapesAndStrideProjection) {
  model::ConvBlock same(LayerStyle{}, MoeConfig(8, 8, 1, 2, Moe(4, 2, 1.25)));
  EXPECT_EQ(same->forward(torch::randn({2, 8, 4, 4})).sizes(), (std::vector<int64_t>{2, 8, 4, 4}));
  model::ConvBlock down(LayerStyle{}, MoeConfig(8, 16, 2, 2, Moe(4, 1, 1.25)));
  EXPECT_EQ(down->forward(torch::randn({2, 8, 5, 5})).sizes(), (std::vector<int64_t>{2, 16, 3, 3}));
  model::MoeMlp moe(Moe(4, 2, 1.0), 8, 16, "layer", "gelu");
  EXPECT_EQ(moe->w1.sizes(), (std::vector<int64_t>{4, 8, 16}));  // experts as one grouped weight
  EXPECT_EQ(moe->w2.sizes(), (std::vector<int64_t>{4, 16, 8}));
}

TEST(MoeTest, TopKChoosesTheBestExpertsWithGatesThatSumToOne) {
  model::MoeMlp moe(Moe(4, 2, 4.0), 8, 16, "none", "relu");  // capacity for every assignment
  const torch::Tensor tokens = torch::randn({10, 8});
  moe->Route(tokens);
  const model::MoeRouting& r = moe->last_routing();
  ASSERT_EQ(r.expert.sizes(), (std::vector<int64_t>{10, 2}));
  const torch::Tensor probs = torch::softmax(moe->router(tokens), -1);
  const torch::Tensor best = std::get<1>(probs.topk(2, -1));
  EXPECT_TRUE(torch::equal(r.expert, best));
  EXPECT_TRUE(r.expert.select(1, 0).ne(r.expert.select(1, 1)).all().item<bool>());
  EXPECT_TRUE(torch::allclose(r.gate.sum(-1), torch::ones({10})));
  EXPECT_EQ(r.kept, 20);  // capacity ceil(4 * 10 * 2 / 4) = 20 slots per expert: nothing dropped
  EXPECT_TRUE(r.assigned.all().item<bool>());
}

TEST(MoeTest, CapacityDropsTokensInPriorityOrderAndTheyPassThroughTheResidual) {
  // 16 tokens (1 x 4 x 4), 4 experts, top-2, capacity factor 1: ceil(1 * 16 * 2 / 4) = 8 slots.
  model::ConvBlock block(LayerStyle{"none"}, MoeConfig(8, 8, 1, 2, Moe(4, 2, 1.0)));
  model::MoeMlpImpl& moe = MoeIn(*block);
  RouteAllBy(moe, {3, 2, 1, 0});  // every token: first choice expert 0, second expert 1
  const torch::Tensor x = torch::randn({1, 8, 4, 4});
  const torch::Tensor y = block->forward(x);
  const model::MoeRouting& r = moe.last_routing();
  EXPECT_EQ(r.capacity, 8);
  EXPECT_EQ(r.kept, 16);  // 8 first choices to expert 0, then 8 second choices to expert 1
  for (int64_t t = 0; t < 16; ++t) {
    EXPECT_EQ(r.expert[t][0].item<int64_t>(), 0);
    EXPECT_EQ(r.expert[t][1].item<int64_t>(), 1);
    // First choices before second choices, tokens in order: tokens 0-7 keep both, 8-15 none.
    EXPECT_EQ(r.assigned[t][0].item<bool>(), t < 8) << t;
    EXPECT_EQ(r.assigned[t][1].item<bool>(), t < 8) << t;
  }
  // Token t is position (t / 4, t % 4): the dropped ones leave the block unchanged, the others do not.
  const torch::Tensor flat_x = x.flatten(2), flat_y = y.flatten(2);
  EXPECT_TRUE(torch::equal(flat_y.narrow(2, 8, 8), flat_x.narrow(2, 8, 8)));
  EXPECT_GT((flat_y.narrow(2, 0, 8) - flat_x.narrow(2, 0, 8)).abs().min().item<double>(), 0);
}

TEST(MoeTest, AuxLossEqualsTheHandComputation) {
  // Identity router, no norm: the logits are the tokens. 4 tokens of 2 channels, 2 experts, top-1.
  model::MoeMlp moe(Moe(2, 1, 2.0, 0.5), 2, 4, "none", "relu");
  {
    torch::NoGradGuard no_grad;
    moe->router->weight.copy_(torch::eye(2));
    moe->router->bias.zero_();
  }
  const torch::Tensor tokens = torch::tensor({{1.0f, 0.0f}, {0.0f, 1.0f}, {2.0f, 0.0f}, {3.0f, 1.0f}});
  moe->train();
  moe->Route(tokens);
  // p(expert 0) = sigmoid(l0 - l1): sigmoid(1), sigmoid(-1), sigmoid(2), sigmoid(2); top-1 picks 0, 1, 0, 0.
  auto sigmoid = [](double a) { return 1 / (1 + std::exp(-a)); };
  const double p0 = (sigmoid(1) + sigmoid(-1) + sigmoid(2) + sigmoid(2)) / 4, p1 = 1 - p0;
  const double f0 = 3.0 / 4, f1 = 1.0 / 4;
  const double expected = 0.5 * 2 * (f0 * p0 + f1 * p1);  // weight * experts * sum f_e P_e
  const torch::Tensor aux = moe->TakeAuxLoss();
  ASSERT_TRUE(aux.defined());
  EXPECT_NEAR(aux.item<double>(), expected, 1e-6);
  EXPECT_FALSE(moe->TakeAuxLoss().defined());  // taken once
  moe->eval();
  moe->Route(tokens);
  EXPECT_FALSE(moe->TakeAuxLoss().defined());  // evaluation stores none
}

TEST(MoeTest, NetworkAuxLossSumsItsLayers) {
  TrialSpec spec;
  spec.task.dataset = "synthetic";
  spec.task.input = InputShape{3, 8, 8, 10};
  spec.arch.stem = StemSpec{"conv3x3", 8, 2, 1};
  StageSpec stage;
  stage.block = "moe";
  stage.width = 8;
  stage.depth = 2;
  spec.arch.stages = {stage};
  model::Classifier net(ResolveArch(spec.arch, InputShapeOf(spec.task)));
  net->forward(torch::randn({2, 3, 8, 8}));
  double sum = 0;
  int layers = 0;
  for (const auto& m : net->modules()) {
    if (auto* moe = dynamic_cast<model::MoeMlpImpl*>(m.get())) {
      torch::Tensor one = moe->TakeAuxLoss();
      ASSERT_TRUE(one.defined());
      sum += one.item<double>();
      ++layers;
    }
  }
  EXPECT_EQ(layers, 2);
  net->forward(torch::randn({2, 3, 8, 8}));  // again, and this time taken for the whole network
  const torch::Tensor total = model::TakeAuxiliaryLoss(*net);
  ASSERT_TRUE(total.defined());
  EXPECT_GT(total.item<double>(), 0);
  EXPECT_FALSE(model::TakeAuxiliaryLoss(*net).defined());
  EXPECT_GT(sum, 0);
}

TEST(MoeTest, GradientsReachTheRouterAndEveryExpertThatRan) {
  model::ConvBlock block(LayerStyle{}, MoeConfig(8, 8, 1, 2, Moe(4, 2, 2.0, 0.01)));
  model::MoeMlpImpl& moe = MoeIn(*block);
  block->train();
  const torch::Tensor y = block->forward(torch::randn({2, 8, 4, 4}));
  (y.square().mean() + moe.TakeAuxLoss()).backward();
  ASSERT_TRUE(moe.router->weight.grad().defined());
  EXPECT_GT(moe.router->weight.grad().abs().sum().item<double>(), 0);
  const torch::Tensor ran = torch::bincount(moe.last_routing().expert.flatten(), {}, 4).gt(0);
  for (int64_t e = 0; e < 4; ++e) {
    if (!ran[e].item<bool>()) continue;
    EXPECT_GT(moe.w1.grad()[e].abs().sum().item<double>(), 0) << e;
    EXPECT_GT(moe.w2.grad()[e].abs().sum().item<double>(), 0) << e;
  }
  // Without the auxiliary loss the router still learns, through the gates.
  model::MoeMlp plain(Moe(4, 1, 2.0, 0), 8, 16, "layer", "relu");
  plain->train();
  plain->forward(torch::randn({2, 8, 4, 4})).square().mean().backward();
  EXPECT_FALSE(plain->TakeAuxLoss().defined());
  EXPECT_GT(plain->router->weight.grad().abs().sum().item<double>(), 0);
}

TEST(MoeTest, FlopsCountTheRouterAndTheAssignmentsThatRan) {
  // 2 x 4 x 4 = 32 tokens of C = 8, hidden H = 8 * 2 = 16, 4 experts, top-2.
  const int64_t tokens = 32, c = 8, h = 16, e = 4;
  {  // capacity factor 2: ceil(2 * 32 * 2 / 4) = 32 slots, every one of the 64 assignments kept
    model::ConvBlock block(LayerStyle{}, MoeConfig(8, 8, 1, 2, Moe(4, 2, 2.0)));
    const ModelFlops flops = CountModelFlops(block, torch::randn({2, 8, 4, 4}));
    ASSERT_EQ(MoeIn(*block).last_routing().kept, tokens * 2);
    EXPECT_EQ(flops.forward, 2 * tokens * c * e + 2 * (tokens * 2) * (c * h + h * c));
    EXPECT_EQ(flops.forward_by_op.at("frontier::moe_experts"), 2 * (tokens * 2) * (c * h + h * c));
  }
  {  // every token prefers experts 0 then 1; capacity factor 0.5: ceil(0.5 * 32 * 2 / 4) = 8 slots,
     // so 8 first choices (expert 0) and 8 second choices (expert 1) run, 48 assignments are dropped
    model::ConvBlock block(LayerStyle{}, MoeConfig(8, 8, 1, 2, Moe(4, 2, 0.5)));
    RouteAllBy(MoeIn(*block), {4, 3, 2, 1});
    const ModelFlops flops = CountModelFlops(block, torch::randn({2, 8, 4, 4}));
    EXPECT_EQ(MoeIn(*block).last_routing().capacity, 8);
    ASSERT_EQ(MoeIn(*block).last_routing().kept, 16);
    // The grouped matmuls computed 4 experts x 8 slots = 32 rows; 16 of them were tokens.
    EXPECT_EQ(flops.forward, 2 * tokens * c * e + 2 * 16 * (c * h + h * c));
  }
  {  // a stride-2 first block: 1x1/2 projection 8 -> 16 onto 2x2 (8 tokens), then the experts at C = 16
    model::ConvBlock block(LayerStyle{}, MoeConfig(8, 16, 2, 1, Moe(2, 1, 4.0)));
    const ModelFlops flops = CountModelFlops(block, torch::randn({2, 8, 4, 4}));
    ASSERT_EQ(MoeIn(*block).last_routing().kept, 8);
    EXPECT_EQ(flops.forward, 2 * 8 * 16 * 8 + 2 * 8 * 16 * 2 + 2 * 8 * (16 * 16 + 16 * 16));
  }
}

TEST(MoeTest, SpecValidatesTheMoeSection) {
  json j = {{"schema", 1},
            {"task", {{"dataset", "synthetic"}, {"input", {{"channels", 3}, {"height", 8}, {"width", 8}, {"classes", 4}}}}},
            {"arch",
             {{"stem", {{"kind", "conv3x3"}, {"width", 8}}},
              {"stages", {{{"block", "moe"}, {"width", 8}, {"moe", {{"experts", 4}, {"top_k", 2}}}}}}}}};
  const TrialSpec spec = ParseTrialSpec(j);
  EXPECT_EQ(spec.arch.stages[0].moe.experts, 4);
  EXPECT_EQ(spec.arch.stages[0].moe.top_k, 2);
  EXPECT_EQ(ToJson(spec)["arch"]["stages"][0]["moe"]["capacity_factor"], 1.25);
  EXPECT_EQ(ParseTrialSpec(ToJson(spec)).arch.stages[0].moe.top_k, 2);  // round trip
  auto error = [&](const std::function<void(json&)>& edit) {
    json bad = j;
    edit(bad);
    try {
      ParseTrialSpec(bad);
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error([](json& b) { b["arch"]["stages"][0]["moe"]["top_k"] = 5; }),
            "arch.stages[0].moe.top_k: routes each token to 5 experts but the stage has 4 (moe.experts)");
  EXPECT_EQ(error([](json& b) { b["arch"]["stages"][0]["moe"]["capacity_factor"] = 0; }),
            "arch.stages[0].moe.capacity_factor: must be in [0.01, 1024], got 0");
  EXPECT_EQ(error([](json& b) { b["arch"]["stages"][0]["moe"]["expert"] = 2; }),
            "arch.stages[0].moe.expert: unknown field");
  EXPECT_EQ(error([](json& b) { b["arch"]["stages"][0]["block"] = "moex"; }).rfind("arch.stages[0].block: unknown choice 'moex'", 0), 0u);
}

TEST(MoeTest, TheBlockIsASearchDimension) {
  const SearchSpace space = ParseSearchSpace(R"(
name: moe
task: {dataset: synthetic, input: {channels: 3, height: 8, width: 8, classes: 4}, steps: 4, warmup_steps: 1}
baseline:
  arch:
    stem: {kind: conv3x3, width: 8}
    stages:
      - {block: basic, width: 8, depth: 1}
      - {block: basic, width: 16, depth: 1, stride: 2, moe: {experts: 4, top_k: 2}}
space:
  stages[1].block: [basic, moe]
  stages[1].moe.capacity_factor: [1.0, 2.0]
objectives: [{metric: val_accuracy, goal: maximize}]
)", "moe.yaml");
  const std::vector<Config> grid = EnumerateGrid(space);
  ASSERT_EQ(grid.size(), 4u);
  int moe = 0;
  for (const Config& config : grid) {
    const TrialSpec spec = MakeTrialSpec(space, config, 1, "t");
    moe += spec.arch.stages[1].block == "moe";
  }
  EXPECT_EQ(moe, 2);
  EXPECT_THROW(ParseSearchSpace(R"(
name: moe
task: {dataset: synthetic, input: {channels: 3, height: 8, width: 8, classes: 4}, steps: 4, warmup_steps: 1}
baseline: {arch: {stem: {kind: conv3x3, width: 8}, stages: [{block: moe, width: 8, depth: 1}]}}
space: {stages[0].moe.top_k: [1, 8]}
objectives: [{metric: val_accuracy, goal: maximize}]
)", "bad.yaml"),
               std::exception);
}

// A whole trial: the auxiliary loss is part of the training loss (the step
// loss rises by weight x aux at the same initialization), and bf16 +
// channels_last trains.
TEST(MoeTest, TrialTrainsWithTheAuxLossInItsTrainingLoss) {
  auto run = [](double weight, const std::string& precision) {
    json j = json::parse(R"({
      "schema": 1, "trial_id": "t", "seed": 1,
      "task": {"dataset": "synthetic", "input": {"channels": 1, "height": 16, "width": 16, "classes": 10},
               "batch_size": 16, "steps": 6, "eval_every": 0, "warmup_steps": 1},
      "arch": {"stem": {"kind": "conv3x3", "width": 8, "stride": 2},
               "stages": [{"block": "moe", "width": 8, "depth": 1, "stride": 2,
                           "moe": {"experts": 4, "top_k": 2, "capacity_factor": 1.0}}]},
      "runtime": {"threads": 2}, "profile": {"steps": 0}, "latency": {"repetitions": 0}
    })");
    j["arch"]["stages"][0]["moe"]["aux_loss_weight"] = weight;
    j["runtime"]["precision"] = precision;
    if (precision == "bf16") j["runtime"]["memory_format"] = "channels_last";
    std::vector<double> losses;
    TrialOptions options;
    options.progress_every = 1;
    options.emit = [&](const json& e) {
      if (e["event"] == "progress") losses.push_back(e["loss"].get<double>());
    };
    json result = RunTrial(ParseTrialSpec(j), options);
    EXPECT_EQ(result["status"], "completed") << result.dump();
    // The counted forward's routing: 16 x 4 x 4 = 256 tokens x top-2, capacity ceil(256 * 2 / 4) = 128 slots
    // per expert; its experts' FLOPs are 2 x kept x 2 x C (8) x hidden (32).
    const json& moe = result["flops"]["moe"];
    EXPECT_EQ(moe["tokens"], 256);
    EXPECT_EQ(moe["assignments"], 512);
    EXPECT_EQ(moe["slots"], 4 * 128);
    EXPECT_EQ(moe["kept"].get<int64_t>() + moe["dropped"].get<int64_t>(), 512);
    EXPECT_EQ(result["flops"]["forward_by_op"].value("frontier::moe_experts", int64_t{0}),
              2 * moe["kept"].get<int64_t>() * 2 * 8 * 32);
    return losses;
  };
  const std::vector<double> without = run(0, "fp32"), with = run(10, "fp32");
  ASSERT_EQ(without.size(), 6u);
  ASSERT_EQ(with.size(), 6u);
  // Same initialization and first batch: the first step's losses differ by 10 x aux, aux >= ~1.
  EXPECT_GT(with[0] - without[0], 5.0);
  EXPECT_EQ(run(0.01, "bf16").size(), 6u);
}

}  // namespace
}  // namespace frontier
