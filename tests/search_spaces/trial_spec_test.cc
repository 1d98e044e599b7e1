#include "search_spaces/trial_spec.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace frontier {
namespace {

using nlohmann::json;

json MinimalSpec() {
  return json::parse(R"({
    "schema": 1, "seed": 3,
    "arch": {"stem": {"kind": "conv3x3", "width": 16, "stride": 2},
             "stages": [{"block": "basic", "width": 16, "depth": 1},
                        {"block": "basic", "width": 32, "depth": 2, "stride": 2}]}
  })");
}

// The path a SpecError names for a spec edited by `edit`.
std::string ErrorPath(const std::function<void(json&)>& edit) {
  json j = MinimalSpec();
  edit(j);
  try {
    ParseTrialSpec(j);
  } catch (const SpecError& e) {
    return e.path();
  }
  return "(accepted)";
}

TEST(TrialSpecTest, DefaultsFillTheRest) {
  TrialSpec s = ParseTrialSpec(MinimalSpec());
  EXPECT_EQ(s.seed, 3);
  EXPECT_EQ(s.task.dataset, "fashion-mnist");
  EXPECT_EQ(s.task.batch_size, 128);
  EXPECT_EQ(s.runtime.precision, Precision::kFp32);
  ASSERT_EQ(s.arch.stages.size(), 2u);
  EXPECT_EQ(s.arch.stages[1].stride, 2);
}

TEST(TrialSpecTest, RoundTripsThroughJson) {
  json j = MinimalSpec();
  j["arch"]["stages"][1]["attention"] = {{"kind", "gqa"}, {"heads", 4}, {"kv_heads", 2}};
  j["runtime"] = {{"precision", "bf16"}, {"memory_format", "channels_last"}};
  TrialSpec s = ParseTrialSpec(j);
  TrialSpec again = ParseTrialSpec(ToJson(s));
  EXPECT_EQ(ToJson(again), ToJson(s));
  EXPECT_EQ(again.arch.stages[1].attention.kv_heads, 2);
}

TEST(TrialSpecTest, ErrorsNameTheField) {
  EXPECT_EQ(ErrorPath([](json& j) { j["arch"]["stages"][0]["block"] = "resnext"; }), "arch.stages[0].block");
  EXPECT_EQ(ErrorPath([](json& j) { j["arch"]["stages"][1]["width"] = 0; }), "arch.stages[1].width");
  EXPECT_EQ(ErrorPath([](json& j) { j["arch"]["stages"][1]["widht"] = 8; }), "arch.stages[1].widht");
  EXPECT_EQ(ErrorPath([](json& j) { j["arch"]["stages"][1]["attention"] = {{"kind", "mhsa"}, {"heads", 5}}; }),
            "arch.stages[1].attention.heads");
  // 28 -> 14 (stem) -> 14 -> 7: a window of 4 does not tile 7x7.
  EXPECT_EQ(ErrorPath([](json& j) { j["arch"]["stages"][1]["attention"] = {{"kind", "window"}, {"window", 4}}; }),
            "arch.stages[1].attention.window");
  EXPECT_EQ(ErrorPath([](json& j) { j["arch"]["stages"][1]["attention"] = {{"kind", "flash"}}; }),
            "arch.stages[1].attention.kind");
  EXPECT_EQ(ErrorPath([](json& j) {
              j["arch"]["stages"][1]["attention"] = {{"kind", "gqa"}, {"heads", 4}, {"kv_heads", 3}};
            }),
            "arch.stages[1].attention.kv_heads");
  EXPECT_EQ(ErrorPath([](json& j) { j["arch"]["norm"] = "group"; j["arch"]["norm_groups"] = 5; }),
            "arch.stem.width");
  EXPECT_EQ(ErrorPath([](json& j) { j["runtime"] = {{"precision", "fp8"}}; }), "runtime.precision");
  EXPECT_EQ(ErrorPath([](json& j) { j["runtime"] = {{"device", "tpu"}}; }), "runtime.device");
  EXPECT_EQ(ErrorPath([](json& j) { j["task"] = {{"steps", 5}, {"warmup_steps", 10}}; }), "task.warmup_steps");
  EXPECT_EQ(ErrorPath([](json& j) { j["arch"]["stages"] = json::array(); }), "arch.stages");
  EXPECT_EQ(ErrorPath([](json& j) { j["arch"]["stages"][1]["block"] = "convnext"; j["arch"]["stages"][1]["stride"] = 4; }),
            "arch.stages[1].stride");  // 14x14 does not split into 4x4 patches
  EXPECT_EQ(ErrorPath([](json& j) { j["schema"] = 2; }), "schema");
}

TEST(TrialSpecTest, MessageListsTheChoices) {
  json j = MinimalSpec();
  j["arch"]["stages"][1]["attention"] = {{"kind", "flash"}};
  try {
    ParseTrialSpec(j);
    FAIL() << "accepted an unknown attention kind";
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(),
                 "arch.stages[1].attention.kind: unknown choice 'flash'; expected one of none, mhsa, window, gqa, linear");
  }
}

TEST(TrialSpecTest, PluginsOpenTheRegistryNamesOnlyForTheirSpec) {
  json j = MinimalSpec();
  j["arch"]["stages"][0]["block"] = "fused_cna";
  j["arch"]["stages"][1]["attention"] = {{"kind", "flash"}};
  EXPECT_THROW(ParseTrialSpec(j), SpecError);  // no plugins: built-in names only
  j["runtime"] = {{"plugins", {"/opt/kernels/libmy_ops.so"}}};
  TrialSpec s = ParseTrialSpec(j);
  EXPECT_EQ(s.arch.stages[0].block, "fused_cna");
  EXPECT_EQ(s.arch.stages[1].attention.kind, "flash");
  ASSERT_EQ(s.runtime.plugins.size(), 1u);
  EXPECT_EQ(ToJson(s)["runtime"]["plugins"][0], "/opt/kernels/libmy_ops.so");
  EXPECT_EQ(ToJson(ParseTrialSpec(ToJson(s))), ToJson(s));
  // The next spec without plugins is closed again.
  j.erase("runtime");
  EXPECT_EQ(ErrorPath([&](json& k) { k = j; }), "arch.stages[0].block");
  // Precision and the other closed choices stay closed with plugins.
  EXPECT_EQ(ErrorPath([](json& k) { k["runtime"] = {{"plugins", {"/p.so"}}, {"precision", "fp8"}}; }),
            "runtime.precision");
  EXPECT_EQ(ErrorPath([](json& k) { k["runtime"] = {{"plugins", {""}}}; }), "runtime.plugins[0]");
  EXPECT_EQ(ErrorPath([](json& k) { k["runtime"] = {{"plugins", "/p.so"}}; }), "runtime.plugins");
  EXPECT_EQ(ErrorPath([](json& k) {
              k["runtime"] = {{"plugins", {"/p.so"}}};
              k["arch"]["stages"][0]["block"] = "";
            }),
            "arch.stages[0].block");
}

TEST(TrialSpecTest, MalformedJsonIsASpecError) {
  EXPECT_THROW(ParseTrialSpecText("{\"schema\": 1,"), SpecError);
  EXPECT_THROW(LoadTrialSpecFile("/nonexistent/spec.json"), SpecError);
}

TEST(ResolveArchTest, AppliesMultipliersAndTracksTheMap) {
  TrialSpec s = ParseTrialSpec(MinimalSpec());
  s.arch.width_mult = 1.5;
  s.arch.depth_mult = 1.5;
  s.arch.stages[1].attention.kind = "mhsa";
  s.arch.stages[1].attention.heads = 4;
  s.arch.stages[1].attention.blocks = 1;
  ResolvedArch r = ResolveArch(s.arch, InputShapeOf(s.task));
  EXPECT_EQ(r.stem_out_height, 14);  // 3x3 stride 2, padding 1 on 28
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[0].in_width, 16);  // the stem's width is not scaled
  EXPECT_EQ(r.stages[0].width, 24);
  EXPECT_EQ(r.stages[0].depth, 2);  // ceil(1 * 1.5)
  EXPECT_EQ(r.stages[1].in_width, 24);
  EXPECT_EQ(r.stages[1].width, 48);
  EXPECT_EQ(r.stages[1].depth, 3);
  EXPECT_EQ(r.stages[1].out_height, 7);
  EXPECT_EQ(r.stages[1].attention.head_dim, 12);
  EXPECT_EQ(r.stages[1].attention_from_block, 2);  // only the last block
  EXPECT_EQ(r.features, 48);
}

TEST(ResolveArchTest, StemKindsAndDefaults) {
  ArchSpec a;
  a.stages.push_back(StageSpec{});
  a.stem.kind = "patchify";  // default patch 4: 28 -> 7
  EXPECT_EQ(ResolveArch(a, InputShape{}).stem_out_height, 7);
  a.stem.kind = "resnet";  // 7x7/2 -> 14, max-pool 3x3/2 -> 7
  EXPECT_EQ(ResolveArch(a, InputShape{}).stem_out_height, 7);
  a.stem.stride = 1;  // 28 -> 14
  EXPECT_EQ(ResolveArch(a, InputShape{}).stem_out_height, 14);
  a.stem.kind = "patchify";
  a.stem.stride = 3;  // does not divide 28
  EXPECT_THROW(ResolveArch(a, InputShape{}), SpecError);
}

}  // namespace
}  // namespace frontier
