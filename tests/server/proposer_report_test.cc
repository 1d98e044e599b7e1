// What the report shows of an external proposer (docs/proposers.md): each
// configuration's proposer and rationale (the first seed that has one), in
// the notes of the table and the HTML page and in the JSON, and the proposer
// calls' totals: latency and the model's tokens; the CSV's proposer and
// rationale columns.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/report/csv.h"
#include "server/report/report.h"
#include "server/report/table.h"

namespace frontier {
namespace {

using nlohmann::json;

// RFC 4180 records: fields split at commas outside quotes, "" read as ".
std::vector<std::vector<std::string>> ParseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> rows(1, std::vector<std::string>(1));
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        rows.back().back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        rows.back().back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      rows.back().emplace_back();
    } else if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      rows.emplace_back(1);
      ++i;
    } else {
      rows.back().back() += ch;
    }
  }
  if (rows.back() == std::vector<std::string>(1)) rows.pop_back();  // after the last CRLF
  return rows;
}

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

  report.proposer_calls = {4, 1, 3, 2, 7, 2000, 1500, 300, "", ""};
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

TEST(ProposerReportTest, CsvHasProposerAndRationaleColumns) {
  SearchSpace space;
  space.objectives = {{"val_accuracy", true}};
  space.parity = {"val_accuracy", 0.01};
  std::vector<TrialRecord> trials;
  const std::vector<json> configs = {json::object(), json{{"block", "mbconv"}}, json{{"block", "fused"}}};
  for (size_t c = 0; c < configs.size(); ++c) {
    for (int seed = 1; seed <= 2; ++seed) {
      TrialRecord t;
      t.trial_id = "t" + std::to_string(c) + "-" + std::to_string(seed);
      t.config = configs[c];
      t.config_key = t.config.dump();
      t.is_baseline = c == 0;
      t.seed = seed;
      t.state = "completed";
      t.result = {{"val_accuracy", 0.9}, {"throughput", {{"samples_per_s", 100.0}}}};
      if (c == 1) t.proposer = "optuna:tpe";
      if (c == 2) {
        t.proposer = "llm:qwen";
        // Commas, quotes and a line break: the field must be quoted and read back whole.
        if (seed == 2) t.rationale = "fused, \"cheaper\" at\nthe same width";
      }
      trials.push_back(t);
    }
  }
  const Report report = BuildReport("exp-x", space, trials);
  const std::vector<std::vector<std::string>> rows = ParseCsv(RenderCsv(report));
  ASSERT_EQ(rows.size(), 4u);  // the header and three configs
  const std::vector<std::string>& header = rows[0];
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const size_t key = column("config_key"), proposer = column("proposer"), rationale = column("rationale");
  ASSERT_LT(proposer, header.size());
  ASSERT_LT(rationale, header.size());
  std::map<std::string, std::pair<std::string, std::string>> by_key;
  for (size_t r = 1; r < rows.size(); ++r) {
    ASSERT_EQ(rows[r].size(), header.size()) << "row " << r;
    by_key[rows[r][key]] = {rows[r][proposer], rows[r][rationale]};
  }
  EXPECT_EQ(by_key[configs[0].dump()], std::make_pair(std::string(), std::string()));
  EXPECT_EQ(by_key[configs[1].dump()], std::make_pair(std::string("optuna:tpe"), std::string()));
  EXPECT_EQ(by_key[configs[2].dump()],
            std::make_pair(std::string("llm:qwen"), std::string("fused, \"cheaper\" at\nthe same width")));
}

}  // namespace
}  // namespace frontier
