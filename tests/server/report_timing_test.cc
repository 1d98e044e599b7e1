// The report says when trials shared their cores with another trial (the
// worker's placement.shared_cores), read from parsed results and from the
// text of stored ones alike.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/report/report.h"
#include "server/report/table.h"

namespace frontier {
namespace {

using nlohmann::json;

std::vector<TrialRecord> Trials(bool second_shared) {
  std::vector<TrialRecord> trials;
  for (int i = 0; i < 2; ++i) {
    TrialRecord t;
    t.trial_id = "t" + std::to_string(i);
    t.config = json::object();
    t.config_key = t.config.dump();
    t.is_baseline = true;
    t.seed = i + 1;
    t.state = "completed";
    t.result = {{"val_accuracy", 0.9},
                {"throughput", {{"samples_per_s", 100.0}}},
                {"placement", {{"worker", "local-0"}, {"cpus", "0"}, {"shared_cores", i == 1 && second_shared}}}};
    trials.push_back(t);
  }
  return trials;
}

SearchSpace Space() {
  SearchSpace space;
  space.objectives = {{"val_accuracy", true}, {"throughput", true}};
  space.parity = {"val_accuracy", 0.01};
  return space;
}

TEST(ReportTimingTest, SaysHowManyTrialsSharedTheirCores) {
  const Report report = BuildReport("exp-s", Space(), Trials(true));
  EXPECT_EQ(report.trials_on_shared_cores, 1);
  const std::string table = RenderTable(report, TableOptions{true});
  EXPECT_NE(table.find("timing: 1 trial(s) shared their cores with another trial"), std::string::npos) << table;
}

TEST(ReportTimingTest, NoNoteWhenEveryTrialHadItsCoresToItself) {
  const Report report = BuildReport("exp-s", Space(), Trials(false));
  EXPECT_EQ(report.trials_on_shared_cores, 0);
  EXPECT_EQ(RenderTable(report, TableOptions{true}).find("shared their cores"), std::string::npos);
}

TEST(ReportTimingTest, ReadsTheFlagFromStoredResultText) {
  ReportBuilder builder("exp-s", Space());
  for (TrialRecord& t : Trials(true)) {
    const std::string text = t.result.dump();
    t.result = json();
    builder.Add(std::move(t), text);
  }
  EXPECT_EQ(builder.Build().trials_on_shared_cores, 1);
}

}  // namespace
}  // namespace frontier
