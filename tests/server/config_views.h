// The per-config SQL views (config_results, config_front; docs/sql-views.md)
// on one fixture, for every store: each store's test reads the views with its
// own SQL client, as a user would, and checks the rows with CheckConfigFront.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/analysis/pareto.h"
#include "server/store/store.h"

namespace frontier::testing {

// The query each store runs; the booleans as 0/1 so both dialects print alike.
inline std::string ConfigFrontQuery(const std::string& experiment_id) {
  return "SELECT config_json, seeds_completed, trials_failed, CASE WHEN feasible THEN 1 ELSE 0 END, "
         "CASE WHEN on_front THEN 1 ELSE 0 END, COALESCE(dominated_by, -1), val_accuracy, val_accuracy_std, "
         "median_step_time_ms FROM config_front WHERE experiment_id = '" +
         experiment_id + "'";
}

// An experiment maximizing val_accuracy and minimizing step_time_ms under
// peak_memory_mb <= 4096, two seeds per config: {} and {"a":5} are identical
// (both on the front), {"a":1} is more accurate and slower, {"a":2} faster and
// less accurate (both on the front), {"a":3} is dominated by {}, {"a":5} and
// {"a":2}, {"a":4} beats everything but breaks the memory limit, and {"a":6}
// only failed. Returns the experiment id.
inline std::string FillConfigFrontFixture(Store& store) {
  ExperimentRecord e;
  e.name = "views";
  e.goals_json = R"({"objectives": [{"metric": "val_accuracy", "goal": "maximize"},
                                   {"metric": "step_time_ms", "goal": "minimize"}],
                    "constraints": [{"metric": "peak_memory_mb", "min": null, "max": 4096}]})";
  struct Config {
    std::string key;
    double accuracy, step_ms, memory;
  };
  const std::vector<Config> configs = {{"{}", 0.90, 10, 1000},        {R"({"a":1})", 0.92, 12, 1000},
                                       {R"({"a":2})", 0.89, 8, 1000}, {R"({"a":3})", 0.88, 11, 1000},
                                       {R"({"a":4})", 0.99, 1, 5000}, {R"({"a":5})", 0.90, 10, 1000}};
  std::vector<TrialRow> trials;
  for (const Config& c : configs) {
    for (int seed = 1; seed <= 2; ++seed) {
      TrialRow t;
      t.config_json = c.key;
      t.is_baseline = c.key == "{}";
      t.seed = seed;
      t.spec_json = "{}";
      trials.push_back(t);
    }
  }
  TrialRow failing;
  failing.config_json = R"({"a":6})";
  failing.spec_json = "{}";
  failing.max_attempts = 1;
  trials.push_back(failing);
  const std::string id = store.CreateExperiment(e, trials, 1);
  for (size_t i = 0; i < trials.size(); ++i) {
    auto t = store.LeaseNextTrial("w", 2, 100000);
    EXPECT_TRUE(t.has_value());
    if (!t) break;
    if (t->config_json == R"({"a":6})") {
      store.FailAttempt(t->id, t->attempt, "crashed", false, "", 3);
      continue;
    }
    const Config& c = *std::find_if(configs.begin(), configs.end(),
                                    [&](const Config& x) { return x.key == t->config_json; });
    const nlohmann::json result = {{"status", "completed"},
                                   {"val_accuracy", c.accuracy + 0.001 * t->seed},
                                   {"step_time_ms", {{"median", c.step_ms}}},
                                   {"throughput", {{"samples_per_s", 1000 / c.step_ms}}},
                                   {"peak_memory_mb", c.memory}};
    EXPECT_EQ(store.FinishTrial(t->id, t->attempt, "completed", result.dump(), "", 3), Transition::kApplied);
  }
  return id;
}

// `rows`: the ConfigFrontQuery's rows, columns split (sorted here by config:
// collations differ between stores).
inline void CheckConfigFront(std::vector<std::vector<std::string>> rows) {
  std::sort(rows.begin(), rows.end());
  ASSERT_EQ(rows.size(), 7u);
  // config, seeds, failed, feasible, on_front, dominated_by (-1: not a candidate)
  const std::vector<std::vector<std::string>> expected = {
      {R"({"a":1})", "2", "0", "1", "1", "0"}, {R"({"a":2})", "2", "0", "1", "1", "0"},
      {R"({"a":3})", "2", "0", "1", "0", "3"}, {R"({"a":4})", "2", "0", "0", "0", "-1"},
      {R"({"a":5})", "2", "0", "1", "1", "0"}, {R"({"a":6})", "0", "1", "0", "0", "-1"},
      {"{}", "2", "0", "1", "1", "0"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), 9u);
    EXPECT_EQ(std::vector<std::string>(rows[i].begin(), rows[i].begin() + 6), expected[i]) << "row " << i;
  }
  // Means and sample standard deviations over the two seeds; none for the failed config.
  EXPECT_NEAR(std::stod(rows[6][6]), 0.9015, 1e-9);
  EXPECT_NEAR(std::stod(rows[6][7]), 0.001 / std::sqrt(2.0), 1e-9);
  EXPECT_NEAR(std::stod(rows[1][8]), 8, 1e-9);
  EXPECT_EQ(rows[5][6], "");

  // The SQL front is the analysis' front (ParetoFront, the one dominance rule)
  // on the same means: val_accuracy maximized, step_time_ms minimized, among
  // the feasible configs.
  std::vector<size_t> feasible;
  std::vector<std::vector<double>> points;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i][3] != "1") continue;
    feasible.push_back(i);
    points.push_back({std::stod(rows[i][6]), std::stod(rows[i][8])});
  }
  std::vector<bool> on_front(rows.size(), false);
  for (size_t index : ParetoFront(points, {true, false})) on_front[feasible[index]] = true;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][4] == "1", on_front[i]) << "row " << i << ": " << rows[i][0];
  }
}

}  // namespace frontier::testing
