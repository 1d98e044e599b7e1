// Trials' artifacts over the coordinator's RPCs: a worker holding a lease
// uploads files in chunks (WorkerService.UploadArtifact), hostile chunks get
// a clear status and the coordinator serves on, users list and fetch them
// (ExperimentService.ListArtifacts/ReadArtifact, `frontier artifacts`), and
// the HTML report links them.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/cli/cli.h"
#include "tests/server/cli_run.h"
#include "tests/server/rpc/coordinator_harness.h"

namespace frontier {
namespace {

namespace fs = std::filesystem;

class ArtifactsRpcTest : public ::testing::Test {
 protected:
  ArtifactsRpcTest() : root_(MakeTemp()), harness_({}, root_ + "/store") {}
  ~ArtifactsRpcTest() override { fs::remove_all(root_); }

  static std::string MakeTemp() {
    char dir[] = "/tmp/frontier-artifacts-rpc-XXXXXX";
    return mkdtemp(dir) ? dir : "/tmp";
  }

  void SetUp() override {
    v1::SubmitExperimentRequest submit;
    submit.set_space_yaml(TinySpace());
    v1::SubmitExperimentResponse submitted;
    ASSERT_TRUE(Call(*users_, &v1::ExperimentService::Stub::SubmitExperiment, submit, &submitted).ok());
    experiment_ = submitted.experiment().id();
    v1::RegisterWorkerRequest reg;
    reg.set_device("cpu");
    v1::RegisterWorkerResponse registered;
    ASSERT_TRUE(Call(*workers_, &v1::WorkerService::Stub::RegisterWorker, reg, &registered).ok());
    worker_ = registered.worker_id();
    v1::LeaseTrialRequest lease;
    lease.set_worker_id(worker_);
    ASSERT_TRUE(Call(*workers_, &v1::WorkerService::Stub::LeaseTrial, lease, &leased_).ok());
    ASSERT_TRUE(leased_.has_trial());
  }

  grpc::Status Upload(const std::string& name, int64_t offset, const std::string& data, bool last,
                      int attempt = 0, const std::string& trial = "") {
    v1::UploadArtifactRequest req;
    req.set_worker_id(worker_);
    req.set_trial_id(trial.empty() ? leased_.trial_id() : trial);
    req.set_attempt(attempt == 0 ? leased_.attempt() : attempt);
    req.set_name(name);
    req.set_offset(offset);
    req.set_data(data);
    req.set_last(last);
    v1::UploadArtifactResponse resp;
    return Call(*workers_, &v1::WorkerService::Stub::UploadArtifact, req, &resp);
  }

  std::vector<std::string> Listed() {
    v1::ListArtifactsRequest req;
    req.set_experiment_id(experiment_);
    req.set_trial_id(leased_.trial_id());
    v1::ListArtifactsResponse resp;
    EXPECT_TRUE(Call(*users_, &v1::ExperimentService::Stub::ListArtifacts, req, &resp).ok());
    std::vector<std::string> names;
    for (const auto& a : resp.artifacts()) names.push_back(a.name() + ":" + std::to_string(a.size()));
    return names;
  }

  // `frontier ARGS... --server THIS`: exit code, stdout into *out, stderr into *err.
  int Frontier(std::vector<std::string> args, std::string* out, std::string* err) {
    args.push_back("--server");
    args.push_back("127.0.0.1:" + std::to_string(harness_.coordinator().port()));
    return testing::RunFrontier(std::move(args), out, err);
  }

  std::string root_;
  CoordinatorHarness harness_;
  std::unique_ptr<v1::ExperimentService::Stub> users_ = harness_.UserStub();
  std::unique_ptr<v1::WorkerService::Stub> workers_ = harness_.WorkerStub();
  std::string experiment_, worker_;
  v1::LeaseTrialResponse leased_;
};

TEST_F(ArtifactsRpcTest, ALeaseHoldersChunksAreStoredListedAndFetchedByTheCli) {
  const std::string trace(1500000, 't');  // two chunks of at most 1 MiB
  ASSERT_TRUE(Upload("trace.json", 0, trace.substr(0, 1 << 20), false).ok());
  ASSERT_TRUE(Upload("trace.json", 1 << 20, trace.substr(1 << 20), true).ok());
  ASSERT_TRUE(Upload("plots/loss.csv", 0, "step,loss\n1,0.5\n", true).ok());
  EXPECT_EQ(Listed(), (std::vector<std::string>{"plots/loss.csv:16", "trace.json:1500000"}));

  std::string out, err;
  ASSERT_EQ(Frontier({"artifacts", experiment_, "--trial", leased_.trial_id()}, &out, &err), kCliOk) << err;
  EXPECT_EQ(out, "plots/loss.csv  16\ntrace.json      1500000\n");
  const std::string fetched = root_ + "/fetched";
  ASSERT_EQ(Frontier({"artifacts", experiment_, "--trial", leased_.trial_id(), "--get", "trace.json", "-o", fetched},
                     &out, &err),
            kCliOk)
      << err;
  EXPECT_EQ(out, "wrote " + fetched + "/trace.json (1500000 bytes)\n");
  std::ifstream in(fetched + "/trace.json", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), trace);
  ASSERT_EQ(Frontier({"artifacts", experiment_, "--trial", leased_.trial_id(), "--all", "-o", fetched}, &out, &err),
            kCliOk)
      << err;
  EXPECT_TRUE(fs::is_regular_file(fetched + "/plots/loss.csv"));
  EXPECT_EQ(Frontier({"artifacts", experiment_, "--trial", leased_.trial_id(), "--get", "../../x", "-o", fetched},
                     &out, &err),
            kCliUsage);
  EXPECT_EQ(Frontier({"artifacts", experiment_, "--trial", leased_.trial_id(), "--get", "missing"}, &out, &err),
            kCliNotFound);
  EXPECT_EQ(Frontier({"artifacts", experiment_, "--trial", experiment_ + "-t9999"}, &out, &err), kCliNotFound);
  EXPECT_NE(err.find("has no trial"), std::string::npos) << err;
}

TEST_F(ArtifactsRpcTest, HostileChunksGetAClearStatusAndTheCoordinatorServesOn) {
  grpc::Status s = Upload("../../../etc/cron.d/x", 0, "boom", true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("'..'"), std::string::npos) << s.error_message();
  EXPECT_EQ(Upload("/etc/passwd", 0, "x", true).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = Upload("big", 0, std::string((1 << 20) + 1, 'x'), true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("the limit is 1048576 bytes a chunk"), std::string::npos) << s.error_message();
  EXPECT_EQ(Upload("gap", 5, "x", true).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = Upload("stale", 0, "x", true, leased_.attempt() + 1);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("is not leased to " + worker_), std::string::npos) << s.error_message();
  EXPECT_EQ(Upload("x", 0, "x", true, 0, experiment_ + "-t0002").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Upload("x", 0, "x", true, 0, "../../../../tmp/x").error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  for (const auto& entry : fs::recursive_directory_iterator(root_)) {
    EXPECT_EQ(entry.path().string().rfind(root_ + "/store", 0), 0u) << entry.path();
    EXPECT_FALSE(entry.is_regular_file() && entry.path().filename() != ".attempt") << entry.path() << " was stored";
  }
  EXPECT_TRUE(Listed().empty());
  // Serving on: a good chunk is stored after the bad ones.
  ASSERT_TRUE(Upload("ok.txt", 0, "ok", true).ok());
  EXPECT_EQ(Listed(), std::vector<std::string>{"ok.txt:2"});

  v1::ReadArtifactRequest read;
  read.set_experiment_id(experiment_);
  read.set_trial_id(leased_.trial_id());
  read.set_name("../../../../etc/passwd");
  v1::ReadArtifactResponse resp;
  EXPECT_EQ(Call(*users_, &v1::ExperimentService::Stub::ReadArtifact, read, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  read.set_name("ok.txt");
  read.set_offset(3);
  EXPECT_EQ(Call(*users_, &v1::ExperimentService::Stub::ReadArtifact, read, &resp).error_code(),
            grpc::StatusCode::OUT_OF_RANGE);
}

TEST_F(ArtifactsRpcTest, AnUploadAfterTheResultIsRefusedAndTheStoredFilesStay) {
  ASSERT_TRUE(Upload("trace.json", 0, "{}", true).ok());
  v1::CompleteTrialRequest complete;
  complete.set_worker_id(worker_);
  complete.set_trial_id(leased_.trial_id());
  complete.set_attempt(leased_.attempt());
  complete.set_result_json(ResultLine());
  v1::CompleteTrialResponse completed;
  ASSERT_TRUE(Call(*workers_, &v1::WorkerService::Stub::CompleteTrial, complete, &completed).ok());
  EXPECT_EQ(Upload("late.txt", 0, "x", true).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Listed(), std::vector<std::string>{"trace.json:2"});
}

TEST_F(ArtifactsRpcTest, TheHtmlReportLinksEachTrialsArtifactsOrNamesTheCommand) {
  ASSERT_TRUE(Upload("trace.json", 0, "{}", true).ok());
  v1::GetReportRequest req;
  req.set_experiment_id(experiment_);
  req.set_format("html");
  req.set_artifacts_href("runs/artifacts");
  v1::GetReportResponse resp;
  ASSERT_TRUE(Call(*users_, &v1::ExperimentService::Stub::GetReport, req, &resp).ok());
  const std::string link =
      "<a href=\"runs/artifacts/" + experiment_ + "/" + leased_.trial_id() + "/trace.json\">trace.json</a>";
  EXPECT_NE(resp.content().find(link), std::string::npos);
  req.clear_artifacts_href();
  ASSERT_TRUE(Call(*users_, &v1::ExperimentService::Stub::GetReport, req, &resp).ok());
  EXPECT_NE(resp.content().find("<code>frontier artifacts " + experiment_ + " --trial " + leased_.trial_id() +
                                " --get trace.json</code>"),
            std::string::npos);
}

TEST_F(ArtifactsRpcTest, FrontierProfileWaitsForTheRunAWorkerLeasesAndPrintsItsProfileAndTrace) {
  const std::string trial = leased_.trial_id();
  int code = -1;
  std::string out, err;
  std::thread cli([&] { code = Frontier({"profile", experiment_, "--trial", trial, "--timeout", "60"}, &out, &err); });
  // The worker's side, once the run is queued: it is leased before the experiment's other pending trial.
  v1::GetTrialRequest queued;
  queued.set_experiment_id(experiment_);
  queued.set_trial_id(trial + "-p1");
  v1::Trial pending;
  for (int i = 0; i < 3000 && !Call(*users_, &v1::ExperimentService::Stub::GetTrial, queued, &pending).ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(pending.state(), v1::TRIAL_PENDING);
  EXPECT_EQ(pending.profile_of(), trial);
  v1::LeaseTrialResponse run;
  for (int i = 0; i < 600 && !run.has_trial(); ++i) {
    v1::LeaseTrialRequest lease;
    lease.set_worker_id(worker_);
    lease.set_wait_ms(100);
    ASSERT_TRUE(Call(*workers_, &v1::WorkerService::Stub::LeaseTrial, lease, &run).ok());
  }
  ASSERT_TRUE(run.has_trial());
  EXPECT_EQ(run.trial_id(), trial + "-p1");
  const nlohmann::json spec = nlohmann::json::parse(run.spec_json());
  EXPECT_EQ(spec["profile"]["steps"], 3);
  EXPECT_EQ(spec["trial_id"], run.trial_id());
  leased_ = run;  // Upload sends for the run
  ASSERT_TRUE(Upload("trace.json", 0, "{\"traceEvents\": []}", true).ok());
  const nlohmann::json result = {
      {"event", "result"},
      {"schema", 1},
      {"status", "completed"},
      {"step_time_ms", {{"median", 2.0}}},
      {"profile",
       {{"tool", "libtorch"},
        {"host", "node-7"},
        {"steps", {{"first", 4}, {"count", 3}}},
        {"time_basis", "the training thread's CPU time in the profiled steps"},
        {"coverage", 0.97},
        {"by_bound", {{"compute", 0.8}, {"memory", 0.15}}},
        {"top_operators", {{{"name", "aten::convolution_backward"}, {"class", "compute"}, {"share", 0.6}}}},
        {"trace", "/var/lib/frontier/artifacts/" + run.trial_id() + "/trace.json"}}},
      {"bottleneck", {{"summary", "compute-bound (profile of 3 steps, high confidence)"}}}};
  v1::CompleteTrialRequest complete;
  complete.set_worker_id(worker_);
  complete.set_trial_id(run.trial_id());
  complete.set_attempt(run.attempt());
  complete.set_result_json(result.dump());
  v1::CompleteTrialResponse completed;
  ASSERT_TRUE(Call(*workers_, &v1::WorkerService::Stub::CompleteTrial, complete, &completed).ok());
  cli.join();
  ASSERT_EQ(code, kCliOk) << err;
  EXPECT_NE(out.find("profile run " + run.trial_id() + ": libtorch, 3 steps on node-7\n"), std::string::npos) << out;
  EXPECT_NE(out.find("bottleneck: compute-bound (profile of 3 steps, high confidence)"), std::string::npos) << out;
  EXPECT_NE(out.find("by bound:  compute 80.0%  memory 15.0%"), std::string::npos) << out;
  EXPECT_NE(out.find("aten::convolution_backward"), std::string::npos) << out;
  EXPECT_NE(out.find("trace: frontier artifacts " + experiment_ + " --trial " + run.trial_id() + " --get trace.json"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  trace.json  19\n"), std::string::npos) << out;
  EXPECT_NE(err.find("profile run " + run.trial_id() + " of " + trial + " queued"), std::string::npos) << err;

  // The trial's artifacts name the run; the experiment's trials and counts do not show it; GetTrial does, linked.
  ASSERT_EQ(Frontier({"artifacts", experiment_, "--trial", trial}, &out, &err), kCliOk) << err;
  EXPECT_NE(err.find("profile run " + run.trial_id() + " of " + trial + ": frontier artifacts " + experiment_ +
                     " --trial " + run.trial_id() + "\n"),
            std::string::npos)
      << err;
  v1::ListTrialsRequest list;
  list.set_experiment_id(experiment_);
  v1::ListTrialsResponse trials;
  ASSERT_TRUE(Call(*users_, &v1::ExperimentService::Stub::ListTrials, list, &trials).ok());
  EXPECT_EQ(trials.trials_size(), 2);
  v1::GetTrialRequest get;
  get.set_experiment_id(experiment_);
  get.set_trial_id(run.trial_id());
  v1::Trial got;
  ASSERT_TRUE(Call(*users_, &v1::ExperimentService::Stub::GetTrial, get, &got).ok());
  EXPECT_EQ(got.profile_of(), trial);
  EXPECT_EQ(got.state(), v1::TRIAL_COMPLETED);
}

TEST_F(ArtifactsRpcTest, FrontierProfileSaysWhenNoWorkerRanItAndRefusesWhatItCannotRun) {
  std::string out, err;
  EXPECT_EQ(Frontier({"profile", experiment_, "--trial", leased_.trial_id(), "--timeout", "0"}, &out, &err), kCliFailed);
  EXPECT_NE(err.find("is still waiting for a worker after 0 s; it stays queued"), std::string::npos) << err;
  EXPECT_EQ(Frontier({"profile", experiment_, "--trial", experiment_ + "-t0099"}, &out, &err), kCliNotFound);
  EXPECT_NE(err.find("has no trial"), std::string::npos) << err;
  EXPECT_EQ(Frontier({"profile", experiment_, "--trial", leased_.trial_id(), "--steps", "5000"}, &out, &err),
            kCliInvalid);
  EXPECT_NE(err.find("1 to 1000"), std::string::npos) << err;
}

TEST(ArtifactsRpcWithoutStoreTest, ACoordinatorWithoutAnArtifactStoreSaysSo) {
  CoordinatorHarness harness;
  auto workers = harness.WorkerStub();
  v1::UploadArtifactRequest req;
  req.set_worker_id("worker-0001");
  req.set_trial_id("exp-000001-t0001");
  req.set_attempt(1);
  req.set_name("trace.json");
  v1::UploadArtifactResponse resp;
  const grpc::Status s = Call(*workers, &v1::WorkerService::Stub::UploadArtifact, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("--artifacts-dir"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace frontier
