#include "server/store/postgres_store.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "search_spaces/metric_catalog.h"
#include "server/store/result_views.h"
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
    EXPECT_EQ(store.schema_version(), 10);
    ExperimentRecord e;
    e.name = "persisted";
    TrialRow t;
    t.spec_json = "{}";
    id = store.CreateExperiment(e, {t}, 1);
  }
  PostgresStore again(url);
  EXPECT_EQ(again.schema_version(), 10);
  EXPECT_EQ(again.GetExperiment(id)->name, "persisted");
}

// The lines psql prints for `sql` (unaligned, tuples only).
std::vector<std::string> Psql(const std::string& url, const std::string& sql) {
  const std::string cmd = "/usr/bin/psql -At '" + url + "' -c \"" + sql + "\"";
  FILE* p = popen(cmd.c_str(), "r");
  std::vector<std::string> lines;
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run " << cmd;
    return lines;
  }
  char line[4096];
  while (fgets(line, sizeof line, p) != nullptr) {
    std::string text(line);
    if (!text.empty() && text.back() == '\n') text.pop_back();
    lines.push_back(text);
  }
  pclose(p);
  return lines;
}

// Concurrent progress events go in shared statements (the conformance suite
// checks each caller's answer); here, that they did, and that the trials table
// leaves room on its pages for the rows' new versions.
TEST(PostgresStoreTest, ConcurrentProgressEventsShareStatements) {
  const std::string url = FreshDatabase();
  PostgresStore store(url);
  EXPECT_EQ(Psql(url, "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'trials'"),
            std::vector<std::string>{"fillfactor=50"});
  ExperimentRecord e;
  e.name = "batched";
  std::vector<TrialRow> rows(8);
  for (TrialRow& t : rows) t.spec_json = "{}";
  store.CreateExperiment(e, rows, 1);
  std::vector<TrialRow> leased;
  for (int i = 0; i < 8; ++i) leased.push_back(*store.LeaseNextTrial("w" + std::to_string(i), 2000, 500));
  std::atomic<int> ready{0}, held{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 32; ++k) {
    threads.emplace_back([&, k] {
      const TrialRow& t = leased[k % 8];
      ++ready;
      while (ready < 32) std::this_thread::yield();
      held += store.RecordProgress({t.id, t.attempt, k, "{}", 2100}, t.worker_id, 9000, 3000);
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(held, 32);
  const PostgresStore::Batching batching = store.progress_batching();
  EXPECT_GT(batching.calls, batching.statements);   // some statement recorded several events
  EXPECT_EQ(batching.fallbacks, 0);                 // and none failed
  // Reopening does not set the fillfactor again (nor fail).
  PostgresStore again(url);
  EXPECT_EQ(Psql(url, "SELECT array_to_string(reloptions, ',') FROM pg_class WHERE relname = 'trials'"),
            std::vector<std::string>{"fillfactor=50"});
}

// Concurrent completions go in shared statements (the conformance suite
// checks each caller's answer); here, that they did, and that a completion
// the shared statement cannot take (a result that is not UTF-8) fails alone:
// the batch is recorded one by one, and every other completion applies.
TEST(PostgresStoreTest, ConcurrentCompletionsShareStatementsAndABadOneFailsAlone) {
  PostgresStore store(FreshDatabase());
  constexpr int kWorkers = 8;
  // Rounds with the bad result until a batch held it, then without until a batch held several.
  const auto done = [&store] {
    const PostgresStore::Batching b = store.completion_batching();
    return b.fallbacks > 0 && b.calls > b.statements;
  };
  for (int round = 0; round < 40 && !done(); ++round) {
    SCOPED_TRACE(round);
    const bool bad = store.completion_batching().fallbacks == 0;
    ExperimentRecord e;
    e.name = "batched";
    std::vector<TrialRow> rows(2 * kWorkers);
    for (TrialRow& t : rows) t.spec_json = "{}";
    const std::string id = store.CreateExperiment(e, rows, 1);
    std::vector<TrialRow> held;
    for (int i = 0; i < kWorkers; ++i)
      held.push_back(*store.LeaseNextTrial("w" + std::to_string(i), 2000, 500));
    std::atomic<int> ready{0};
    std::vector<Store::FinishedAndLeased> answers(kWorkers);
    std::mutex mu;  // guards refused
    std::vector<std::string> refused;
    std::vector<std::thread> threads;
    for (int k = 0; k < kWorkers; ++k) {
      threads.emplace_back([&, k] {
        ++ready;
        while (ready < kWorkers) std::this_thread::yield();
        const std::string result = bad && k == 0 ? "{\"note\":\"\xff\"}" : "{}";
        try {
          answers[k] =
              store.FinishTrialAndLease(held[k].id, 1, "completed", result, "", 3000, held[k].worker_id, 500);
        } catch (const StoreError& error) {
          std::lock_guard<std::mutex> lock(mu);
          refused.push_back(error.what());
        }
      });
    }
    for (auto& thread : threads) thread.join();
    ASSERT_EQ(refused.size(), bad ? 1u : 0u);
    if (bad) {
      EXPECT_NE(refused[0].find("UTF8"), std::string::npos) << refused[0];
    }
    for (int k = bad ? 1 : 0; k < kWorkers; ++k) {
      EXPECT_EQ(answers[k].finished, Transition::kApplied);
      ASSERT_TRUE(answers[k].next.has_value());
      EXPECT_EQ(answers[k].next->worker_id, held[k].worker_id);
    }
    const TrialCountsRow counts = store.CountTrials(id);
    const int refused_calls = bad ? 1 : 0;
    EXPECT_EQ(counts.completed, kWorkers - refused_calls);
    EXPECT_EQ(counts.running, kWorkers);        // the refused one, still running, and the others' next trials
    store.SetExperimentState(id, "cancelled");  // the next round leases its own trials
  }
  const PostgresStore::Batching batching = store.completion_batching();
  EXPECT_GT(batching.calls, batching.statements);  // some statement finished several
  EXPECT_GT(batching.fallbacks, 0);                // and one with the bad result was recorded one by one
}

// A coordinator's store (OpenMode::kServe) has every connection open when it
// is constructed; any other opens them on first use.
TEST(PostgresStoreTest, TheCoordinatorsStoreOpensEveryConnectionAtOnce) {
  const auto sessions = [](const std::string& url) {
    const std::string database = url.substr(url.rfind('/') + 1);
    return std::stoi(Psql(url, "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = '" + database +
                                   "' AND pid <> pg_backend_pid()")
                         .at(0));
  };
  const std::string lazy_url = FreshDatabase(), serving_url = FreshDatabase();
  PostgresStore lazy(lazy_url, 8, OpenMode::kMigrate);
  EXPECT_EQ(sessions(lazy_url), 1);  // the migration's
  PostgresStore serving(serving_url, 8, OpenMode::kServe);
  EXPECT_EQ(sessions(serving_url), 8 + 2);  // the synchronous pool and the relaxed one (a quarter as many)
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
                          "experiment_id = '" +
                          id + "'\"";
  FILE* p = popen(cmd.c_str(), "r");
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof line, p), nullptr);
  pclose(p);
  EXPECT_STREQ(line, "0.875|12.5|1024\n");
}

// The rows psql prints for `sql`, columns split at '|'.
std::vector<std::vector<std::string>> PsqlRows(const std::string& url, const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& text : Psql(url, sql)) {
    std::vector<std::string> row;
    size_t start = 0;
    for (size_t bar = text.find('|'); bar != std::string::npos; bar = text.find('|', start)) {
      row.push_back(text.substr(start, bar - start));
      start = bar + 1;
    }
    row.push_back(text.substr(start));
    rows.push_back(row);
  }
  return rows;
}

TEST(PostgresStoreTest, ConfigViewsAggregateSeedsAndPlaceTheFront) {
  const std::string url = FreshDatabase();
  PostgresStore store(url);
  const std::string id = testing::FillConfigFrontFixture(store);
  EXPECT_NE(store.GetExperiment(id)->goals_json.find("peak_memory_mb"), std::string::npos);
  // Through psql, as a user would: unaligned, tuples only, '|' between columns.
  testing::CheckConfigFront(PsqlRows(url, testing::ConfigFrontQuery(id)));
}

TEST(PostgresStoreTest, LatencyMetricsAreViewColumnsAndObjectives) {
  const std::string url = FreshDatabase();
  PostgresStore store(url);
  const std::string id = testing::FillLatencyFixture(store);
  testing::CheckLatencyViews(PsqlRows(url, testing::LatencyResultsQuery(id)),
                             PsqlRows(url, testing::LatencyFrontQuery(id)));
}

// The current views are the catalog's (result_views.h); a database whose
// views predate them (no stamp on config_front) gets them at its next open,
// at the same schema version.
TEST(PostgresStoreTest, ResultViewsFollowTheMetricCatalog) {
  const std::string url = FreshDatabase();
  const std::string stamp = ResultViewsStamp(SqlDialect::kPostgres);
  const std::string front_comment = "SELECT obj_description('config_front'::regclass, 'pg_class')";
  { PostgresStore store(url); }
  EXPECT_EQ(Psql(url, front_comment), std::vector<std::string>{stamp});

  std::vector<std::string> expected = {"trial_id", "experiment_id", "config_json", "is_baseline", "seed",
                                       "steps",    "state",         "attempt",     "worker_id"};
  for (const MetricInfo* m : SqlMetrics()) expected.emplace_back(m->sql_column);
  expected.push_back("finished_ms");
  EXPECT_EQ(Psql(url,
                 "SELECT column_name FROM information_schema.columns WHERE table_name = 'results' "
                 "AND table_schema = current_schema() ORDER BY ordinal_position"),
            expected);

  Psql(url, "COMMENT ON VIEW config_front IS NULL");
  EXPECT_EQ(Psql(url, front_comment), std::vector<std::string>{""});
  {
    PostgresStore store(url);
    EXPECT_EQ(store.schema_version(), 10);
  }
  EXPECT_EQ(Psql(url, front_comment), std::vector<std::string>{stamp});
}

// Runs the statements of `sql` with psql from a file, stopping at the first error; true when all ran.
bool PsqlScript(const std::string& url, const std::string& sql) {
  char path[] = "/tmp/frontier-psql-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return false;
  const bool written = write(fd, sql.data(), sql.size()) == static_cast<ssize_t>(sql.size());
  close(fd);
  const int rc = std::system(
      ("/usr/bin/psql -q -v ON_ERROR_STOP=1 '" + url + "' -f " + std::string(path) + " > /dev/null").c_str());
  unlink(path);
  return written && rc == 0;
}

// The results view as migration 3 created it and config_results as migration
// 4 did: the views' columns at schema version 8, before the latency metrics.
constexpr const char* kVersion8Views = R"sql(
CREATE VIEW results AS
SELECT id AS trial_id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, worker_id,
       (result_json::jsonb ->> 'val_accuracy')::float8 AS val_accuracy,
       (result_json::jsonb ->> 'test_accuracy')::float8 AS test_accuracy,
       (result_json::jsonb ->> 'val_loss')::float8 AS val_loss,
       (result_json::jsonb ->> 'val_iou')::float8 AS val_iou,
       (result_json::jsonb ->> 'test_iou')::float8 AS test_iou,
       (result_json::jsonb ->> 'test_loss')::float8 AS test_loss,
       (result_json::jsonb -> 'step_time_ms' ->> 'median')::float8 AS median_step_time_ms,
       (result_json::jsonb -> 'throughput' ->> 'samples_per_s')::float8 AS throughput,
       (result_json::jsonb ->> 'mfu')::float8 AS mfu,
       (result_json::jsonb ->> 'peak_memory_mb')::float8 AS peak_memory_mb,
       (result_json::jsonb ->> 'params')::bigint AS params,
       (result_json::jsonb ->> 'threads')::int AS threads,
       finished_ms
FROM trials WHERE result_json <> '';
CREATE VIEW config_results AS
SELECT t.experiment_id, t.config_json, bool_or(t.is_baseline) AS is_baseline, COUNT(*) AS trials,
       COUNT(*) FILTER (WHERE t.state = 'completed') AS seeds_completed,
       COUNT(*) FILTER (WHERE t.state IN ('failed', 'diverged')) AS trials_failed,
       AVG(r.val_accuracy) AS val_accuracy, stddev_samp(r.val_accuracy) AS val_accuracy_std,
       AVG(r.test_accuracy) AS test_accuracy, stddev_samp(r.test_accuracy) AS test_accuracy_std,
       AVG(r.val_loss) AS val_loss, stddev_samp(r.val_loss) AS val_loss_std,
       AVG(r.val_iou) AS val_iou, stddev_samp(r.val_iou) AS val_iou_std,
       AVG(r.test_iou) AS test_iou, stddev_samp(r.test_iou) AS test_iou_std,
       AVG(r.test_loss) AS test_loss, stddev_samp(r.test_loss) AS test_loss_std,
       AVG(r.median_step_time_ms) AS median_step_time_ms, stddev_samp(r.median_step_time_ms) AS median_step_time_ms_std,
       AVG(r.throughput) AS throughput, stddev_samp(r.throughput) AS throughput_std,
       AVG(r.mfu) AS mfu, stddev_samp(r.mfu) AS mfu_std,
       AVG(r.peak_memory_mb) AS peak_memory_mb, stddev_samp(r.peak_memory_mb) AS peak_memory_mb_std,
       AVG(r.params) AS params
FROM trials t LEFT JOIN results r ON r.trial_id = t.id AND t.state = 'completed'
GROUP BY t.experiment_id, t.config_json;
)sql";

// A store that schema version 8 left, its views without the latency columns
// (results stored then may carry the figures already), reaches the current
// views at its next open: CREATE OR REPLACE cannot put columns before
// finished_ms, so migration 9 drops the views first. A view a user built on
// them stops that migration and leaves the store as it was.
TEST(PostgresStoreTest, MigrationNineGivesAVersion8StoreTheLatencyColumns) {
  const std::string url = FreshDatabase();
  std::string id;
  {
    PostgresStore store(url);
    id = testing::FillLatencyFixture(store);
  }
  ASSERT_TRUE(PsqlScript(url, "DROP VIEW config_front; DROP VIEW config_results; DROP VIEW results;\n" +
                                  std::string(kVersion8Views) +
                                  Migration4ConfigFrontView(SqlDialect::kPostgres) +
                                  "DROP TABLE op_candidates; DROP TABLE op_runs;\n"
                                  "UPDATE schema_version SET version = 8;\n"));
  const std::string has_latency =
      "SELECT COUNT(*) FROM information_schema.columns WHERE table_name = 'results' AND column_name = "
      "'latency_ms' AND table_schema = current_schema()";
  ASSERT_EQ(Psql(url, has_latency), std::vector<std::string>{"0"});

  ASSERT_TRUE(PsqlScript(url, "CREATE VIEW mine AS SELECT trial_id, throughput FROM results;\n"));
  try {
    PostgresStore store(url);
    ADD_FAILURE() << "migration 9 dropped a view another view depends on";
  } catch (const StoreError& e) {
    EXPECT_NE(std::string(e.what()).find("depend"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Psql(url, "SELECT version FROM schema_version"), std::vector<std::string>{"8"});
  EXPECT_EQ(Psql(url, has_latency), std::vector<std::string>{"0"});

  ASSERT_TRUE(PsqlScript(url, "DROP VIEW mine;\n"));
  {
    PostgresStore store(url);
    EXPECT_EQ(store.schema_version(), 10);
    EXPECT_TRUE(store.ListOpRuns(10).empty());  // and migration 10's tables
  }
  EXPECT_EQ(Psql(url, "SELECT obj_description('config_front'::regclass, 'pg_class')"),
            std::vector<std::string>{ResultViewsStamp(SqlDialect::kPostgres)});
  testing::CheckLatencyViews(PsqlRows(url, testing::LatencyResultsQuery(id)),
                             PsqlRows(url, testing::LatencyFrontQuery(id)));
}

// A store schema version 9 left (before the kernel lab's tables) gains them at its next open, its
// experiments kept; a read-only open refuses it until then.
TEST(PostgresStoreTest, MigrationTenGivesAVersion9StoreTheOpRunTables) {
  const std::string url = FreshDatabase();
  std::string id;
  {
    PostgresStore store(url, 1);
    ExperimentRecord e;
    e.name = "before";
    TrialRow t;
    t.spec_json = "{}";
    id = store.CreateExperiment(e, {t}, 1);
  }
  ASSERT_TRUE(PsqlScript(
      url, "DROP TABLE op_candidates; DROP TABLE op_runs; UPDATE schema_version SET version = 9;\n"));
  EXPECT_THROW(PostgresStore(url, 1, OpenMode::kReadOnly), StoreError);
  {
    PostgresStore store(url, 1);
    EXPECT_EQ(store.schema_version(), 10);
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
  PostgresStore read_only(url, 1, OpenMode::kReadOnly);
  EXPECT_EQ(read_only.ListOpCandidates(read_only.FindOpRun("attn-lab")->id).size(), 1u);
  EXPECT_EQ(
      Psql(url, "SELECT indexname FROM pg_indexes WHERE tablename = 'op_candidates' ORDER BY indexname"),
      (std::vector<std::string>{"op_candidates_by_name", "op_candidates_by_run", "op_candidates_by_source",
                                "op_candidates_pkey"}));
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
