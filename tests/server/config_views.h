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

// Inference latency in the views: per trial in `results`, mean and spread
// per config in config_results, objective and constraint in config_front.
// An experiment maximizing val_accuracy and minimizing latency_ms under
// latency_b1_p99_ms <= 20, two seeds per config (each latency figure 0.1
// below its config's value at seed 1, 0.1 above at seed 2): {} and {"a":1}
// (more accurate, slower) are on the front, {"a":2} is dominated by {}, {"a":3}
// would dominate all but {"a":4} but breaks the batch-1 p99 limit, {"a":4} is
// the fastest (on the front). On step time instead of latency the front would
// differ ({"a":2} fastest, {"a":4} dominated).
struct LatencyConfig {
  std::string key;
  double accuracy, step_ms, latency_ms, b1_p99_ms;
  // The config's mean of each figure (the seeds' offsets cancel).
  double p99_ms() const { return 1.5 * latency_ms; }
  double b1_ms() const { return latency_ms / 4; }
};

inline const std::vector<LatencyConfig>& LatencyConfigs() {
  static const std::vector<LatencyConfig> configs = {{"{}", 0.90, 10, 5, 10},
                                                     {R"({"a":1})", 0.92, 12, 9, 12},
                                                     {R"({"a":2})", 0.89, 6, 6, 11},
                                                     {R"({"a":3})", 0.95, 11, 4, 50},
                                                     {R"({"a":4})", 0.88, 14, 3, 8}};
  return configs;
}

inline double LatencyOffset(int64_t seed) { return seed == 1 ? -0.1 : 0.1; }

// Stores the experiment above with its trials' results; returns its id.
inline std::string FillLatencyFixture(Store& store) {
  ExperimentRecord e;
  e.name = "latency views";
  e.goals_json = R"({"objectives": [{"metric": "val_accuracy", "goal": "maximize"},
                                   {"metric": "latency_ms", "goal": "minimize"}],
                    "constraints": [{"metric": "latency_b1_p99_ms", "min": null, "max": 20}]})";
  std::vector<TrialRow> trials;
  for (const LatencyConfig& c : LatencyConfigs()) {
    for (int seed = 1; seed <= 2; ++seed) {
      TrialRow t;
      t.config_json = c.key;
      t.is_baseline = c.key == "{}";
      t.seed = seed;
      t.spec_json = "{}";
      trials.push_back(t);
    }
  }
  const std::string id = store.CreateExperiment(e, trials, 1);
  for (size_t i = 0; i < trials.size(); ++i) {
    auto t = store.LeaseNextTrial("w", 2, 100000);
    EXPECT_TRUE(t.has_value());
    if (!t) break;
    const LatencyConfig& c = *std::find_if(LatencyConfigs().begin(), LatencyConfigs().end(),
                                           [&](const LatencyConfig& x) { return x.key == t->config_json; });
    const double d = LatencyOffset(t->seed);
    const nlohmann::json result = {{"status", "completed"},
                                   {"val_accuracy", c.accuracy},
                                   {"step_time_ms", {{"median", c.step_ms}}},
                                   {"latency_ms", c.latency_ms + d},
                                   {"latency_p99_ms", c.p99_ms() + d},
                                   {"latency_b1_ms", c.b1_ms() + d},
                                   {"latency_b1_p99_ms", c.b1_p99_ms + d}};
    EXPECT_EQ(store.FinishTrial(t->id, t->attempt, "completed", result.dump(), "", 3), Transition::kApplied);
  }
  return id;
}

// Each trial's latency figures, as `results` has them.
inline std::string LatencyResultsQuery(const std::string& experiment_id) {
  return "SELECT config_json, seed, latency_ms, latency_p99_ms, latency_b1_ms, latency_b1_p99_ms "
         "FROM results WHERE experiment_id = '" +
         experiment_id + "'";
}

// Each config's means and spreads and its place on the latency front.
inline std::string LatencyFrontQuery(const std::string& experiment_id) {
  return "SELECT config_json, seeds_completed, CASE WHEN feasible THEN 1 ELSE 0 END, "
         "CASE WHEN on_front THEN 1 ELSE 0 END, COALESCE(dominated_by, -1), val_accuracy, latency_ms, "
         "latency_ms_std, latency_p99_ms, latency_p99_ms_std, latency_b1_ms, latency_b1_ms_std, "
         "latency_b1_p99_ms, latency_b1_p99_ms_std FROM config_front WHERE experiment_id = '" +
         experiment_id + "'";
}

// `trials`, `configs`: the rows of LatencyResultsQuery and LatencyFrontQuery, columns split.
inline void CheckLatencyViews(const std::vector<std::vector<std::string>>& trials,
                              std::vector<std::vector<std::string>> configs) {
  auto config = [](const std::string& key) {
    return *std::find_if(LatencyConfigs().begin(), LatencyConfigs().end(),
                         [&](const LatencyConfig& x) { return x.key == key; });
  };
  ASSERT_EQ(trials.size(), 2 * LatencyConfigs().size());
  for (const std::vector<std::string>& row : trials) {
    ASSERT_EQ(row.size(), 6u);
    const LatencyConfig c = config(row[0]);
    const double d = LatencyOffset(std::stoll(row[1]));
    EXPECT_NEAR(std::stod(row[2]), c.latency_ms + d, 1e-9) << row[0] << " seed " << row[1];
    EXPECT_NEAR(std::stod(row[3]), c.p99_ms() + d, 1e-9) << row[0] << " seed " << row[1];
    EXPECT_NEAR(std::stod(row[4]), c.b1_ms() + d, 1e-9) << row[0] << " seed " << row[1];
    EXPECT_NEAR(std::stod(row[5]), c.b1_p99_ms + d, 1e-9) << row[0] << " seed " << row[1];
  }

  std::sort(configs.begin(), configs.end());
  ASSERT_EQ(configs.size(), LatencyConfigs().size());
  // config, seeds, feasible, on_front, dominated_by (-1: not a candidate)
  const std::vector<std::vector<std::string>> expected = {{R"({"a":1})", "2", "1", "1", "0"},
                                                          {R"({"a":2})", "2", "1", "0", "1"},
                                                          {R"({"a":3})", "2", "0", "0", "-1"},
                                                          {R"({"a":4})", "2", "1", "1", "0"},
                                                          {"{}", "2", "1", "1", "0"}};
  const double spread = 0.2 / std::sqrt(2.0);  // two seeds 0.2 apart
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::vector<std::string>& row = configs[i];
    ASSERT_EQ(row.size(), 14u);
    EXPECT_EQ(std::vector<std::string>(row.begin(), row.begin() + 5), expected[i]) << "row " << i;
    const LatencyConfig c = config(row[0]);
    EXPECT_NEAR(std::stod(row[6]), c.latency_ms, 1e-9) << row[0];
    EXPECT_NEAR(std::stod(row[8]), c.p99_ms(), 1e-9) << row[0];
    EXPECT_NEAR(std::stod(row[10]), c.b1_ms(), 1e-9) << row[0];
    EXPECT_NEAR(std::stod(row[12]), c.b1_p99_ms, 1e-9) << row[0];
    for (size_t column : {7, 9, 11, 13}) EXPECT_NEAR(std::stod(row[column]), spread, 1e-9) << row[0];
  }

  // The SQL front is the analysis' front on the same means: val_accuracy
  // maximized, latency_ms minimized, among the feasible configs.
  std::vector<size_t> feasible;
  std::vector<std::vector<double>> points;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (configs[i][2] != "1") continue;
    feasible.push_back(i);
    points.push_back({std::stod(configs[i][5]), std::stod(configs[i][6])});
  }
  std::vector<bool> on_front(configs.size(), false);
  for (size_t index : ParetoFront(points, {true, false})) on_front[feasible[index]] = true;
  for (size_t i = 0; i < configs.size(); ++i) {
    EXPECT_EQ(configs[i][3] == "1", on_front[i]) << "row " << i << ": " << configs[i][0];
  }
}

}  // namespace frontier::testing
