// Profile runs (`frontier profile`, Scheduler::ProfileRun, Store::AddProfileRun):
// a stored trial re-run with profiling on as a linked trial "<trial>-p<N>",
// leased first and also after its experiment ended, that changes no figure of
// the experiment: its trials, counts, state, report and SQL views stay as
// they were. On SQLite and PostgreSQL.
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"
#include "server/report/report.h"
#include "server/rpc/stored_report.h"
#include "server/scheduler/scheduler.h"
#include "server/store/postgres_store.h"
#include "server/store/sqlite_store.h"
#include "tests/server/cli_run.h"
#include "tests/server/fake_clock.h"
#include "tests/server/postgres_server.h"

namespace frontier {
namespace {

using nlohmann::json;

std::string Result(double accuracy, bool profiled) {
  json r = {{"event", "result"},        {"schema", 1},           {"status", "completed"},
            {"val_accuracy", accuracy}, {"throughput", 100.0},   {"step_time_ms", {{"median", 2.0}, {"n", 3}}},
            {"train_time_s", 0.5}};
  if (profiled) r["profile"] = {{"tool", "libtorch"}, {"window_ms", 12.0}, {"by_bound", {{"compute", 0.9}}}};
  return r.dump();
}

class ProfileRunTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "postgres") {
      // One for the suite, stopped and deleted at exit (a pointer never deleted left the server running).
      static testing::PostgresServer server;
      static int databases = 0;
      const std::string db = "profile" + std::to_string(++databases);
      server.CreateDatabase(db);
      store_ = std::make_unique<PostgresStore>(server.Url(db), 2);
    } else {
      char dir[] = "/tmp/frontier-profile-XXXXXX";
      ASSERT_NE(mkdtemp(dir), nullptr);
      dir_ = dir;
      sqlite_path_ = dir_ + "/frontier.db";
      store_ = std::make_unique<SqliteStore>(sqlite_path_);
    }
    scheduler_ = std::make_unique<Scheduler>(*store_, clock_, SchedulerOptions{});
    experiment_ = scheduler_->Submit(testing::kTwoConfigSpace, "tiny.yaml").id;
    worker_ = scheduler_->RegisterWorker(WorkerRecord{});
    double accuracy = 0.5;
    while (auto trial = scheduler_->Lease(worker_)) {
      ASSERT_EQ(scheduler_->Complete(worker_, trial->id, trial->attempt, Result(accuracy += 0.1, false)),
                Transition::kApplied);
    }
    scheduler_->Tick();
    ASSERT_EQ(store_->GetExperiment(experiment_)->state, experiment_state::kCompleted);
  }
  void TearDown() override {
    scheduler_.reset();
    store_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Everything that describes the experiment, as text to compare.
  std::string Figures() {
    std::string out = store_->GetExperiment(experiment_)->state + "\n";
    const TrialCountsRow c = store_->CountTrials(experiment_);
    out += std::to_string(c.total) + " " + std::to_string(c.completed) + " " + std::to_string(c.pending) + "\n";
    for (const TrialRow& t : store_->ListTrials(experiment_)) out += t.id + " " + t.state + "\n";
    ReportRequest request;
    request.experiment_id = experiment_;
    out += RenderStoredReport(*store_, request)->content;
    if (!sqlite_path_.empty()) out += SqlView("SELECT * FROM config_results") + SqlView("SELECT * FROM results");
    return out;
  }
  std::string SqlView(const std::string& sql) {
    sqlite3* db = nullptr;
    EXPECT_EQ(sqlite3_open_v2(sqlite_path_.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
    std::string out;
    sqlite3_exec(
        db, sql.c_str(),
        [](void* text, int n, char** values, char**) {
          for (int i = 0; i < n; ++i) *static_cast<std::string*>(text) += std::string(values[i] ? values[i] : "") + "|";
          *static_cast<std::string*>(text) += "\n";
          return 0;
        },
        &out, nullptr);
    sqlite3_close(db);
    return out;
  }

  std::string dir_, sqlite_path_;
  std::unique_ptr<Store> store_;
  FakeClock clock_;
  std::unique_ptr<Scheduler> scheduler_;
  std::string experiment_, worker_;
};

TEST_P(ProfileRunTest, AFinishedExperimentsTrialIsReRunWithProfilingAndNoFigureChanges) {
  const std::string before = Figures();
  const std::string trial = experiment_ + "-t0002";
  const std::optional<TrialRow> run = scheduler_->ProfileRun(experiment_, trial, 2, "libtorch");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->id, trial + "-p1");
  EXPECT_TRUE(IsProfileRun(run->id));
  EXPECT_EQ(ProfiledTrialOf(run->id), trial);
  EXPECT_EQ(run->state, trial_state::kPending);
  const TrialRow original = *store_->GetTrial(trial);
  EXPECT_EQ(run->config_json, original.config_json);
  EXPECT_EQ(run->seed, original.seed);
  json spec = json::parse(run->spec_json);
  EXPECT_EQ(spec["profile"], json({{"steps", 2}, {"start", -1}, {"tool", "libtorch"}}));
  EXPECT_EQ(spec["trial_id"], run->id);
  json original_spec = json::parse(original.spec_json);
  spec.erase("profile");
  spec.erase("trial_id");
  original_spec.erase("profile");
  original_spec.erase("trial_id");
  EXPECT_EQ(spec, original_spec) << "same config, seed and budget";
  EXPECT_EQ(Figures(), before) << "a queued profile run changed the experiment";

  // A worker leases it although the experiment has ended, and its result is kept with it.
  const std::optional<TrialRow> leased = scheduler_->Lease(worker_);
  ASSERT_TRUE(leased);
  EXPECT_EQ(leased->id, run->id);
  EXPECT_FALSE(scheduler_->Heartbeat(worker_, run->id, leased->attempt).stop);
  EXPECT_FALSE(scheduler_->Progress(worker_, run->id, leased->attempt, R"({"event":"progress","step":1})").stop);
  ASSERT_EQ(scheduler_->Complete(worker_, run->id, leased->attempt, Result(0.99, true)), Transition::kApplied);
  scheduler_->Tick();
  EXPECT_EQ(Figures(), before) << "a profile run's result changed the experiment's figures";
  const std::vector<TrialRow> runs = store_->ListProfileRuns(trial);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].state, trial_state::kCompleted);
  EXPECT_EQ(json::parse(runs[0].result_json)["profile"]["tool"], "libtorch");
  EXPECT_TRUE(store_->ListProfileRuns(experiment_ + "-t0001").empty());
  EXPECT_EQ(scheduler_->ProfileRun(experiment_, trial, 3, "nsys")->id, trial + "-p2");
  EXPECT_EQ(Figures(), before);
}

TEST_P(ProfileRunTest, UnknownTrialsAndBadSettingsAreRefused) {
  EXPECT_FALSE(scheduler_->ProfileRun(experiment_, experiment_ + "-t0099", 3, "libtorch"));
  EXPECT_FALSE(scheduler_->ProfileRun("exp-999999", experiment_ + "-t0001", 3, "libtorch"));
  EXPECT_THROW(scheduler_->ProfileRun(experiment_, experiment_ + "-t0001", 0, "libtorch"), SpecError);
  EXPECT_THROW(scheduler_->ProfileRun(experiment_, experiment_ + "-t0001", 1001, "libtorch"), SpecError);
  EXPECT_THROW(scheduler_->ProfileRun(experiment_, experiment_ + "-t0001", 3, "gdb"), SpecError);
  try {
    scheduler_->ProfileRun(experiment_, experiment_ + "-t0001", 5, "libtorch");  // the trial runs 4 steps
    ADD_FAILURE() << "a spec the trial cannot run was queued";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("profile.steps"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(store_->ListProfileRuns(experiment_ + "-t0001").empty());
  const std::string run = scheduler_->ProfileRun(experiment_, experiment_ + "-t0001", 3, "libtorch")->id;
  EXPECT_FALSE(scheduler_->ProfileRun(experiment_, run, 3, "libtorch")) << "a profile run of a profile run";
  EXPECT_TRUE(store_->ListProfileRuns(run).empty());
}

TEST_P(ProfileRunTest, AProfileRunIsLeasedBeforeARunningExperimentsTrialsAndIsNotNumberedAmongThem) {
  const std::string other = scheduler_->Submit(testing::kTwoConfigSpace, "tiny.yaml").id;
  const std::string run = scheduler_->ProfileRun(experiment_, experiment_ + "-t0001", 3, "libtorch")->id;
  EXPECT_EQ(scheduler_->Lease(worker_)->id, run);
  EXPECT_EQ(scheduler_->Lease(worker_)->id, other + "-t0001");
  // The profiled experiment's next trial would be t0003: runs take no trial number.
  TrialRow more;
  more.config_json = "{}";
  more.spec_json = store_->GetTrial(experiment_ + "-t0001")->spec_json;
  EXPECT_EQ(store_->AddTrials(experiment_, {more}, 1)[0], experiment_ + "-t0003");
  // Cancelling the other experiment leaves the profile run alone.
  EXPECT_TRUE(scheduler_->Cancel(other));
  EXPECT_FALSE(scheduler_->Heartbeat(worker_, run, 1).stop);
}

INSTANTIATE_TEST_SUITE_P(Stores, ProfileRunTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return std::string(info.param); });

TEST(ProfileRunIdTest, TheTrialARunNames) {
  EXPECT_EQ(ProfiledTrialOf("exp-000001-t0003-p12"), "exp-000001-t0003");
  EXPECT_EQ(ProfiledTrialOf("exp-000001-t0003"), "");
  EXPECT_EQ(ProfiledTrialOf("exp-000001-t0003-p"), "");
  EXPECT_EQ(ProfiledTrialOf("exp-000001-t0003-px"), "");
  EXPECT_EQ(ProfiledTrialOf("exp-000001-p1"), "");
  EXPECT_EQ(ExperimentOfTrial("exp-000001-t0003-p1"), "exp-000001");
}

}  // namespace
}  // namespace frontier
