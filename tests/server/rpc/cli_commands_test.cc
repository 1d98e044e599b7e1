// The `frontier` commands (server/cli/commands.h) against an in-process
// coordinator: what they print (docs/cli.md) and the exit codes a failed
// call maps to (server/cli/cli.h).
#include "server/cli/commands.h"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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

TEST_F(CliCommandsTest, AnUnreachableServerIsAFailureWithAHint) {
  const std::string address = Address();
  harness_.coordinator().Shutdown();
  Client client(address, {});
  CaptureStderr();
  EXPECT_EQ(ListExperiments(*ServerSource(client), 10, "table"), kCliFailed);
  const std::string message = GetCapturedStderr();
  EXPECT_NE(message.find("(is frontier-server running at " + address + "?)"), std::string::npos) << message;
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
