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

  grpc::Status Submit(const std::string& yaml, v1::SubmitExperimentResponse* response) {
    v1::SubmitExperimentRequest req;
    req.set_space_yaml(yaml);
    req.set_source_name("hostile.yaml");
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
