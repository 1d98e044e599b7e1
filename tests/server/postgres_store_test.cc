#include "server/store/postgres_store.h"

#include <atomic>

#include "tests/server/config_views.h"
#include "tests/server/postgres_server.h"
#include "tests/server/store_conformance.h"

namespace frontier {
namespace {

// One server per test process; a fresh database per test.
testing::PostgresServer& Server() {
  static testing::PostgresServer server;
  return server;
}

std::string FreshDatabase() {
  static std::atomic<int> n{0};
  const std::string name = "t" + std::to_string(getpid()) + "_" + std::to_string(n++);
  Server().CreateDatabase(name);
  return Server().Url(name);
}

INSTANTIATE_TEST_SUITE_P(Postgres, StoreConformanceTest,
                         ::testing::Values([] { return std::make_unique<PostgresStore>(FreshDatabase()); }),
                         [](const auto&) { return std::string("store"); });

TEST(PostgresStoreTest, MigratesOnceAndReopens) {
  const std::string url = FreshDatabase();
  std::string id;
  {
    PostgresStore store(url);
    EXPECT_EQ(store.schema_version(), 4);
    ExperimentRecord e;
    e.name = "persisted";
    TrialRow t;
    t.spec_json = "{}";
    id = store.CreateExperiment(e, {t}, 1);
  }
  PostgresStore again(url);
  EXPECT_EQ(again.schema_version(), 4);
  EXPECT_EQ(again.GetExperiment(id)->name, "persisted");
}

TEST(PostgresStoreTest, ResultsViewExtractsMetrics) {
  const std::string url = FreshDatabase();
  PostgresStore store(url);
  ExperimentRecord e;
  e.name = "view";
  TrialRow t;
  t.spec_json = "{}";
  t.config_json = "{}";
  const std::string id = store.CreateExperiment(e, {t}, 1);
  auto leased = store.LeaseNextTrial("w", 2, 1000);
  ASSERT_EQ(store.FinishTrial(leased->id, 1, "completed",
                              R"({"status":"completed","val_accuracy":0.875,"step_time_ms":{"median":12.5},)"
                              R"("throughput":{"samples_per_s":1024},"mfu":0.25})",
                              "", 3),
            Transition::kApplied);
  // Read the view through psql, as a user would.
  const std::string cmd = "/usr/bin/psql -At '" + url +
                          "' -c \"SELECT val_accuracy, median_step_time_ms, throughput FROM results WHERE "
                          "experiment_id = '" + id + "'\"";
  FILE* p = popen(cmd.c_str(), "r");
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof line, p), nullptr);
  pclose(p);
  EXPECT_STREQ(line, "0.875|12.5|1024\n");
}

TEST(PostgresStoreTest, ConfigViewsAggregateSeedsAndPlaceTheFront) {
  const std::string url = FreshDatabase();
  PostgresStore store(url);
  const std::string id = testing::FillConfigFrontFixture(store);
  EXPECT_NE(store.GetExperiment(id)->goals_json.find("peak_memory_mb"), std::string::npos);
  // Through psql, as a user would: unaligned, tuples only, '|' between columns.
  const std::string cmd = "/usr/bin/psql -At '" + url + "' -c \"" + testing::ConfigFrontQuery(id) + "\"";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::vector<std::vector<std::string>> rows;
  char line[4096];
  while (fgets(line, sizeof line, p) != nullptr) {
    std::string text(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    std::vector<std::string> row;
    size_t start = 0;
    for (size_t bar = text.find('|'); bar != std::string::npos; bar = text.find('|', start)) {
      row.push_back(text.substr(start, bar - start));
      start = bar + 1;
    }
    row.push_back(text.substr(start));
    rows.push_back(row);
  }
  pclose(p);
  testing::CheckConfigFront(rows);
}

TEST(PostgresStoreTest, ConnectionLossIsAStoreErrorAndRecovers) {
  const std::string url = FreshDatabase();
  PostgresStore store(url);
  ExperimentRecord e;
  e.name = "blip";
  TrialRow t;
  t.spec_json = "{}";
  const std::string id = store.CreateExperiment(e, {t}, 1);
  Server().Stop();
  EXPECT_THROW(store.GetExperiment(id), StoreError);
  EXPECT_THROW(store.LeaseNextTrial("w", 2, 1000), StoreError);
  Server().Start();
  // The dropped connections are reopened by the next calls; nothing was half-written.
  std::optional<ExperimentRecord> back;
  for (int i = 0; i < 20 && !back; ++i) {
    try {
      back = store.GetExperiment(id);
    } catch (const StoreError&) {
      usleep(100000);
    }
  }
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(store.CountTrials(id).pending, 1);
  EXPECT_TRUE(store.LeaseNextTrial("w", 2, 1000).has_value());
}

TEST(PostgresStoreTest, UnreachableServerIsAStoreError) {
  EXPECT_THROW(PostgresStore("postgresql://postgres@127.0.0.1:1/none"), StoreError);
}

}  // namespace
}  // namespace frontier
