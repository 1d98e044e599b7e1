#include "server/sqlite_store.h"

#include <filesystem>

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
    EXPECT_EQ(store.schema_version(), 3);
    ExperimentRecord e;
    e.name = "persisted";
    TrialRow t;
    t.spec_json = "{}";
    id = store.CreateExperiment(e, {t}, 1);
  }
  SqliteStore again(path.string());
  EXPECT_EQ(again.schema_version(), 3);
  EXPECT_EQ(again.GetExperiment(id)->name, "persisted");
  EXPECT_EQ(again.ListTrials(id).size(), 1u);
  std::filesystem::remove(path);
}

TEST(SqliteStoreTest, UnopenablePathIsAStoreError) {
  EXPECT_THROW(SqliteStore("/nonexistent/dir/x.db"), StoreError);
}

}  // namespace
}  // namespace frontier
