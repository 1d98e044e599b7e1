// What the report shows of an external proposer (docs/proposers.md): each
// configuration's proposer and rationale (the first seed that has one), in
// the notes of the table and the HTML page and in the JSON, and the proposer
// calls' totals: latency and the model's tokens.
#include <gtest/gtest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "server/report/report.h"
#include "server/report/table.h"

namespace frontier {
namespace {

using nlohmann::json;

TEST(ProposerReportTest, ShowsProposerRationaleAndCallTotals) {
  SearchSpace space;
  space.objectives = {{"val_accuracy", true}};
  space.parity = {"val_accuracy", 0.01};
  std::vector<TrialRecord> trials;
  for (int i = 0; i < 4; ++i) {
    TrialRecord t;
    t.trial_id = "t" + std::to_string(i);
    t.config = i < 2 ? json::object() : json{{"block", "mbconv"}};
    t.config_key = t.config.dump();
    t.is_baseline = i < 2;
    t.seed = i % 2 + 1;
    t.state = "completed";
    t.result = {{"val_accuracy", 0.9}, {"throughput", {{"samples_per_s", 100.0}}}};
    if (!t.is_baseline) t.proposer = "llm:qwen";
    if (i == 3) t.rationale = "mbconv: fewer FLOPs at the same width";  // a later seed's
    trials.push_back(t);
  }
  Report report = BuildReport("exp-x", space, trials);
  ASSERT_EQ(report.configs.size(), 2u);
  EXPECT_EQ(report.configs[0].proposer, "");
  EXPECT_EQ(report.configs[1].proposer, "llm:qwen");
  EXPECT_EQ(report.configs[1].rationale, "mbconv: fewer FLOPs at the same width");

  std::vector<std::string> notes = ReportNotes(report);
  const auto has = [&](const std::string& text) {
    return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n == text; });
  };
  EXPECT_TRUE(has("proposed by llm:qwen: " + report.configs[1].label + ": mbconv: fewer FLOPs at the same width"));
  EXPECT_FALSE(std::any_of(notes.begin(), notes.end(),
                           [](const std::string& n) { return n.rfind("proposer calls", 0) == 0; }))
      << "no calls, no note";

  report.proposer_calls = {4, 1, 3, 2, 7, 2000, 1500, 300};
  notes = ReportNotes(report);
  EXPECT_TRUE(has("proposer calls: 4 (1 failed), 3 configurations accepted and 2 rejected, mean latency 500 ms; "
                  "model: 7 calls, 1500 prompt + 300 completion tokens"));
  const json j = ReportToJson(report);
  EXPECT_EQ(j["configs"][1]["proposer"], "llm:qwen");
  EXPECT_EQ(j["configs"][1]["rationale"], "mbconv: fewer FLOPs at the same width");
  EXPECT_EQ(j["proposer_calls"]["prompt_tokens"], 1500);
  EXPECT_EQ(j["proposer_calls"]["latency_ms"], 2000);
  EXPECT_NE(RenderHtml(report).find("proposed by llm:qwen"), std::string::npos);
}

}  // namespace
}  // namespace frontier
