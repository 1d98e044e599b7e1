#include "search_spaces/metric_catalog.h"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace frontier {
namespace {

using nlohmann::json;

TEST(MetricCatalogTest, NamesAndColumnsAreUnique) {
  std::set<std::string_view> names, columns;
  for (const MetricInfo& m : MetricCatalog()) {
    EXPECT_TRUE(names.insert(m.name).second) << m.name;
    EXPECT_FALSE(m.result_path.empty()) << m.name;
    if (!m.sql_column.empty()) {
      EXPECT_TRUE(columns.insert(m.sql_column).second) << m.sql_column;
    }
  }
}

TEST(MetricCatalogTest, SqlAndReportColumnsAreInTheirRecordedOrder) {
  const std::vector<const MetricInfo*> sql = SqlMetrics();
  ASSERT_FALSE(sql.empty());
  for (size_t i = 0; i < sql.size(); ++i)
    EXPECT_EQ(sql[i]->sql_position, static_cast<int>(i)) << sql[i]->name;
  for (const MetricInfo& m : MetricCatalog()) {
    EXPECT_EQ(m.sql_column.empty(), m.sql_position < 0) << m.name;
    if (m.sql_spread) {
      EXPECT_TRUE(m.sql_aggregated) << m.name;
    }
  }
  EXPECT_EQ(sql.front()->name, "val_accuracy");
  const std::vector<const MetricInfo*> reported = ReportedMetrics();
  for (size_t i = 0; i < reported.size(); ++i) {
    EXPECT_EQ(reported[i]->report_position, static_cast<int>(i)) << reported[i]->name;
  }
  EXPECT_EQ(FindMetric("step_time_ms")->sql_column, "median_step_time_ms");
}

TEST(MetricCatalogTest, DirectionsAndRoles) {
  EXPECT_TRUE(FindMetric("val_accuracy")->maximize);
  EXPECT_TRUE(FindMetric("throughput")->maximize);
  EXPECT_FALSE(FindMetric("val_loss")->maximize);
  EXPECT_FALSE(FindMetric("step_time_ms")->maximize);
  EXPECT_FALSE(FindMetric("peak_memory_mb")->maximize);
  EXPECT_EQ(FindMetric("nonexistent"), nullptr);
  for (const MetricInfo& m : MetricCatalog()) {
    // The test split is never seen during training, and what a parity rule
    // compares is a result a space may name.
    if (m.test_split) {
      EXPECT_FALSE(m.in_progress) << m.name;
    }
    if (m.quality) {
      EXPECT_TRUE(m.selectable) << m.name;
    }
  }
  EXPECT_EQ(MetricNames([](const MetricInfo& m) { return m.quality; }),
            (std::vector<std::string>{"val_accuracy", "test_accuracy", "val_iou", "test_iou", "val_loss",
                                      "deploy.float.val_accuracy", "deploy.float.val_iou",
                                      "deploy.torchscript.val_accuracy", "deploy.torchscript.val_iou",
                                      "deploy.int8.val_accuracy", "deploy.int8.val_iou"}));
  EXPECT_EQ(MetricNames([](const MetricInfo& m) { return m.in_progress; }),
            (std::vector<std::string>{"val_accuracy", "val_iou", "val_loss", "throughput", "step_time_ms"}));
}

TEST(MetricCatalogTest, PathsOfCatalogAndOtherNames) {
  EXPECT_EQ(MetricPath("step_time_ms"), (std::vector<std::string>{"step_time_ms", "median"}));
  EXPECT_EQ(MetricPath("throughput"), (std::vector<std::string>{"throughput", "samples_per_s"}));
  EXPECT_EQ(MetricPath("mfu"), (std::vector<std::string>{"mfu"}));
  EXPECT_EQ(MetricPath("a.b.c"), (std::vector<std::string>{"a", "b", "c"}));
  const json result = json::parse(R"({"step_time_ms": {"median": 4.5}, "params": 7, "mfu": "high",
                                      "throughput": {"samples_per_s": null}})");
  EXPECT_EQ(MetricOf(result, "step_time_ms"), 4.5);
  EXPECT_EQ(MetricOf(result, "params"), 7);
  EXPECT_EQ(MetricOf(result, "mfu"), std::nullopt);
  EXPECT_EQ(MetricOf(result, "throughput"), std::nullopt);
  EXPECT_EQ(MetricOf(result, "step_time_ms.median"), 4.5);
  EXPECT_EQ(NumberAt(result, {"step_time_ms"}), std::nullopt);
}

}  // namespace
}  // namespace frontier
