// Every menu entry of the builder builds, runs forward and backward on CPU and
// produces logits of the right shape.
#include "worker/trial/model/model.h"

#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace frontier {
namespace {

using nlohmann::json;

// A two-stage spec on synthetic 1x16x16 input; `edit` changes one thing.
TrialSpec SmallSpec(const std::function<void(json&)>& edit) {
  json j = json::parse(R"({
    "schema": 1, "seed": 1,
    "task": {"dataset": "synthetic", "input": {"channels": 1, "height": 16, "width": 16, "classes": 7},
             "batch_size": 4, "steps": 2, "warmup_steps": 0},
    "arch": {"stem": {"kind": "conv3x3", "width": 8, "stride": 1},
             "stages": [{"block": "basic", "width": 8, "depth": 1, "stride": 2},
                        {"block": "basic", "width": 16, "depth": 2, "stride": 2}],
             "norm_groups": 4}
  })");
  edit(j);
  return ParseTrialSpec(j);
}

void ExpectTrains(const TrialSpec& spec, const std::string& label) {
  SCOPED_TRACE(label);
  torch::manual_seed(0);
  model::Classifier net(ResolveArch(spec.arch, InputShapeOf(spec.task)));
  const bool channels_last = spec.runtime.memory_format == MemoryFormat::kChannelsLast;
  if (channels_last) model::SetMemoryFormat(*net, at::MemoryFormat::ChannelsLast);
  torch::Tensor x = torch::randn({4, 1, 16, 16});
  if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  const bool bf16 = spec.runtime.precision == Precision::kBf16;
  if (bf16) {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(true);
  }
  torch::Tensor logits = net(x);
  if (bf16) {
    at::autocast::set_cpu_enabled(false);
    at::autocast::clear_cache();
  }
  ASSERT_EQ(logits.sizes(), (std::vector<int64_t>{4, 7}));
  logits.to(torch::kFloat).logsumexp(1).mean().backward();
  // Every parameter is part of the graph (a dead ReLU may still zero a gradient).
  int with_grad = 0, params = 0;
  for (const auto& p : net->parameters()) {
    ++params;
    if (p.grad().defined()) ++with_grad;
  }
  EXPECT_EQ(with_grad, params) << "some parameters are not used by the forward pass";
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());
}

TEST(ModelBuilderTest, EveryStem) {
  for (const std::string stem : {"conv3x3", "patchify", "resnet"}) {
    ExpectTrains(SmallSpec([&](json& j) {
                   j["arch"]["stem"]["kind"] = stem;
                   j["arch"]["stem"]["stride"] = stem == "patchify" ? 2 : 1;
                 }),
                 "stem " + stem);
  }
}

TEST(ModelBuilderTest, EveryBlockFamilyWithOptions) {
  for (const std::string block : {"basic", "bottleneck", "convnext", "mbconv", "fused_mbconv", "moe"}) {
    ExpectTrains(SmallSpec([&](json& j) { j["arch"]["stages"][1]["block"] = block; }), "block " + block);
  }
  ExpectTrains(SmallSpec([](json& j) {
                 j["arch"]["stages"][1] = {{"block", "mbconv"}, {"width", 16},    {"depth", 2}, {"stride", 2},
                                           {"kernel", 5},       {"expansion", 6}, {"se", true}};
               }),
               "mbconv k5 e6 se");
  ExpectTrains(SmallSpec([](json& j) {
                 j["arch"]["stages"][1] = {
                     {"block", "fused_mbconv"}, {"width", 16}, {"depth", 1}, {"stride", 2}, {"expansion", 1}};
               }),
               "fused_mbconv e1");
  ExpectTrains(SmallSpec([](json& j) {
                 j["arch"]["width_mult"] = 1.5;
                 j["arch"]["depth_mult"] = 2.0;
               }),
               "width and depth multipliers");
}

TEST(ModelBuilderTest, EveryAttentionKind) {
  // Stage 1 ends on a 4x4 map with 16 channels.
  const std::vector<json> kinds = {
      {{"kind", "mhsa"}, {"heads", 4}},
      {{"kind", "window"}, {"heads", 2}, {"window", 2}},
      {{"kind", "gqa"}, {"heads", 4}, {"kv_heads", 2}},
      {{"kind", "gqa"}, {"heads", 4}, {"kv_heads", 1}},  // multi-query
      {{"kind", "linear"}, {"heads", 2}, {"head_dim", 12}},
      {{"kind", "mhsa"}, {"heads", 2}, {"blocks", 1}},
  };
  for (const json& att : kinds) {
    ExpectTrains(SmallSpec([&](json& j) { j["arch"]["stages"][1]["attention"] = att; }),
                 "attention " + att.dump());
  }
}

TEST(ModelBuilderTest, EveryNormActivationPrecisionAndLayout) {
  for (const std::string norm : {"batch", "group", "layer", "none"}) {
    for (const std::string block : {"basic", "convnext"}) {
      ExpectTrains(SmallSpec([&](json& j) {
                     j["arch"]["norm"] = norm;
                     j["arch"]["stages"][1]["block"] = block;
                     j["arch"]["stages"][1]["attention"] = {{"kind", "mhsa"}, {"heads", 2}};
                   }),
                   "norm " + norm + " " + block);
    }
  }
  for (const std::string act : {"relu", "gelu", "silu"}) {
    ExpectTrains(SmallSpec([&](json& j) { j["arch"]["activation"] = act; }), "activation " + act);
  }
  for (const std::string precision : {"fp32", "bf16"}) {
    for (const std::string layout : {"contiguous", "channels_last"}) {
      ExpectTrains(SmallSpec([&](json& j) {
                     j["runtime"] = {{"precision", precision}, {"memory_format", layout}};
                     j["arch"]["stages"][1]["block"] = "mbconv";
                     j["arch"]["stages"][1]["attention"] = {{"kind", "window"}, {"heads", 2}, {"window", 2}};
                   }),
                   precision + " " + layout);
    }
  }
}

// True when two attention layers with the same weights compute the same on a 16-channel 4x4 map.
bool SameOutputs(const AttentionSpec& a_spec, const AttentionSpec& b_spec) {
  torch::manual_seed(1);
  model::Attention a(a_spec, 16, "batch");
  model::Attention b(b_spec, 16, "batch");
  torch::NoGradGuard no_grad;
  auto pa = a->parameters(), pb = b->parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i) pb[i].copy_(pa[i]);
  torch::Tensor x = torch::randn({2, 16, 4, 4});
  return torch::allclose(a(x), b(x), 1e-5, 1e-6);
}

TEST(ModelBuilderTest, WindowAttentionMatchesGlobalWhenTheWindowIsTheMap) {
  AttentionSpec global;
  global.kind = "mhsa";
  global.heads = 2;
  global.head_dim = 8;
  AttentionSpec window = global;
  window.kind = "window";
  window.window = 4;
  EXPECT_TRUE(SameOutputs(global, window));
}

TEST(ModelBuilderTest, GqaWithAllHeadsIsMhsa) {
  AttentionSpec mhsa;
  mhsa.kind = "mhsa";
  mhsa.heads = 4;
  mhsa.head_dim = 4;
  AttentionSpec gqa = mhsa;
  gqa.kind = "gqa";
  gqa.kv_heads = 4;
  EXPECT_TRUE(SameOutputs(mhsa, gqa));
}

TEST(ModelBuilderTest, InvalidSpecsNameTheField) {
  auto error = [](const std::function<void(json&)>& edit) -> std::string {
    try {
      SmallSpec(edit);
    } catch (const SpecError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(
      error([](json& j) { j["arch"]["stages"][0]["block"] = "resnext"; }),
      "arch.stages[0].block: unknown choice 'resnext'; expected one of basic, bottleneck, convnext, mbconv, "
      "fused_mbconv, moe");
  EXPECT_EQ(error([](json& j) { j["arch"]["stages"][0]["width"] = 0; }),
            "arch.stages[0].width: must be in [1, 65536], got 0");
  EXPECT_EQ(
      error([](json& j) {
        j["arch"]["stages"][1]["attention"] = {{"kind", "mhsa"}, {"heads", 3}};
      }),
      "arch.stages[1].attention.heads: 3 heads do not divide the stage width 16 (set head_dim to decouple "
      "them)");
  EXPECT_EQ(error([](json& j) {
              j["arch"]["stages"][1]["attention"] = {{"kind", "window"}, {"window", 3}};
            }),
            "arch.stages[1].attention.window: window 3 does not divide the stage's 4x4 feature map");
}

TEST(ModelBuilderTest, ChannelsLastKeepsParametersChannelsLast) {
  TrialSpec spec = SmallSpec([](json&) {});
  model::Classifier net(ResolveArch(spec.arch, InputShapeOf(spec.task)));
  model::SetMemoryFormat(*net, at::MemoryFormat::ChannelsLast);
  for (const auto& p : net->parameters()) {
    if (p.dim() == 4) {
      EXPECT_TRUE(p.is_contiguous(at::MemoryFormat::ChannelsLast));
    }
  }
}

// The registries hold the menu that trial specs validate against, and a name
// that was never registered fails the build of the part.
TEST(ModelRegistryTest, RegistriesHoldTheMenuAndRejectUnknownNames) {
  for (const char* stem : {"conv3x3", "patchify", "resnet"})
    EXPECT_TRUE(model::StemRegistry().Has(stem)) << stem;
  for (const char* block : {"basic", "bottleneck", "convnext", "mbconv", "fused_mbconv", "moe"}) {
    EXPECT_TRUE(model::BlockRegistry().Has(block)) << block;
  }
  for (const char* kind : {"mhsa", "window", "gqa", "linear"})
    EXPECT_TRUE(model::AttentionRegistry().Has(kind)) << kind;
  EXPECT_FALSE(model::AttentionRegistry().Has("none")) << "none is no layer";
  const TrialSpec spec = SmallSpec([](json&) {});
  ResolvedArch arch = ResolveArch(spec.arch, InputShapeOf(spec.task));
  arch.stem.kind = "hexagonal";
  EXPECT_THROW(model::Backbone{arch}, std::invalid_argument);
  EXPECT_THROW(model::StemRegistry().Add("conv3x3", {}), std::logic_error);
}

// A new stem is one registration: the builder finds it by name.
TEST(ModelRegistryTest, ANewStemIsOneRegistration) {
  model::StemRegistry().Add("test_pointwise", [](const model::LayerStyle& style, int in, const StemSpec& stem,
                                                 torch::nn::Sequential& seq) {
    seq->push_back(model::ConvNormAct(style, in, stem.width, 1, stem.stride, 1, true));
  });
  const TrialSpec spec = SmallSpec([](json&) {});
  ResolvedArch arch = ResolveArch(spec.arch, InputShapeOf(spec.task));
  arch.stem.kind = "test_pointwise";
  model::Classifier net(arch);
  EXPECT_EQ(net(torch::randn({4, 1, 16, 16})).sizes(), (std::vector<int64_t>{4, 7}));
}

}  // namespace
}  // namespace frontier
