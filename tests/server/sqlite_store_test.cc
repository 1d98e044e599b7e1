#include "server/store/sqlite_store.h"

#include <filesystem>

#include <sqlite3.h>

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
    EXPECT_EQ(store.schema_version(), 4);
    ExperimentRecord e;
    e.name = "persisted";
    TrialRow t;
    t.spec_json = "{}";
    id = store.CreateExperiment(e, {t}, 1);
  }
  SqliteStore again(path.string());
  EXPECT_EQ(again.schema_version(), 4);
  EXPECT_EQ(again.GetExperiment(id)->name, "persisted");
  EXPECT_EQ(again.ListTrials(id).size(), 1u);
  std::filesystem::remove(path);
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
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, testing::ConfigFrontQuery(id).c_str(), -1, &stmt, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  std::vector<std::vector<std::string>> rows;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      const unsigned char* text = sqlite3_column_text(stmt, c);
      row.push_back(text ? reinterpret_cast<const char*>(text) : "");
    }
    rows.push_back(row);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  testing::CheckConfigFront(rows);
  std::filesystem::remove(path);
}

TEST(SqliteStoreTest, UnopenablePathIsAStoreError) {
  EXPECT_THROW(SqliteStore("/nonexistent/dir/x.db"), StoreError);
}

}  // namespace
}  // namespace frontier
