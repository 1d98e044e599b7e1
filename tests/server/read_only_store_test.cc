// The read commands' stores (--db FILE, --store URL) are opened read-only:
// never migrated or written, and a store whose schema is not this build's is
// refused with a message naming the command that migrates it (store.h
// OpenMode, server/cli/experiment_source.h).
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "server/cli/cli.h"
#include "server/cli/experiment_source.h"
#include "server/scheduler/scheduler.h"
#include "server/store/open_store.h"
#include "server/store/postgres_store.h"
#include "server/store/sqlite_store.h"
#include "tests/server/cli_run.h"
#include "tests/server/fake_clock.h"
#include "tests/server/postgres_server.h"

namespace frontier {
namespace {

// Submits kTwoConfigSpace and completes every trial: an experiment with results.
std::string Populate(Store& store) {
  FakeClock clock;
  Scheduler scheduler(store, clock, SchedulerOptions{});
  const std::string id = scheduler.Submit(testing::kTwoConfigSpace, "tiny.yaml").id;
  const std::string worker = scheduler.RegisterWorker(WorkerRecord{});
  double accuracy = 0.5;
  while (auto trial = scheduler.Lease(worker)) {
    const std::string result = nlohmann::json{{"event", "result"},
                                              {"schema", 1},
                                              {"status", "completed"},
                                              {"val_accuracy", accuracy += 0.1},
                                              {"throughput", 100.0}}
                                   .dump();
    EXPECT_EQ(scheduler.Complete(worker, trial->id, trial->attempt, result), Transition::kApplied);
  }
  scheduler.Tick();
  return id;
}

// A kernel-lab run "attn-lab" with one candidate; returns its id.
std::string AddOpRun(Store& store) {
  OpRunRecord run;
  run.name = "attn-lab";
  run.op = "attention_kernel";
  run.created_ms = 10;
  const std::string id = store.CreateOpRun(run);
  OpCandidateRow c;
  c.run_id = id;
  c.candidate = "tiled.cc";
  c.source_kind = "folder";
  c.source_hash = "h1";
  c.outcome = "timed";
  c.speedup = 1.5;
  EXPECT_TRUE(store.RecordOpCandidate(c));
  return id;
}

// Op runs read from a read-only store; every op-run write is refused and changes nothing.
void ExpectOpRunsReadOnly(Store& store, const std::string& run) {
  ASSERT_TRUE(store.FindOpRun("attn-lab").has_value());
  EXPECT_EQ(store.FindOpRun(run)->name, "attn-lab");
  EXPECT_EQ(store.ListOpRuns(10).size(), 1u);
  ASSERT_EQ(store.ListOpCandidates(run).size(), 1u);
  EXPECT_EQ(store.ListOpCandidates(run)[0].speedup, 1.5);
  OpRunRecord another;
  another.name = "another";
  EXPECT_THROW(store.CreateOpRun(another), StoreError);
  EXPECT_THROW(store.SetOpRunState(run, op_run_state::kStopped, 20), StoreError);
  OpCandidateRow c = store.ListOpCandidates(run)[0];
  c.candidate = "other.cc";
  c.source_hash = "h2";
  EXPECT_THROW(store.RecordOpCandidate(c), StoreError);
  EXPECT_EQ(store.FindOpRun(run)->state, op_run_state::kRunning);
  EXPECT_EQ(store.ListOpRuns(10).size(), 1u);
  EXPECT_EQ(store.ListOpCandidates(run).size(), 1u);
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void SetSchemaVersion(const std::string& path, int version) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string sql = "UPDATE schema_version SET version = " + std::to_string(version);
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
}

std::string OpenError(const std::string& url) {
  try {
    StoreSource(url);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

class ReadOnlySqliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/frontier-ro-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    db_ = dir_ + "/frontier.db";
    {
      SqliteStore store(db_);
      experiment_ = Populate(store);
      op_run_ = AddOpRun(store);
    }  // closed: the WAL is checkpointed into the file
    ASSERT_EQ(::chmod(db_.c_str(), 0444), 0);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_, db_, experiment_, op_run_;
};

TEST_F(ReadOnlySqliteTest, ReadCommandsReadAFileTheyCannotWriteAndLeaveItsBytesAsTheyWere) {
  const std::string before = Bytes(db_);
  std::string out, err;
  EXPECT_EQ(testing::RunFrontier({"status", experiment_, "--db", db_}, &out, &err), kCliOk) << err;
  EXPECT_EQ(out.rfind(experiment_ + "  tiny  completed  2/2 done", 0), 0u) << out;
  EXPECT_EQ(testing::RunFrontier({"trials", experiment_, "--db", db_, "-o", "csv"}, &out, &err), kCliOk) << err;
  EXPECT_NE(out.find(experiment_ + "-t0002"), std::string::npos) << out;
  EXPECT_EQ(testing::RunFrontier({"report", experiment_, "--store", "sqlite:" + db_}, &out, &err), kCliOk) << err;
  EXPECT_NE(out.find("experiment " + experiment_ + " (tiny): 2 configs"), std::string::npos) << out;
  EXPECT_EQ(testing::RunFrontier({"list", "--db", db_}, &out, &err), kCliOk) << err;
  EXPECT_EQ(Bytes(db_), before);
  struct stat st {};
  ASSERT_EQ(::stat(db_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0444u);
}

TEST_F(ReadOnlySqliteTest, AReadOnlyStoreRefusesWrites) {
  const std::string before = Bytes(db_);
  auto store = OpenStore(db_, OpenMode::kReadOnly);
  EXPECT_EQ(store->ListTrials(experiment_).size(), 2u);
  // Root writes a 0444 file; the read-only connection still does not.
  EXPECT_THROW(store->SetExperimentState(experiment_, experiment_state::kCancelled), StoreError);
  EXPECT_THROW(store->RegisterWorker(WorkerRecord{}, 1), StoreError);
  EXPECT_EQ(store->GetExperiment(experiment_)->state, experiment_state::kCompleted);
  ExpectOpRunsReadOnly(*store, op_run_);
  store.reset();
  EXPECT_EQ(Bytes(db_), before);
}

TEST_F(ReadOnlySqliteTest, AnOlderSchemaIsRefusedNamingTheCommandThatMigratesIt) {
  const std::string old = dir_ + "/old.db";
  std::filesystem::copy_file(db_, old);
  ::chmod(old.c_str(), 0644);
  SetSchemaVersion(old, 5);
  ASSERT_EQ(::chmod(old.c_str(), 0444), 0);
  const std::string before = Bytes(old);

  const std::string error = OpenError(old);
  EXPECT_NE(error.find("schema version 5, older than this build's"), std::string::npos) << error;
  EXPECT_NE(error.find("`frontier-server migrate --store " + old + "`"), std::string::npos) << error;
  std::string out, err;
  EXPECT_EQ(testing::RunFrontier({"report", experiment_, "--db", old}, &out, &err), kCliFailed);
  EXPECT_NE(err.find("frontier-server migrate --store " + old), std::string::npos) << err;
  EXPECT_EQ(out, "");
  EXPECT_EQ(Bytes(old), before) << "reading migrated or wrote the store";
  EXPECT_EQ(OpenError(old), error) << "a second read finds it as old as the first";
}

TEST_F(ReadOnlySqliteTest, ANewerSchemaOrAFileThatIsNoStoreIsRefused) {
  const std::string newer = dir_ + "/newer.db";
  std::filesystem::copy_file(db_, newer);
  ::chmod(newer.c_str(), 0644);
  SetSchemaVersion(newer, 999);
  const std::string before = Bytes(newer);
  const std::string error = OpenError(newer);
  EXPECT_NE(error.find("schema version 999, newer than this build's"), std::string::npos) << error;
  EXPECT_NE(error.find("upgrade frontier"), std::string::npos) << error;
  EXPECT_EQ(Bytes(newer), before);

  const std::string other = dir_ + "/other.db";
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(other.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE notes (x TEXT)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  const std::string not_store = OpenError(other);
  EXPECT_NE(not_store.find("is not a Frontier store"), std::string::npos) << not_store;
  EXPECT_EQ(OpenError(dir_ + "/missing.db").find("no store at"), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/missing.db"));
}

TEST(ReadOnlyPostgresTest, SessionsAreReadOnlyAndAnOlderSchemaIsRefused) {
  testing::PostgresServer server;
  server.CreateDatabase("ro");
  const std::string url = server.Url("ro");
  std::string id, op_run;
  {
    PostgresStore store(url, 2);
    id = Populate(store);
    op_run = AddOpRun(store);
  }
  {
    auto store = OpenStore(url, OpenMode::kReadOnly);
    EXPECT_EQ(store->ListTrials(id).size(), 2u);
    EXPECT_EQ(StoreSource(url) != nullptr, true);
    try {
      store->SetExperimentState(id, experiment_state::kCancelled);
      FAIL() << "a read-only store wrote";
    } catch (const StoreError& e) {
      EXPECT_NE(std::string(e.what()).find("read-only transaction"), std::string::npos) << e.what();
    }
    EXPECT_EQ(store->GetExperiment(id)->state, experiment_state::kCompleted);
    ExpectOpRunsReadOnly(*store, op_run);
  }
  int latest = 0;
  {
    PostgresStore store(url, 1);
    latest = store.schema_version();
  }
  const auto set_version = [&](int version) {
    return std::system(("/usr/bin/psql -q -h 127.0.0.1 -p " + std::to_string(server.port()) +
                        " -U postgres -d ro -c 'UPDATE schema_version SET version = " + std::to_string(version) +
                        "' > /dev/null")
                           .c_str());
  };
  ASSERT_EQ(set_version(4), 0);
  const std::string error = OpenError(url);
  EXPECT_NE(error.find("schema version 4, older than this build's " + std::to_string(latest)), std::string::npos)
      << error;
  EXPECT_NE(error.find("frontier-server migrate --store " + url), std::string::npos) << error;
  EXPECT_EQ(OpenError(url), error) << "the read migrated the store";
  ASSERT_EQ(set_version(latest + 1), 0);
  EXPECT_NE(OpenError(url).find("newer than this build's"), std::string::npos);
  ASSERT_EQ(set_version(latest), 0);
  EXPECT_EQ(OpenError(url), "");
}

}  // namespace
}  // namespace frontier
