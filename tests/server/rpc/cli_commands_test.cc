// The `frontier` commands (server/cli/commands.h) against an in-process
// coordinator: what they print (docs/cli.md), the exit codes a failed call
// maps to (server/cli/cli.h), and `frontier watch` naming why an external
// proposer's search paused (docs/proposers.md).
#include "server/cli/commands.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "frontier/v1/proposer.grpc.pb.h"

#include "server/cli/cli.h"
#include "server/cli/read_commands.h"
#include "tests/server/rpc/coordinator_harness.h"

namespace frontier {
namespace {

using ::testing::internal::CaptureStderr;
using ::testing::internal::CaptureStdout;
using ::testing::internal::GetCapturedStderr;
using ::testing::internal::GetCapturedStdout;

class CliCommandsTest : public ::testing::Test {
 protected:
  // The coordinator's log goes to stdout, which the tests read.
  CliCommandsTest() : log_level_(spdlog::get_level()) {
    spdlog::set_level(spdlog::level::off);
    std::filesystem::create_directories(dir_);
    std::ofstream(space_) << TinySpace(2);
  }
  ~CliCommandsTest() override {
    std::filesystem::remove_all(dir_);
    spdlog::set_level(log_level_);
  }

  std::string Address() { return "127.0.0.1:" + std::to_string(harness_.coordinator().port()); }

  // Submits the space file as `frontier submit` does; returns the experiment id.
  std::string SubmitSpace(Client& client) {
    CaptureStdout();
    CaptureStderr();
    EXPECT_EQ(Submit(client, space_, "table"), kCliOk);
    const std::string id = GetCapturedStdout();
    GetCapturedStderr();
    return id.substr(0, id.find('\n'));
  }

  const spdlog::level::level_enum log_level_;
  CoordinatorHarness harness_;
  const std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("cli_commands_test." + std::to_string(::getpid()));
  const std::string space_ = (dir_ / "tiny.yaml").string();
};

TEST_F(CliCommandsTest, SubmitPrintsTheIdAndTheSummaryOnStderr) {
  Client client(Address(), {});
  CaptureStdout();
  CaptureStderr();
  EXPECT_EQ(Submit(client, space_, "table"), kCliOk);
  EXPECT_EQ(GetCapturedStdout(), "exp-000001\n");
  EXPECT_EQ(GetCapturedStderr(), "exp-000001  tiny  running  0/4 done (running 0, failed 0, diverged 0)\n");
}

TEST_F(CliCommandsTest, StatusListAndCancelPrintTheSummaryLine) {
  Client client(Address(), {});
  const std::string id = SubmitSpace(client);
  CaptureStdout();
  EXPECT_EQ(ShowExperiment(client, id, /*cancel=*/false, "table"), kCliOk);
  EXPECT_EQ(ListExperiments(*ServerSource(client), 10, "table"), kCliOk);
  EXPECT_EQ(ShowExperiment(client, id, /*cancel=*/true, "table"), kCliOk);
  EXPECT_EQ(GetCapturedStdout(),
            "exp-000001  tiny  running  0/4 done (running 0, failed 0, diverged 0)\n"
            "exp-000001  tiny  running  0/4 done (running 0, failed 0, diverged 0)\n"
            "exp-000001  tiny  cancelled  4/4 done (running 0, failed 0, diverged 0)\n");
}

TEST_F(CliCommandsTest, StatusAsJsonCountsTrialsByState) {
  Client client(Address(), {});
  const std::string id = SubmitSpace(client);
  CaptureStdout();
  EXPECT_EQ(ShowExperiment(client, id, false, "json"), kCliOk);
  const nlohmann::json status = nlohmann::json::parse(GetCapturedStdout());
  EXPECT_EQ(status["id"], id);
  EXPECT_EQ(status["state"], "running");
  EXPECT_EQ(status["source"], space_);
  EXPECT_EQ(status["trials"]["total"], 4);
  EXPECT_EQ(status["trials"]["pending"], 4);
}

TEST_F(CliCommandsTest, TrialsAsCsvHaveTheDocumentedColumns) {
  Client client(Address(), {});
  const std::string id = SubmitSpace(client);
  CaptureStdout();
  EXPECT_EQ(ListTrials(*ServerSource(client), id, "csv"), kCliOk);
  const std::string csv = GetCapturedStdout();
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "id,config,seed,state,attempt,val_accuracy,test_accuracy,median_step_ms,throughput,mfu,"
            "peak_memory_mb,worker,error,val_iou,test_iou,proposer,rationale");
  EXPECT_NE(csv.find("\nexp-000001-t0003,\"{\"\"stages[*].block\"\":\"\"mbconv\"\"}\",1,pending,0,"),
            std::string::npos)
      << csv;
}

TEST_F(CliCommandsTest, AFailedCallBecomesAMessageAndAnExitCode) {
  Client client(Address(), {});
  CaptureStderr();
  EXPECT_EQ(ShowExperiment(client, "exp-404", false, "table"), kCliNotFound);
  EXPECT_EQ(GetCapturedStderr(), "frontier: experiment exp-404: no experiment 'exp-404'\n");
  std::ofstream(space_) << "name: x\nspace:\n  attention: [flash]\n";
  CaptureStderr();
  EXPECT_EQ(Submit(client, space_, "table"), kCliInvalid);
  EXPECT_EQ(GetCapturedStderr().rfind("frontier: submit " + space_ + ": ", 0), 0u);
  EXPECT_THROW(Submit(client, (dir_ / "missing.yaml").string(), "table"), std::runtime_error);
}

TEST_F(CliCommandsTest, EachSubmitSendsAFreshSubmitId) {
  Client client(Address(), {});
  const std::string first = SubmitSpace(client);
  const std::string second = SubmitSpace(client);
  ASSERT_NE(first, second);  // two invocations, two experiments
  const std::string key = harness_.store().GetExperiment(first)->submit_id;
  EXPECT_EQ(key.rfind("cli-", 0), 0u) << key;
  EXPECT_EQ(key.size(), 36u) << key;
  EXPECT_NE(harness_.store().GetExperiment(second)->submit_id, key);
}

TEST_F(CliCommandsTest, SubmitTriesAnUnreachableServerAFewTimesWithOneSubmitId) {
  const std::string address = Address();
  harness_.coordinator().Shutdown();
  Client client(address, {});
  CaptureStdout();
  CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(Submit(client, space_, "table"), kCliFailed);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  GetCapturedStdout();
  const std::string message = GetCapturedStderr();
  for (int attempt = 2; attempt <= Client::kSubmitTries; ++attempt) {
    EXPECT_NE(message.find("with the same submit_id (" + std::to_string(attempt) + " of 4)"),
              std::string::npos)
        << message;
  }
  EXPECT_NE(message.find("(is frontier-server running at " + address + "?)"), std::string::npos) << message;
  EXPECT_GE(seconds, 3.5);  // 0.5 + 1 + 2 s between the tries, and each retry waits up to 3 s
  EXPECT_LT(seconds, 60.0);
}

TEST_F(CliCommandsTest, AnUnreachableServerIsAFailureWithAHint) {
  const std::string address = Address();
  harness_.coordinator().Shutdown();
  Client client(address, {});
  CaptureStderr();
  EXPECT_EQ(ListExperiments(*ServerSource(client), 10, "table"), kCliFailed);
  const std::string message = GetCapturedStderr();
  EXPECT_NE(message.find("(is frontier-server running at " + address + "?)"), std::string::npos) << message;
}

// What std::cout is given while it stands in for it: a test thread reads
// it while the command writes.
class LockedBuffer final : public std::streambuf {
 public:
  std::string Text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 protected:
  int overflow(int ch) override {
    if (ch == traits_type::eof()) return traits_type::not_eof(ch);
    std::lock_guard<std::mutex> lock(mu_);
    text_ += static_cast<char>(ch);
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_.append(s, static_cast<size_t>(n));
    return n;
  }

 private:
  std::mutex mu_;
  std::string text_;
};

// A Proposer that proposes the one variant of TinySpace and is then finished.
class OneVariantProposer final : public v1::Proposer::Service {
  grpc::Status Propose(grpc::ServerContext*, const v1::ProposeRequest*,
                       v1::ProposeResponse* response) override {
    v1::ProposedConfig* c = response->add_configs();
    (*c->mutable_config()->mutable_choices())["stages[*].block"] = 1;
    c->set_rationale("the only variant");
    response->set_proposer("one-variant");
    response->set_finished(true);
    return grpc::Status::OK;
  }
};

// Polls `done` for up to 30 s.
bool Eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

// `frontier watch` of an external strategy whose proposer is down: the
// experiment keeps running, the watch prints the pause and its reason, and
// once the proposer answers, "search resumed", and follows it to its end.
TEST_F(CliCommandsTest, WatchShowsWhyTheSearchPausedAndWhenItResumed) {
  // A port with no proposer behind it yet: bound once, then freed.
  int port = 0;
  {
    OneVariantProposer probe;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&probe);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_GT(port, 0);
    server->Shutdown();
  }
  const std::string proposer = "127.0.0.1:" + std::to_string(port);
  std::ofstream(space_) << TinySpace(1) << "strategy: {name: external, address: \"" << proposer
                        << "\", batch: 1, deadline_s: 5}\n";
  Client client(Address(), {});
  const std::string id = SubmitSpace(client);
  ASSERT_EQ(id, "exp-000001");

  LockedBuffer out;
  std::streambuf* const cout = std::cout.rdbuf(&out);
  int watched = -1;
  std::thread watch([&] {
    Client watcher(Address(), {});
    watched = Watch(watcher, id);
  });
  const bool paused = Eventually([&] { return out.Text().find("search paused: ") != std::string::npos; });
  EXPECT_EQ(harness_.store().GetExperiment(id)->state, "running") << "paused, not failed";

  // The proposer comes up: the search resumes, proposes the variant, and ends.
  OneVariantProposer up;
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort(proposer, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(&up);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  const bool resumed =
      bound == port && Eventually([&] { return out.Text().find("search resumed") != std::string::npos; });
  std::unique_ptr<v1::WorkerService::Stub> workers = harness_.WorkerStub();
  v1::RegisterWorkerResponse worker;
  ASSERT_TRUE(
      Call(*workers, &v1::WorkerService::Stub::RegisterWorker, v1::RegisterWorkerRequest(), &worker).ok());
  int ran = 0;
  Eventually([&] {  // the baseline's seed, then the variant's once it is proposed
    v1::LeaseTrialRequest req;
    req.set_worker_id(worker.worker_id());
    v1::LeaseTrialResponse lease;
    if (!Call(*workers, &v1::WorkerService::Stub::LeaseTrial, req, &lease).ok() || !lease.has_trial())
      return false;
    v1::CompleteTrialRequest done;
    done.set_worker_id(worker.worker_id());
    done.set_trial_id(lease.trial_id());
    done.set_attempt(lease.attempt());
    done.set_result_json(ResultLine());
    v1::CompleteTrialResponse reply;
    return Call(*workers, &v1::WorkerService::Stub::CompleteTrial, done, &reply).ok() && reply.accepted() &&
           ++ran == 2;
  });
  if (!paused || !resumed || ran < 2) {  // the test has failed already: a cancel ends the watch
    Client canceller(Address(), {});
    CaptureStdout();
    ShowExperiment(canceller, id, /*cancel=*/true, "table");
    GetCapturedStdout();
  }
  watch.join();
  std::cout.rdbuf(cout);
  server->Shutdown();
  const std::string text = out.Text();
  ASSERT_TRUE(paused) << text;
  ASSERT_TRUE(resumed) << "bound " << bound << " for " << port << "\n" << text;
  EXPECT_EQ(ran, 2) << text;
  EXPECT_EQ(watched, kCliOk) << text;

  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), "[0/1] watching " + id);
  const auto at = [&](const std::string& text) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].find(text) != std::string::npos) return i;
    }
    return lines.size();
  };
  const size_t pause = at("] search paused: "), resume = at("] search resumed"),
               end = at("] experiment completed");
  ASSERT_LT(pause, lines.size());
  // The reason, as `frontier status` shows it: where the proposer is and what failed.
  const std::string line = lines[pause];
  EXPECT_EQ(line.substr(line.find("] ") + 2,
                        std::string("search paused: proposer at " + proposer + " unavailable: ").size()),
            "search paused: proposer at " + proposer + " unavailable: ")
      << line;
  // Nothing listens there yet: gRPC's UNAVAILABLE, as grpc_proposer names it, and its message.
  EXPECT_NE(line.find(" unavailable: unreachable: failed to connect"), std::string::npos) << line;
  EXPECT_LT(pause, resume);
  EXPECT_LT(resume, end);
  EXPECT_EQ(lines.back(), "[2/2] experiment completed");
}

TEST(CliCommandsAuthTest, AMissingOrWrongTokenIsDenied) {
  spdlog::set_level(spdlog::level::off);  // the coordinator's log goes to stdout, which the test reads
  ServerSecurity security;
  security.user_token = "user-secret";
  security.worker_token = "worker-secret";
  CoordinatorHarness harness(security);
  const std::string address = "127.0.0.1:" + std::to_string(harness.coordinator().port());
  for (const std::string token : {"", "worker-secret"}) {
    ClientSecurity client_security;
    client_security.token = token;
    Client client(address, client_security);
    CaptureStderr();
    EXPECT_EQ(ListExperiments(*ServerSource(client), 10, "table"), kCliDenied) << token;
    GetCapturedStderr();
  }
  ClientSecurity user;
  user.token = "user-secret";
  Client client(address, user);
  CaptureStdout();
  EXPECT_EQ(ListExperiments(*ServerSource(client), 10, "table"), kCliOk);
  EXPECT_EQ(GetCapturedStdout(), "");  // no experiments yet
  spdlog::set_level(spdlog::level::info);
}

}  // namespace
}  // namespace frontier
