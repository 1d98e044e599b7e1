#include "server/store/sqlite_store.h"

#include <filesystem>

#include <sqlite3.h>

#include "search_spaces/metric_catalog.h"
#include "server/store/result_views.h"
#include "tests/server/config_views.h"
#include "tests/server/store_conformance.h"

namespace frontier {
namespace {

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreConformanceTest,
                         ::testing::Values([] { return std::make_unique<SqliteStore>(":memory:"); }),
                         [](const auto&) { return std::string("store"); });

TEST(SqliteStoreTest, FileSurvivesReopenAndMigratesOnce) {
  const auto path = std::filesystem::temp_directory_path() / "frontier_store_test.db";
  std::filesystem::remove(path);
  std::string id;
  {
    SqliteStore store(path.string());
    EXPECT_EQ(store.schema_version(), 9);
    ExperimentRecord e;
    e.name = "persisted";
    TrialRow t;
    t.spec_json = "{}";
    id = store.CreateExperiment(e, {t}, 1);
  }
  SqliteStore again(path.string());
  EXPECT_EQ(again.schema_version(), 9);
  EXPECT_EQ(again.GetExperiment(id)->name, "persisted");
  EXPECT_EQ(again.ListTrials(id).size(), 1u);
  std::filesystem::remove(path);
}

// Rows of one query on a separate connection, every column as text ("" for NULL).
std::vector<std::vector<std::string>> Query(const std::string& path, const std::string& sql,
                                            int flags = SQLITE_OPEN_READWRITE) {
  sqlite3* db = nullptr;
  std::vector<std::vector<std::string>> rows;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << path;
    sqlite3_close(db);
    return rows;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << sqlite3_errmsg(db) << " in " << sql;
  }
  while (stmt != nullptr && sqlite3_step(stmt) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      const unsigned char* text = sqlite3_column_text(stmt, c);
      row.push_back(text ? reinterpret_cast<const char*>(text) : "");
    }
    rows.push_back(row);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return rows;
}

TEST(SqliteStoreTest, ConfigViewsAggregateSeedsAndPlaceTheFront) {
  const auto path = std::filesystem::temp_directory_path() / "frontier_views_test.db";
  std::filesystem::remove(path);
  std::string id;
  {
    SqliteStore store(path.string());
    id = testing::FillConfigFrontFixture(store);
    EXPECT_NE(store.GetExperiment(id)->goals_json.find("peak_memory_mb"), std::string::npos);
  }
  // Read the view with a separate connection, as a user's client would.
  const std::vector<std::vector<std::string>> rows =
      Query(path.string(), testing::ConfigFrontQuery(id), SQLITE_OPEN_READONLY);
  testing::CheckConfigFront(rows);
  std::filesystem::remove(path);
}

TEST(SqliteStoreTest, LatencyMetricsAreViewColumnsAndObjectives) {
  const auto path = std::filesystem::temp_directory_path() / "frontier_latency_views_test.db";
  std::filesystem::remove(path);
  std::string id;
  {
    SqliteStore store(path.string());
    id = testing::FillLatencyFixture(store);
  }
  testing::CheckLatencyViews(Query(path.string(), testing::LatencyResultsQuery(id), SQLITE_OPEN_READONLY),
                             Query(path.string(), testing::LatencyFrontQuery(id), SQLITE_OPEN_READONLY));
  std::filesystem::remove(path);
}

// The results view as migration 3 created it: the metric columns before the latency metrics.
constexpr const char* kMigration3ResultsView = R"sql(CREATE VIEW results AS
SELECT id AS trial_id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, worker_id,
       json_extract(result_json, '$.val_accuracy') AS val_accuracy,
       json_extract(result_json, '$.test_accuracy') AS test_accuracy,
       json_extract(result_json, '$.val_loss') AS val_loss,
       json_extract(result_json, '$.val_iou') AS val_iou,
       json_extract(result_json, '$.test_iou') AS test_iou,
       json_extract(result_json, '$.test_loss') AS test_loss,
       json_extract(result_json, '$.step_time_ms.median') AS median_step_time_ms,
       json_extract(result_json, '$.throughput.samples_per_s') AS throughput,
       json_extract(result_json, '$.mfu') AS mfu,
       json_extract(result_json, '$.peak_memory_mb') AS peak_memory_mb,
       json_extract(result_json, '$.params') AS params,
       json_extract(result_json, '$.threads') AS threads,
       finished_ms
FROM trials WHERE result_json <> '')sql";

// The current views are the catalog's (result_views.h); a database whose
// views predate them (migration 3's results, without the latency columns;
// migration 4's config_front, no stamp) gets them at its next open, at the
// same schema version.
TEST(SqliteStoreTest, ResultViewsFollowTheMetricCatalog) {
  const auto path = std::filesystem::temp_directory_path() / "frontier_catalog_views_test.db";
  std::filesystem::remove(path);
  const std::string stamp = ResultViewsStamp(SqlDialect::kSqlite);
  const std::string front_sql = "SELECT sql FROM sqlite_master WHERE type = 'view' AND name = 'config_front'";
  { SqliteStore store(path.string()); }
  ASSERT_EQ(Query(path.string(), front_sql).size(), 1u);
  EXPECT_NE(Query(path.string(), front_sql)[0][0].find(stamp), std::string::npos);

  std::vector<std::string> columns;
  for (const auto& row : Query(path.string(), "SELECT name FROM pragma_table_info('results')")) {
    columns.push_back(row[0]);
  }
  std::vector<std::string> expected = {"trial_id", "experiment_id", "config_json", "is_baseline", "seed",
                                       "steps",    "state",         "attempt",     "worker_id"};
  for (const MetricInfo* m : SqlMetrics()) expected.emplace_back(m->sql_column);
  expected.push_back("finished_ms");
  EXPECT_EQ(columns, expected);

  Query(path.string(), "DROP VIEW config_front");
  Query(path.string(), Migration4ConfigFrontView(SqlDialect::kSqlite));
  Query(path.string(), "DROP VIEW results");
  Query(path.string(), kMigration3ResultsView);
  ASSERT_EQ(Query(path.string(), front_sql).size(), 1u);
  EXPECT_EQ(Query(path.string(), front_sql)[0][0].find(stamp), std::string::npos);
  const std::string latency_column =
      "SELECT name FROM pragma_table_info('results') WHERE name = 'latency_ms'";
  EXPECT_EQ(Query(path.string(), latency_column).size(), 0u);
  {
    SqliteStore store(path.string());
    EXPECT_EQ(store.schema_version(), 9);
  }
  EXPECT_NE(Query(path.string(), front_sql)[0][0].find(stamp), std::string::npos);
  columns.clear();
  for (const auto& row : Query(path.string(), "SELECT name FROM pragma_table_info('results')")) {
    columns.push_back(row[0]);
  }
  EXPECT_EQ(columns, expected);
  std::filesystem::remove(path);
}

// A store schema version 8 left (before the kernel lab's tables) gains them at its next open, its
// experiments kept; a read-only open refuses it until then.
TEST(SqliteStoreTest, MigrationNineGivesAVersion8StoreTheOpRunTables) {
  const auto path = std::filesystem::temp_directory_path() / "frontier_op_runs_migration_test.db";
  std::filesystem::remove(path);
  std::string id;
  {
    SqliteStore store(path.string());
    ExperimentRecord e;
    e.name = "before";
    TrialRow t;
    t.spec_json = "{}";
    id = store.CreateExperiment(e, {t}, 1);
  }
  Query(path.string(), "DROP TABLE op_candidates");
  Query(path.string(), "DROP TABLE op_runs");
  Query(path.string(), "UPDATE schema_version SET version = 8");
  ASSERT_TRUE(Query(path.string(), "SELECT name FROM sqlite_master WHERE name LIKE 'op_%'").empty());
  EXPECT_THROW(SqliteStore(path.string(), OpenMode::kReadOnly), StoreError);
  {
    SqliteStore store(path.string());
    EXPECT_EQ(store.schema_version(), 9);
    EXPECT_EQ(store.GetExperiment(id)->name, "before");
    OpRunRecord run;
    run.name = "attn-lab";
    run.op = "attention_kernel";
    const std::string run_id = store.CreateOpRun(run);
    OpCandidateRow c;
    c.run_id = run_id;
    c.candidate = "a.cc";
    c.source_hash = "h";
    EXPECT_TRUE(store.RecordOpCandidate(c));
    EXPECT_FALSE(store.RecordOpCandidate(c));
  }
  SqliteStore read_only(path.string(), OpenMode::kReadOnly);
  EXPECT_EQ(read_only.ListOpCandidates(read_only.FindOpRun("attn-lab")->id).size(), 1u);
  std::filesystem::remove(path);
}

TEST(SqliteStoreTest, UnopenablePathIsAStoreError) {
  EXPECT_THROW(SqliteStore("/nonexistent/dir/x.db"), StoreError);
}

}  // namespace
}  // namespace frontier
