// The users' side of the RPC contract (ExperimentService) through a real
// gRPC channel: what a submission creates, the bounds on what the network
// may hand the coordinator (a 1 MiB search-space file, a 1024-character
// source name, a 100-character experiment name), unknown experiments,
// report formats and a watch that follows an experiment to its end;
// idempotent submission (submit_id): one experiment per (owner, key), also
// across a restart and under concurrent retries.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/server/rpc/coordinator_harness.h"

namespace frontier {
namespace {

// A submission with the idempotency key `submit_id` (none when empty) through `users`.
grpc::Status SubmitKeyed(v1::ExperimentService::Stub& users, const std::string& yaml,
                         const std::string& source, const std::string& submit_id,
                         v1::SubmitExperimentResponse* resp) {
  v1::SubmitExperimentRequest req;
  req.set_space_yaml(yaml);
  req.set_source_name(source);
  req.set_submit_id(submit_id);
  return users.SubmitExperiment(CoordinatorHarness::Context().get(), req, resp);
}

class ExperimentServiceTest : public ::testing::Test {
 protected:
  ExperimentServiceTest() : users_(harness_.UserStub()), workers_(harness_.WorkerStub()) {}

  grpc::Status Submit(const std::string& yaml, const std::string& source,
                      v1::SubmitExperimentResponse* resp) {
    return SubmitKeyed(*users_, yaml, source, "", resp);
  }

  // Leases and completes every pending trial as one worker.
  void RunAllTrials() {
    v1::RegisterWorkerRequest reg;
    v1::RegisterWorkerResponse worker;
    ASSERT_TRUE(workers_->RegisterWorker(CoordinatorHarness::Context().get(), reg, &worker).ok());
    while (true) {
      v1::LeaseTrialRequest req;
      req.set_worker_id(worker.worker_id());
      v1::LeaseTrialResponse lease;
      ASSERT_TRUE(workers_->LeaseTrial(CoordinatorHarness::Context().get(), req, &lease).ok());
      if (!lease.has_trial()) return;
      v1::CompleteTrialRequest done;
      done.set_worker_id(worker.worker_id());
      done.set_trial_id(lease.trial_id());
      done.set_attempt(lease.attempt());
      done.set_result_json(ResultLine());
      v1::CompleteTrialResponse resp;
      ASSERT_TRUE(workers_->CompleteTrial(CoordinatorHarness::Context().get(), done, &resp).ok());
      ASSERT_TRUE(resp.accepted()) << resp.reason();
    }
  }

  CoordinatorHarness harness_;
  std::unique_ptr<v1::ExperimentService::Stub> users_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

TEST_F(ExperimentServiceTest, SubmitCreatesTheBaselineAndVariantsAtEverySeed) {
  v1::SubmitExperimentResponse resp;
  const grpc::Status s = Submit(TinySpace(2), "tiny.yaml", &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const v1::Experiment& e = resp.experiment();
  EXPECT_EQ(e.name(), "tiny");
  EXPECT_EQ(e.state(), v1::EXPERIMENT_RUNNING);
  EXPECT_EQ(e.source_name(), "tiny.yaml");
  EXPECT_EQ(e.counts().total(), 4);
  EXPECT_EQ(e.counts().pending(), 4);
  EXPECT_TRUE(e.space_yaml().empty());  // only GetExperiment returns the file

  v1::GetExperimentRequest get;
  get.set_experiment_id(e.id());
  v1::Experiment got;
  ASSERT_TRUE(users_->GetExperiment(CoordinatorHarness::Context().get(), get, &got).ok());
  EXPECT_EQ(got.space_yaml(), TinySpace(2));
  v1::ListTrialsRequest list;
  list.set_experiment_id(e.id());
  v1::ListTrialsResponse trials;
  ASSERT_TRUE(users_->ListTrials(CoordinatorHarness::Context().get(), list, &trials).ok());
  ASSERT_EQ(trials.trials_size(), 4);
  EXPECT_TRUE(trials.trials(0).is_baseline());
  EXPECT_FALSE(trials.trials(0).spec_json().empty());
  v1::ListExperimentsRequest all;
  v1::ListExperimentsResponse experiments;
  ASSERT_TRUE(users_->ListExperiments(CoordinatorHarness::Context().get(), all, &experiments).ok());
  ASSERT_EQ(experiments.experiments_size(), 1);
  EXPECT_EQ(experiments.experiments(0).id(), e.id());
}

TEST_F(ExperimentServiceTest, ASubmissionWithoutASourceNameIsNamedSubmitted) {
  v1::SubmitExperimentResponse resp;
  ASSERT_TRUE(Submit(TinySpace(), "", &resp).ok());
  EXPECT_EQ(resp.experiment().source_name(), "<submitted>");
}

TEST_F(ExperimentServiceTest, ASearchSpaceFileOfUpTo1MiBIsAccepted) {
  std::string yaml = TinySpace() + "# ";
  yaml += std::string((1 << 20) - yaml.size() - 1, 'x') + "\n";
  ASSERT_EQ(yaml.size(), size_t{1} << 20);
  v1::SubmitExperimentResponse resp;
  const grpc::Status s = Submit(yaml, "big.yaml", &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.experiment().counts().total(), 2);
}

TEST_F(ExperimentServiceTest, ASearchSpaceFileOverOneMiBIsRejected) {
  std::string yaml = TinySpace() + "# ";
  yaml += std::string((1 << 20) - yaml.size(), 'x') + "\n";
  ASSERT_EQ(yaml.size(), (size_t{1} << 20) + 1);
  v1::SubmitExperimentResponse resp;
  const grpc::Status s = Submit(yaml, "big.yaml", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "search-space file of 1048577 bytes; the limit is 1 MiB");
  EXPECT_TRUE(harness_.store().ListExperiments(10).empty());
}

TEST_F(ExperimentServiceTest, ASourceNameOfUpTo1024CharactersIsAccepted) {
  v1::SubmitExperimentResponse resp;
  const std::string source(1024, 's');
  ASSERT_TRUE(Submit(TinySpace(), source, &resp).ok());
  EXPECT_EQ(resp.experiment().source_name(), source);
}

TEST_F(ExperimentServiceTest, ALongerSourceNameIsRejected) {
  v1::SubmitExperimentResponse resp;
  const grpc::Status s = Submit(TinySpace(), std::string(1025, 's'), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "source_name: longer than 1024 characters");
  EXPECT_TRUE(harness_.store().ListExperiments(10).empty());
}

TEST_F(ExperimentServiceTest, ExperimentNamesHaveAtMost100Characters) {
  v1::SubmitExperimentResponse resp;
  const std::string longest(100, 'n');
  ASSERT_TRUE(Submit(TinySpace(1, longest), "names.yaml", &resp).ok());
  EXPECT_EQ(resp.experiment().name(), longest);
  const grpc::Status s = Submit(TinySpace(1, longest + "n"), "names.yaml", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("at most 100"), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().rfind("names.yaml:", 0), 0u) << s.error_message();  // says where
  EXPECT_EQ(harness_.store().ListExperiments(10).size(), 1u);
}

TEST_F(ExperimentServiceTest, AnInvalidSearchSpaceIsAnInvalidArgument) {
  v1::SubmitExperimentResponse resp;
  const grpc::Status s = Submit("name: x\nspace:\n  attention: [flash]\n", "bad.yaml", &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("bad.yaml:", 0), 0u) << s.error_message();
}

TEST_F(ExperimentServiceTest, AnUnknownExperimentIsNotFound) {
  const std::string id = "exp-999999";
  std::vector<std::pair<const char*, grpc::Status>> calls;
  {
    v1::GetExperimentRequest req;
    req.set_experiment_id(id);
    v1::Experiment resp;
    calls.emplace_back("GetExperiment",
                       users_->GetExperiment(CoordinatorHarness::Context().get(), req, &resp));
  }
  {
    v1::CancelExperimentRequest req;
    req.set_experiment_id(id);
    v1::Experiment resp;
    calls.emplace_back("CancelExperiment",
                       users_->CancelExperiment(CoordinatorHarness::Context().get(), req, &resp));
  }
  {
    v1::ListTrialsRequest req;
    req.set_experiment_id(id);
    v1::ListTrialsResponse resp;
    calls.emplace_back("ListTrials", users_->ListTrials(CoordinatorHarness::Context().get(), req, &resp));
  }
  {
    v1::GetReportRequest req;
    req.set_experiment_id(id);
    v1::GetReportResponse resp;
    calls.emplace_back("GetReport", users_->GetReport(CoordinatorHarness::Context().get(), req, &resp));
  }
  {
    v1::WatchExperimentRequest req;
    req.set_experiment_id(id);
    auto ctx = CoordinatorHarness::Context();
    auto reader = users_->WatchExperiment(ctx.get(), req);
    v1::ExperimentEvent event;
    EXPECT_FALSE(reader->Read(&event));
    calls.emplace_back("WatchExperiment", reader->Finish());
  }
  for (const auto& [rpc, status] : calls) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << rpc;
    EXPECT_EQ(status.error_message(), "no experiment 'exp-999999'") << rpc;
  }
}

TEST_F(ExperimentServiceTest, ReportsComeInEveryFormatAndAnUnknownOneIsRejected) {
  v1::SubmitExperimentResponse submitted;
  ASSERT_TRUE(Submit(TinySpace(), "tiny.yaml", &submitted).ok());
  RunAllTrials();
  const std::vector<std::pair<std::string, std::string>> formats = {{"", "application/json"},
                                                                    {"json", "application/json"},
                                                                    {"table", "text/plain"},
                                                                    {"csv", "text/csv"},
                                                                    {"html", "text/html"}};
  for (const auto& [format, content_type] : formats) {
    v1::GetReportRequest req;
    req.set_experiment_id(submitted.experiment().id());
    req.set_format(format);
    v1::GetReportResponse resp;
    const grpc::Status s = users_->GetReport(CoordinatorHarness::Context().get(), req, &resp);
    ASSERT_TRUE(s.ok()) << format << ": " << s.error_message();
    EXPECT_EQ(resp.content_type(), content_type) << format;
    EXPECT_FALSE(resp.content().empty()) << format;
  }
  v1::GetReportRequest req;
  req.set_experiment_id(submitted.experiment().id());
  req.set_format("pdf");
  v1::GetReportResponse resp;
  const grpc::Status s = users_->GetReport(CoordinatorHarness::Context().get(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "unknown report format 'pdf'; expected json, table, csv or html");
}

TEST_F(ExperimentServiceTest, AWatchFollowsTheExperimentToItsEnd) {
  v1::SubmitExperimentResponse submitted;
  ASSERT_TRUE(Submit(TinySpace(), "tiny.yaml", &submitted).ok());
  const std::string id = submitted.experiment().id();
  v1::WatchExperimentRequest req;
  req.set_experiment_id(id);
  auto ctx = CoordinatorHarness::Context();
  auto reader = users_->WatchExperiment(ctx.get(), req);
  v1::ExperimentEvent event;
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.message(), "watching " + id);
  EXPECT_EQ(event.experiment().counts().total(), 2);
  RunAllTrials();
  v1::ExperimentEvent last;
  while (reader->Read(&event)) last = event;
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(last.message(), "experiment completed");
  EXPECT_EQ(last.experiment().state(), v1::EXPERIMENT_COMPLETED);
  EXPECT_EQ(last.experiment().counts().completed(), 2);
}

TEST_F(ExperimentServiceTest, TheSameSubmitIdTwiceCreatesOneExperiment) {
  v1::SubmitExperimentResponse first, again;
  ASSERT_TRUE(SubmitKeyed(*users_, TinySpace(2), "tiny.yaml", "run-1:a_b.c", &first).ok());
  // A retry after a lost reply: the same answer, nothing created, its space not read again.
  const grpc::Status s = SubmitKeyed(*users_, TinySpace(1, "other"), "other.yaml", "run-1:a_b.c", &again);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(again.experiment().id(), first.experiment().id());
  EXPECT_EQ(again.experiment().name(), "tiny");
  EXPECT_EQ(again.experiment().source_name(), "tiny.yaml");
  EXPECT_EQ(again.experiment().counts().total(), 4);
  EXPECT_EQ(harness_.store().ListExperiments(10).size(), 1u);
  EXPECT_EQ(harness_.store().ListTrials(first.experiment().id()).size(), 4u);
  EXPECT_EQ(harness_.store().GetExperiment(first.experiment().id())->submit_id, "run-1:a_b.c");
  // Another key, or none, is another experiment.
  ASSERT_TRUE(SubmitKeyed(*users_, TinySpace(), "tiny.yaml", "run-2", &again).ok());
  EXPECT_NE(again.experiment().id(), first.experiment().id());
  ASSERT_TRUE(Submit(TinySpace(), "tiny.yaml", &again).ok());
  ASSERT_TRUE(Submit(TinySpace(), "tiny.yaml", &again).ok());
  EXPECT_EQ(harness_.store().ListExperiments(10).size(), 4u);
}

TEST_F(ExperimentServiceTest, ConcurrentSubmitsWithOneSubmitIdCreateOneExperiment) {
  constexpr int kClients = 6;
  std::vector<std::string> ids(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      auto users = harness_.UserStub();
      v1::SubmitExperimentResponse resp;
      const grpc::Status s = SubmitKeyed(*users, TinySpace(), "tiny.yaml", "retried", &resp);
      ids[i] = s.ok() ? resp.experiment().id() : "failed: " + s.error_message();
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 1u) << ids[0];
  EXPECT_EQ(harness_.store().ListExperiments(10).size(), 1u);
}

TEST_F(ExperimentServiceTest, ASubmitIdOfAnotherFormIsAnInvalidArgument) {
  for (const std::string& id :
       {std::string(129, 'k'), std::string("with space"), std::string("a/b"), std::string("caf\xc3\xa9"),
        std::string("tab\t"), std::string("latin1-\xe9")}) {
    v1::SubmitExperimentResponse resp;
    const grpc::Status s = SubmitKeyed(*users_, TinySpace(), "tiny.yaml", id, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << id;
    EXPECT_EQ(s.error_message().rfind("submit_id", 0), 0u) << s.error_message();
    EXPECT_NE(s.error_message().find("at most 128 characters of [A-Za-z0-9._:-]"), std::string::npos);
    EXPECT_EQ(s.error_message().find("caf"), std::string::npos);  // no raw bytes of a bad key
    EXPECT_EQ(s.error_message().find('\n'), std::string::npos);
  }
  EXPECT_TRUE(harness_.store().ListExperiments(10).empty());
  v1::SubmitExperimentResponse resp;
  EXPECT_TRUE(SubmitKeyed(*users_, TinySpace(), "tiny.yaml", std::string(128, 'k'), &resp).ok());
}

// A file of named users and the folder it is in, removed at the end.
class UserFile {
 public:
  UserFile() {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "tokens") << "alice user " << kAlice << "\nbob user " << kBob << "\n";
  }
  ~UserFile() { std::filesystem::remove_all(dir_); }
  ServerSecurity Security() const {
    ServerSecurity s;
    s.users = std::make_shared<TokenTable>((dir_ / "tokens").string());
    return s;
  }
  static constexpr const char* kAlice = "alice-token-0123456789";
  static constexpr const char* kBob = "bob-token-0123456789ab";

 private:
  const std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("submit_id_test." + std::to_string(::getpid()));
};

TEST(SubmitIdTest, TheSameSubmitIdOfTwoOwnersIsTwoExperiments) {
  UserFile users;
  CoordinatorHarness h(users.Security());
  v1::SubmitExperimentResponse alice, bob, alice_again;
  ASSERT_TRUE(SubmitKeyed(*h.UserStub(UserFile::kAlice), TinySpace(), "t.yaml", "k", &alice).ok());
  ASSERT_TRUE(SubmitKeyed(*h.UserStub(UserFile::kBob), TinySpace(), "t.yaml", "k", &bob).ok());
  ASSERT_TRUE(SubmitKeyed(*h.UserStub(UserFile::kAlice), TinySpace(), "t.yaml", "k", &alice_again).ok());
  EXPECT_NE(alice.experiment().id(), bob.experiment().id());
  EXPECT_EQ(alice_again.experiment().id(), alice.experiment().id());
  EXPECT_EQ(h.store().GetExperiment(bob.experiment().id())->owner, "bob");
  EXPECT_EQ(h.store().ListExperiments(10).size(), 2u);
}

TEST(SubmitIdTest, ASubmitIdOutlivesACoordinatorRestart) {
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("submit_id_restart." + std::to_string(::getpid()) + ".db");
  std::string id;
  {
    CoordinatorHarness before({}, "", file.string());
    v1::SubmitExperimentResponse resp;
    ASSERT_TRUE(SubmitKeyed(*before.UserStub(), TinySpace(), "t.yaml", "k", &resp).ok());
    id = resp.experiment().id();
  }
  {
    CoordinatorHarness after({}, "", file.string());
    v1::SubmitExperimentResponse resp;
    const grpc::Status s = SubmitKeyed(*after.UserStub(), TinySpace(), "t.yaml", "k", &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(resp.experiment().id(), id);
    EXPECT_EQ(resp.experiment().counts().total(), 2);
    EXPECT_EQ(after.store().ListExperiments(10).size(), 1u);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file.string() + suffix);
}

}  // namespace
}  // namespace frontier
