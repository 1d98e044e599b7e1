// The report of a space with an op dimension (docs/plugins.md): op_speedup
// and op_bandwidth_share per config in every format, without the space
// naming them.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/report/report.h"

namespace frontier {
namespace {

using nlohmann::json;

// Two configs x 2 seeds: the baseline runs the reference (op speed-up 1, no
// bandwidth share) and `variant` runs at 1.5x and 1.7x with shares 0.2, 0.3.
std::vector<TrialRecord> OpTrials(const std::string& dimension, const std::string& variant) {
  std::vector<TrialRecord> trials;
  for (const bool baseline : {true, false}) {
    for (int seed = 1; seed <= 2; ++seed) {
      TrialRecord t;
      t.trial_id = (baseline ? "b" : "v") + std::to_string(seed);
      t.config = baseline ? json::object() : json{{dimension, variant}};
      t.config_key = t.config.dump();
      t.is_baseline = baseline;
      t.seed = seed;
      t.state = "completed";
      t.result = {{"val_accuracy", 0.9}, {"throughput", {{"samples_per_s", 100.0}}}};
      if (baseline) {
        t.result["op"] = {{"op", "attention_kernel"}, {"variant", "naive"}, {"speedup", 1.0}};
      } else {
        t.result["op"] = {{"op", "attention_kernel"},
                          {"variant", variant},
                          {"speedup", seed == 1 ? 1.5 : 1.7},
                          {"bandwidth_share", seed == 1 ? 0.2 : 0.3}};
      }
      trials.push_back(t);
    }
  }
  return trials;
}

SearchSpace OpSpace(const std::string& dimension, const std::string& path) {
  SearchSpace space;
  space.dimensions = {{dimension, {path}, {"naive", "chunked"}}};
  space.objectives = {{"val_accuracy", true}, {"throughput", true}};
  space.parity = {"val_accuracy", 0.01};
  return space;
}

TEST(ReportOpsTest, ASpaceWithAnOpDimensionShowsOpSpeedupInEveryFormat) {
  const Report report = BuildReport("e", OpSpace("ops.attention_kernel", "arch.ops.attention_kernel"),
                                    OpTrials("ops.attention_kernel", "chunked"));
  ASSERT_EQ(report.configs.size(), 2u);
  EXPECT_TRUE(report.varies_op);
  const ConfigSummary& baseline = report.configs[0].is_baseline ? report.configs[0] : report.configs[1];
  const ConfigSummary& chunked = report.configs[0].is_baseline ? report.configs[1] : report.configs[0];
  EXPECT_DOUBLE_EQ(baseline.metrics.at("op_speedup").mean, 1.0);
  EXPECT_EQ(baseline.metrics.count("op_bandwidth_share"), 0u);  // the reference is not timed
  EXPECT_DOUBLE_EQ(chunked.metrics.at("op_speedup").mean, 1.6);
  EXPECT_EQ(chunked.metrics.at("op_speedup").n, 2);
  EXPECT_DOUBLE_EQ(chunked.metrics.at("op_bandwidth_share").mean, 0.25);

  const std::string table = RenderTable(report);  // the narrow table has the speed-up
  EXPECT_NE(table.find("op speed-up"), std::string::npos) << table;
  EXPECT_NE(table.find("1.60x"), std::string::npos) << table;
  EXPECT_NE(table.find("1.00x"), std::string::npos) << table;
  TableOptions wide;
  wide.wide = true;
  wide.width = 0;
  const std::string wide_table = RenderTable(report, wide);
  EXPECT_NE(wide_table.find("op BW %"), std::string::npos) << wide_table;
  EXPECT_NE(wide_table.find("25.0"), std::string::npos) << wide_table;

  const json j = ReportToJson(report);
  bool seen = false;
  for (const json& c : j["configs"]) {
    if (c["is_baseline"].get<bool>()) continue;
    seen = true;
    EXPECT_DOUBLE_EQ(c["metrics"]["op_speedup"]["mean"].get<double>(), 1.6);
    EXPECT_DOUBLE_EQ(c["metrics"]["op_bandwidth_share"]["mean"].get<double>(), 0.25);
  }
  EXPECT_TRUE(seen);

  const std::string csv = RenderCsv(report);
  const std::string header = csv.substr(0, csv.find("\r\n"));
  EXPECT_NE(header.find(",op_speedup_mean,"), std::string::npos) << header;
  EXPECT_NE(header.find(",op_bandwidth_share_mean,"), std::string::npos) << header;
  EXPECT_NE(csv.find(",1.6,"), std::string::npos) << csv;

  const std::string html = RenderHtml(report);
  EXPECT_NE(html.find("op speed-up"), std::string::npos);
  EXPECT_NE(html.find("1.60x"), std::string::npos);
}

TEST(ReportOpsTest, OpSpeedupIntervalsStayPositive) {
  // Op speed-ups 1.0 and 2.0 over 2 seeds: the Student-t interval of their mean
  // was [-4.85, 7.85]; on the log scale (docs/report.md) it is positive and
  // holds the mean, in the report, its JSON and its CSV.
  std::vector<TrialRecord> trials = OpTrials("ops.attention_kernel", "chunked");
  for (TrialRecord& t : trials) {
    if (!t.is_baseline) t.result["op"]["speedup"] = t.seed == 1 ? 1.0 : 2.0;
  }
  const Report report =
      BuildReport("e", OpSpace("ops.attention_kernel", "arch.ops.attention_kernel"), trials);
  const ConfigSummary& chunked = report.configs[0].is_baseline ? report.configs[1] : report.configs[0];
  const MetricSummary& s = chunked.metrics.at("op_speedup");
  EXPECT_DOUBLE_EQ(s.mean, 1.5);
  // Reference (mpmath): 1.5 exp(-+t(0.975, 1) s / (sqrt(2) 1.5)).
  EXPECT_NEAR(s.ci_low, 0.0217109948722, 1e-9);
  EXPECT_NEAR(s.ci_high, 103.634127006, 1e-6);
  for (const json& c : ReportToJson(report)["configs"]) {
    EXPECT_GT(c["metrics"]["op_speedup"]["ci_low"].get<double>(), 0) << c.dump();
  }
  const std::string csv = RenderCsv(report);
  EXPECT_NE(csv.find(",1.5,0.7071067811865476,0.0217109948721"), std::string::npos) << csv;
}

TEST(ReportOpsTest, TheBevPoolingDimensionIsAnOpDimensionToo) {
  const Report report =
      BuildReport("e", OpSpace("ops.bev_pool", "arch.bev.pooling"), OpTrials("ops.bev_pool", "depth_fused"));
  EXPECT_TRUE(report.varies_op);
  EXPECT_NE(RenderTable(report).find("op speed-up"), std::string::npos);
}

TEST(ReportOpsTest, ASpaceWithoutAnOpDimensionShowsNoOpColumns) {
  // The same results, varied by a dimension that chooses no op variant.
  const Report report =
      BuildReport("e", OpSpace("block", "arch.stages[*].block"), OpTrials("block", "chunked"));
  EXPECT_FALSE(report.varies_op);
  for (const ConfigSummary& c : report.configs) EXPECT_EQ(c.metrics.count("op_speedup"), 0u);
  EXPECT_EQ(RenderTable(report).find("op speed-up"), std::string::npos);
  EXPECT_EQ(RenderCsv(report).find("op_speedup"), std::string::npos);
  // Named as an objective, it is shown whatever the dimensions.
  SearchSpace named = OpSpace("block", "arch.stages[*].block");
  named.objectives.push_back({"op_speedup", true});
  const Report with_objective = BuildReport("e", named, OpTrials("block", "chunked"));
  EXPECT_NE(RenderCsv(with_objective).find("op_speedup_mean"), std::string::npos);
}

}  // namespace
}  // namespace frontier
