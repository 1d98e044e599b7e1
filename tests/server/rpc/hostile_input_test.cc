// Hostile requests to a running coordinator (issue 14): every one is refused
// (INVALID_ARGUMENT with the reader's one-line message, or a result not
// recorded), nothing is stored, and the coordinator goes on serving. The
// readers' own tests are tests/search_spaces/input_bounds_test.cc and
// tests/worker/trial_process_test.cc; docs/hardening.md lists the bounds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "search_spaces/search_space.h"
#include "tests/server/rpc/coordinator_harness.h"

namespace frontier {
namespace {

using Users = v1::ExperimentService::Stub;
using Workers = v1::WorkerService::Stub;

// What ParseSearchSpace says about `yaml`, as the coordinator must answer.
std::string ParserMessage(const std::string& yaml, const std::string& source) {
  try {
    ParseSearchSpace(yaml, source);
  } catch (const SpaceError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::vector<std::string> HostileSpaces() {
  std::string laughs = "x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 9; ++i) {
    laughs += "x" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) laughs += (k ? ", *a" : "*a") + std::to_string(i - 1);
    laughs += "]\n";
  }
  std::string dashes;
  for (int i = 0; i < 3000; ++i) dashes += "- ";
  return {"a: &a [*a]\n",                                    // the dozen bytes that killed the server
          "name: x\nbaseline: &b {arch: *b}\n",              // the same, inside the baseline
          laughs,                                            // 10^9 values through aliases
          std::string(kMaxSpaceBytes, '['),                  // a megabyte of brackets
          dashes + "x\n",                                    // deep block nesting
          std::string("name: t\0\n", 9),                     // a NUL byte
          "name: t\nrepeats: 99999999999999999999999\n",     // an integer out of range
          "name: t\nparity: {margin: 1e999}\n",              // a float out of range
          "name: " + std::string(300000, 'n') + "\n"};       // a huge name, quoted in the message
}

class HostileInputTest : public ::testing::Test {
 protected:
  HostileInputTest() : users_(harness_.UserStub()), workers_(harness_.WorkerStub()) {}

  grpc::Status Submit(const std::string& yaml, v1::SubmitExperimentResponse* response,
                      const std::string& source = "hostile.yaml") {
    v1::SubmitExperimentRequest req;
    req.set_space_yaml(yaml);
    req.set_source_name(source);
    return Call(*users_, &Users::SubmitExperiment, req, response);
  }

  size_t Experiments() {
    v1::ListExperimentsResponse response;
    EXPECT_TRUE(Call(*users_, &Users::ListExperiments, v1::ListExperimentsRequest(), &response).ok());
    return static_cast<size_t>(response.experiments_size());
  }

  // A worker holding the lease of a trial of a fresh experiment.
  std::pair<std::string, v1::LeaseTrialResponse> LeasedTrial() {
    v1::SubmitExperimentResponse submitted;
    EXPECT_TRUE(Submit(TinySpace(), &submitted).ok());
    v1::RegisterWorkerRequest reg;
    reg.set_host("h");
    reg.set_device("cpu");
    v1::RegisterWorkerResponse registered;
    EXPECT_TRUE(Call(*workers_, &Workers::RegisterWorker, reg, &registered).ok());
    v1::LeaseTrialRequest lease;
    lease.set_worker_id(registered.worker_id());
    v1::LeaseTrialResponse leased;
    EXPECT_TRUE(Call(*workers_, &Workers::LeaseTrial, lease, &leased).ok());
    EXPECT_FALSE(leased.trial_id().empty());
    return {registered.worker_id(), leased};
  }

  CoordinatorHarness harness_;
  std::unique_ptr<Users> users_;
  std::unique_ptr<Workers> workers_;
};

TEST_F(HostileInputTest, EveryHostileSpaceIsRefusedWithTheParsersMessageAndNothingStored) {
  for (const std::string& yaml : HostileSpaces()) {
    v1::SubmitExperimentResponse response;
    const grpc::Status s = Submit(yaml, &response);
    const std::string expected = ParserMessage(yaml, "hostile.yaml");
    ASSERT_NE(expected, "(accepted)") << yaml.substr(0, 80);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << expected;
    EXPECT_EQ(s.error_message(), expected);
    EXPECT_LT(s.error_message().size(), 1200u);
    EXPECT_EQ(s.error_message().find('\n'), std::string::npos);
  }
  EXPECT_EQ(Experiments(), 0u);
  v1::SubmitExperimentResponse response;
  EXPECT_TRUE(Submit(TinySpace(), &response).ok()) << "the coordinator stopped serving";
  EXPECT_EQ(Experiments(), 1u);
}

// space_yaml and source_name are bytes on the wire: text that is not UTF-8
// reaches the coordinator (a proto3 string would be refused by protobuf's
// parser inside gRPC, with its own message) and is refused with ours.
TEST_F(HostileInputTest, ASpaceThatIsNotUtf8GetsTheParsersMessage) {
  const std::string yaml = TinySpace() + "# caf\xe9\n";
  v1::SubmitExperimentResponse response;
  const grpc::Status s = Submit(yaml, &response, "latin1.yaml");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), ParserMessage(yaml, "latin1.yaml"));
  EXPECT_EQ(s.error_message().rfind("latin1.yaml:", 0), 0u) << s.error_message();
  EXPECT_NE(
      s.error_message().find(": byte " + std::to_string(yaml.size() - 2) + ": invalid UTF-8 (byte 0xe9)"),
      std::string::npos)
      << s.error_message();
  EXPECT_EQ(Experiments(), 0u);
  EXPECT_TRUE(Submit(TinySpace(), &response).ok()) << "the coordinator stopped serving";
}

TEST_F(HostileInputTest, ASourceNameThatIsNotOneLineOfUtf8IsRefused) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"caf\xe9.yaml", "source_name: byte 3: invalid UTF-8 (byte 0xe9); the text must be UTF-8"},
      {std::string("a\0b.yaml", 8), "source_name: byte 1: NUL byte; the text must not contain NUL"},
      {"a\nb.yaml", "source_name: byte 1: control character 0x0a; the name must be one line of text"},
      {"tab\t.yaml", "source_name: byte 3: control character 0x09; the name must be one line of text"},
      {"del\x7f.yaml", "source_name: byte 3: control character 0x7f; the name must be one line of text"}};
  for (const auto& [source, message] : refused) {
    v1::SubmitExperimentResponse response;
    const grpc::Status s = Submit(TinySpace(), &response, source);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << message;
    EXPECT_EQ(s.error_message(), message);
  }
  EXPECT_EQ(Experiments(), 0u);
  v1::SubmitExperimentResponse response;
  ASSERT_TRUE(Submit(TinySpace(), &response, "caf\xc3\xa9.yaml").ok()) << "the coordinator stopped serving";
  EXPECT_EQ(response.experiment().source_name(), "caf\xc3\xa9.yaml");
  EXPECT_EQ(Experiments(), 1u);
}

// Results and progress events nested a hundred thousand deep (every deep
// copy or dump of them would overflow the stack) are refused; the trial's
// lease stays with its worker, which can still report a real result.
TEST_F(HostileInputTest, DeeplyNestedResultsAndEventsAreRefused) {
  const auto [worker, lease] = LeasedTrial();
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string deep_result = R"({"event": "result", "status": "completed", "x": )" + deep + "}";

  v1::ReportProgressRequest progress;
  progress.set_worker_id(worker);
  progress.set_trial_id(lease.trial_id());
  progress.set_attempt(lease.attempt());
  progress.set_event_json(R"({"event": "progress", "step": 1, "x": )" + deep + "}");
  v1::ReportProgressResponse progressed;
  grpc::Status s = Call(*workers_, &Workers::ReportProgress, progress, &progressed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "event_json: line 1 (byte 101): nested deeper than 64 levels");

  v1::CompleteTrialRequest complete;
  complete.set_worker_id(worker);
  complete.set_trial_id(lease.trial_id());
  complete.set_attempt(lease.attempt());
  complete.set_result_json(deep_result);
  v1::CompleteTrialResponse completed;
  s = Call(*workers_, &Workers::CompleteTrial, complete, &completed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "result_json: line 1 (byte 111): nested deeper than 64 levels");

  v1::FailTrialRequest fail;
  fail.set_worker_id(worker);
  fail.set_trial_id(lease.trial_id());
  fail.set_attempt(lease.attempt());
  fail.set_error("x");
  fail.set_retryable(true);
  fail.set_result_json(deep_result);
  v1::FailTrialResponse failed;
  s = Call(*workers_, &Workers::FailTrial, fail, &failed);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  complete.set_result_json(ResultLine());
  ASSERT_TRUE(Call(*workers_, &Workers::CompleteTrial, complete, &completed).ok());
  EXPECT_TRUE(completed.accepted()) << completed.reason();
}

}  // namespace
}  // namespace frontier
