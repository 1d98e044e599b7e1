// The multi-scale necks (worker/trial/model/neck.h): FPN and BiFPN output
// shapes and FLOPs against hand counts, fast normalized fusion, the spec's
// arch.bev.neck fields, and the BEV network training with each neck.
#include "worker/trial/model/neck.h"

#include <set>

#include <gtest/gtest.h>

#include "search_spaces/search_space.h"
#include "worker/trial/data/bev_scene.h"
#include "worker/trial/measure/flop_counter.h"
#include "worker/trial/tasks/bev_model.h"

namespace frontier {
namespace {

using nlohmann::json;
using model::LayerStyle;

// Batch 2; levels of 8, 16 and 32 channels at 8x8, 4x4 and 2x2 (finest first).
std::vector<torch::Tensor> Levels() {
  return {torch::randn({2, 8, 8, 8}), torch::randn({2, 16, 4, 4}), torch::randn({2, 32, 2, 2})};
}

struct NeckUnderTest : torch::nn::Module {  // CountModelFlops wants a module with forward(tensor)
  explicit NeckUnderTest(model::Neck n) : neck(register_module("neck", n)) {}
  torch::Tensor forward(const torch::Tensor&) { return neck->forward(levels); }
  model::Neck neck;
  std::vector<torch::Tensor> levels = Levels();
};

int64_t NeckFlops(const std::string& kind, int channels, int repeats) {
  auto m = std::make_shared<NeckUnderTest>(model::Neck(kind, LayerStyle{}, std::vector<int>{8, 16, 32}, channels, repeats));
  return CountModelFlops(m, torch::Tensor()).forward;
}

TEST(NeckTest, FpnAndBifpnGiveTheFinestLevelWithTheNeckChannels) {
  for (const std::string kind : {"fpn", "bifpn"}) {
    model::Neck neck(kind, LayerStyle{}, std::vector<int>{8, 16, 32}, 12, 2);
    const torch::Tensor y = neck->forward(Levels());
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 12, 8, 8})) << kind;
    y.square().sum().backward();
    for (const auto& p : neck->named_parameters()) {  // every level and node contributes
      ASSERT_TRUE(p.value().grad().defined()) << kind << " " << p.key();
      EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << kind << " " << p.key();
    }
  }
  // Odd sizes: a 5x5 level over a 3x3 one (nearest up, adaptive max pool down).
  model::Neck odd("bifpn", LayerStyle{}, std::vector<int>{4, 4}, 4, 1);
  EXPECT_EQ(odd->forward({torch::randn({1, 4, 5, 5}), torch::randn({1, 4, 3, 3})}).sizes(),
            (std::vector<int64_t>{1, 4, 5, 5}));
}

TEST(NeckTest, FpnFlopsEqualTheHandCount) {
  const int64_t b = 2, c = 12;
  // 1x1 laterals 8/16/32 -> 12 at 64/16/4 positions, then the 3x3 12 -> 12 output conv at 64 positions.
  const int64_t laterals = 2 * b * 64 * 8 * c + 2 * b * 16 * 16 * c + 2 * b * 4 * 32 * c;
  EXPECT_EQ(NeckFlops("fpn", 12, 1), laterals + 2 * b * 64 * c * c * 9);
}

TEST(NeckTest, BifpnFlopsEqualTheHandCount) {
  const int64_t b = 2, c = 12;
  const int64_t laterals = 2 * b * 64 * 8 * c + 2 * b * 16 * 16 * c + 2 * b * 4 * 32 * c;
  // A node at hw positions: depthwise 3x3 (one input channel per output) + 1x1 12 -> 12.
  auto node = [&](int64_t hw) { return 2 * b * hw * c * 9 + 2 * b * hw * c * c; };
  // One layer: top-down nodes at levels 0 (64) and 1 (16); bottom-up at levels 1 (16) and 2 (4).
  const int64_t layer = node(64) + node(16) + node(16) + node(4);
  const int64_t out = node(64);  // the output node at the finest level
  EXPECT_EQ(NeckFlops("bifpn", 12, 1), laterals + layer + out);
  EXPECT_EQ(NeckFlops("bifpn", 12, 3), laterals + 3 * layer + out);
}

TEST(NeckTest, FusionIsFastNormalizedOverReluWeights) {
  LayerStyle plain;
  plain.norm = "none";
  model::FusionNode node(plain, 2, 3);
  {  // identity convs: the node's output is relu(fused)
    torch::NoGradGuard no_grad;
    for (auto& p : node->named_parameters()) {
      if (p.key() == "depthwise.weight") {
        p.value().zero_();
        p.value().select(2, 1).select(2, 1).fill_(1);
      } else if (p.key() == "pointwise.conv.weight") {
        p.value().copy_(torch::eye(3).view({3, 3, 1, 1}));
      } else if (p.key() == "pointwise.conv.bias") {
        p.value().zero_();
      }
    }
    node->weights.copy_(torch::tensor({1.0f, 3.0f}));
  }
  const torch::Tensor a = torch::rand({1, 3, 4, 4}) + 0.1, b = torch::rand({1, 3, 4, 4}) + 0.1;
  EXPECT_TRUE(torch::allclose(node->forward({a, b}), (1 * a + 3 * b) / (4 + 1e-4), 1e-5, 1e-6));
  {
    torch::NoGradGuard no_grad;
    node->weights.copy_(torch::tensor({-1.0f, 2.0f}));  // a negative weight counts as 0
  }
  EXPECT_TRUE(torch::allclose(node->forward({a, b}), 2 * b / (2 + 1e-4), 1e-5, 1e-6));
  node->forward({a, b}).sum().backward();
  EXPECT_GT(node->weights.grad()[1].abs().item<double>(), 0);
}

json BevSpecJson(const std::string& neck) {
  return {{"schema", 1},
          {"seed", 1},
          {"task",
           {{"dataset", "bev-synthetic"},
            {"bev",
             {{"cameras", 4},
              {"height", 24},
              {"width", 64},
              {"grid", 32},
              {"max_boxes", 8},
              {"train_samples", 8},
              {"val_samples", 4},
              {"test_samples", 4}}},
            {"batch_size", 2},
            {"steps", 12},
            {"eval_every", 0},
            {"warmup_steps", 2}}},
          {"arch",
           {{"stem", {{"kind", "conv3x3"}, {"width", 8}, {"stride", 2}, {"depth", 1}}},  // 12x32
            {"stages",
             {{{"block", "basic"}, {"width", 16}, {"depth", 1}, {"stride", 2}},    // 6x16
              {{"block", "basic"}, {"width", 32}, {"depth", 1}, {"stride", 2}}}},  // 3x8
            {"bev",
             {{"view_transform", "lss"},
              {"pooling", "depth_fused"},
              {"depth_bins", 8},
              {"channels", 8},
              {"neck", neck},
              {"neck_channels", 16},
              {"encoder", {{{"block", "basic"}, {"width", 16}, {"depth", 1}, {"stride", 2}}}}}}}}};
}

TEST(NeckTest, TheNeckSetsTheMapTheViewTransformLifts) {
  const TrialSpec none = ParseTrialSpec(BevSpecJson("none"));
  const ResolvedArch plain = ResolveArch(none.arch, none.task);
  EXPECT_EQ(plain.bev.lift_channels, 32);
  EXPECT_EQ(plain.bev.lift_height, 3);
  EXPECT_EQ(plain.bev.lift_width, 8);
  const TrialSpec fpn = ParseTrialSpec(BevSpecJson("fpn"));
  const ResolvedArch fused = ResolveArch(fpn.arch, fpn.task);
  EXPECT_EQ(fused.bev.neck_from_stage, 0);
  EXPECT_EQ(fused.bev.lift_channels, 16);
  EXPECT_EQ(fused.bev.lift_height, 6);
  EXPECT_EQ(fused.bev.lift_width, 16);
  EXPECT_EQ(ToJson(fpn)["arch"]["bev"]["neck"], "fpn");
  EXPECT_EQ(ParseTrialSpec(ToJson(fpn)).arch.bev.neck, "fpn");
  // The image features at the lift's size, and LSS's depth supervision at that size too.
  json supervised = BevSpecJson("bifpn");
  supervised["arch"]["bev"]["depth_loss_weight"] = 0.5;
  const TrialSpec s = ParseTrialSpec(supervised);
  const ResolvedArch arch = ResolveArch(s.arch, s.task);
  model::BevNet net(arch, bev::MakeRig(s.task.bev));
  const torch::Tensor x = torch::randn({2, 12, 24, 64});
  EXPECT_EQ(net->ImageFeatures(x).sizes(), (std::vector<int64_t>{8, 16, 6, 16}));
  net->train();
  net->forward(x);
  const torch::Tensor depth_loss = net->DepthLoss(torch::full({2, 4, 6, 16}, 10.0f));
  ASSERT_TRUE(depth_loss.defined());
  EXPECT_GT(depth_loss.item<double>(), 0);
}

TEST(NeckTest, SpecErrorsNameTheNeckField) {
  auto error = [](const std::function<void(json&)>& edit) {
    json j = BevSpecJson("fpn");
    edit(j);
    try {
      ParseTrialSpec(j);
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error([](json& j) { j["arch"]["bev"]["neck_levels"] = 3; }),
            "arch.bev.neck_levels: the fpn neck fuses the maps of the last 3 backbone stages but arch.stages has 2 "
            "stages");
  EXPECT_EQ(error([](json& j) { j["arch"]["bev"]["neck"] = "panet"; }),
            "arch.bev.neck: unknown choice 'panet'; expected one of none, fpn, bifpn");
  EXPECT_EQ(error([](json& j) { j["arch"]["bev"]["neck_levels"] = 1; }),
            "arch.bev.neck_levels: must be in [2, 16], got 1");
  EXPECT_EQ(error([](json& j) {
              j["arch"]["norm"] = "group";
              j["arch"]["norm_groups"] = 8;
              j["arch"]["bev"]["neck_channels"] = 12;
            }),
            "arch.bev.neck_channels: width 12 is not divisible by arch.norm_groups (8)");
  EXPECT_EQ(error([](json& j) { j["arch"]["bev"]["neck"] = "none"; j["arch"]["bev"]["neck_levels"] = 3; }),
            "no error");  // the neck's settings wait for a neck (a space can vary arch.bev.neck)
}

TEST(NeckTest, TheNeckIsASearchDimension) {
  json base = BevSpecJson("none");
  const std::string yaml = "name: neck\ntask: " + base["task"].dump() + "\nbaseline:\n  arch: " +
                           base["arch"].dump() + "\nspace:\n  bev.neck: [none, fpn, bifpn]\n"
                           "objectives: [{metric: val_iou, goal: maximize}]\n";
  const SearchSpace space = ParseSearchSpace(yaml, "neck.yaml");
  std::vector<std::string> necks;
  for (const Config& config : EnumerateGrid(space)) necks.push_back(MakeTrialSpec(space, config, 1, "t").arch.bev.neck);
  EXPECT_EQ(necks, (std::vector<std::string>{"none", "fpn", "bifpn"}));
}

// The shipped example space: every configuration of its grid is a valid
// trial (the ablation runs four of them), and it varies both families.
TEST(NeckTest, TheShippedMoeFpnSpaceMakesValidTrials) {
  const SearchSpace space = LoadSearchSpaceFile(FRONTIER_SOURCE_DIR "/search_spaces/moe_fpn.yaml");
  std::set<std::string> seen;
  for (const Config& config : EnumerateGrid(space)) {
    const TrialSpec spec = MakeTrialSpec(space, config, 1, "t");
    const ResolvedArch arch = ResolveArch(spec.arch, spec.task);
    seen.insert(spec.arch.stages[1].block + "/" + spec.arch.bev.neck);
    EXPECT_EQ(arch.bev.lift_height, spec.arch.bev.neck == "none" ? 3 : 6) << config.dump();
  }
  EXPECT_EQ(seen, (std::set<std::string>{"basic/none", "basic/fpn", "basic/bifpn", "moe/none", "moe/fpn",
                                         "moe/bifpn"}));
}

// A few training steps of the whole BEV network on one batch lower its loss,
// with every neck and view transform kind; the neck's parameters train.
TEST(NeckTest, TheBevNetworkTrainsWithEveryNeck) {
  for (const std::string neck : {"none", "fpn", "bifpn"}) {
    for (const std::string vt : {"lss", "ipm"}) {
      json j = BevSpecJson(neck);
      j["arch"]["bev"]["view_transform"] = vt;
      if (vt != "lss") j["arch"]["bev"]["pooling"] = "naive";
      const TrialSpec spec = ParseTrialSpec(j);
      torch::manual_seed(3);
      model::BevNet net(ResolveArch(spec.arch, spec.task), bev::MakeRig(spec.task.bev));
      const torch::Tensor x = torch::randn({2, 12, 24, 64});
      const torch::Tensor labels = torch::rand({2, 32, 32}).lt(0.1).to(torch::kFloat);
      torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(3e-3));
      std::vector<double> losses;
      for (int step = 0; step < 8; ++step) {
        adam.zero_grad();
        const torch::Tensor logits = net->forward(x);
        ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{2, 32, 32}));
        torch::Tensor loss = torch::binary_cross_entropy_with_logits(logits, labels);
        loss.backward();
        if (step == 0 && neck != "none") {
          for (const auto& p : net->named_parameters()) {
            if (p.key().rfind("neck.", 0) != 0) continue;
            ASSERT_TRUE(p.value().grad().defined()) << p.key();
          }
        }
        adam.step();
        losses.push_back(loss.item<double>());
      }
      EXPECT_LT(losses.back(), losses.front()) << neck << " " << vt;
      const ModelFlops flops = CountModelFlops(net, x);
      EXPECT_GT(flops.forward, 0);
    }
  }
}

}  // namespace
}  // namespace frontier
