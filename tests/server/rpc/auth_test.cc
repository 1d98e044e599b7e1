// Authorization by role on every RPC of both services (proto/auth.h): with
// tokens configured, a call without one or with a wrong one is
// UNAUTHENTICATED, the other role's token is PERMISSION_DENIED, and its own
// role's token gets through. Without tokens everything is open.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "tests/server/rpc/coordinator_harness.h"

namespace frontier {
namespace {

constexpr const char* kUserToken = "user-secret";
constexpr const char* kWorkerToken = "worker-secret";

ServerSecurity Tokens() {
  ServerSecurity security;
  security.user_token = kUserToken;
  security.worker_token = kWorkerToken;
  return security;
}

struct Rpc {
  const char* name;
  std::function<grpc::Status(CoordinatorHarness&, const std::string& token)> call;
};

// An RPC `method` with `request`, called through the stub that `stub_of` makes for a token.
template <typename Stub, typename Request, typename Response>
Rpc RpcOf(const char* name, std::unique_ptr<Stub> (CoordinatorHarness::*stub_of)(const std::string&),
          grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*), Request request) {
  return {name, [=](CoordinatorHarness& h, const std::string& token) {
            Response response;
            return Call(*(h.*stub_of)(token), method, request, &response);
          }};
}

using Users = v1::ExperimentService::Stub;
using Workers = v1::WorkerService::Stub;

// Every ExperimentService RPC, with a request that succeeds for the right token.
std::vector<Rpc> UserRpcs(const std::string& experiment_id) {
  v1::SubmitExperimentRequest submit;
  submit.set_space_yaml(TinySpace());
  v1::GetExperimentRequest get;
  get.set_experiment_id(experiment_id);
  v1::CancelExperimentRequest cancel;
  cancel.set_experiment_id(experiment_id);
  v1::ListTrialsRequest trials;
  trials.set_experiment_id(experiment_id);
  v1::GetReportRequest report;
  report.set_experiment_id(experiment_id);
  return {
      RpcOf("SubmitExperiment", &CoordinatorHarness::UserStub, &Users::SubmitExperiment, submit),
      RpcOf("GetExperiment", &CoordinatorHarness::UserStub, &Users::GetExperiment, get),
      RpcOf("ListExperiments", &CoordinatorHarness::UserStub, &Users::ListExperiments,
            v1::ListExperimentsRequest()),
      RpcOf("ListTrials", &CoordinatorHarness::UserStub, &Users::ListTrials, trials),
      RpcOf("GetReport", &CoordinatorHarness::UserStub, &Users::GetReport, report),
      {"WatchExperiment",
       [=](CoordinatorHarness& h, const std::string& t) {
         v1::WatchExperimentRequest req;
         req.set_experiment_id(experiment_id);
         auto stub = h.UserStub(t);
         auto ctx = CoordinatorHarness::Context();
         auto reader = stub->WatchExperiment(ctx.get(), req);
         v1::ExperimentEvent event;
         if (reader->Read(&event)) ctx->TryCancel();  // authorized: the first event came
         const grpc::Status s = reader->Finish();
         return s.error_code() == grpc::StatusCode::CANCELLED ? grpc::Status::OK : s;
       }},
      // Last: the experiment stays running for the calls above.
      RpcOf("CancelExperiment", &CoordinatorHarness::UserStub, &Users::CancelExperiment, cancel),
  };
}

// Every WorkerService RPC, with a request that succeeds (an OK status) for the right token.
std::vector<Rpc> WorkerRpcs() {
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id("w");
  v1::LeaseTrialRequest lease;
  lease.set_worker_id("w");
  v1::ReportProgressRequest progress;
  progress.set_trial_id("no-such-trial");
  progress.set_event_json("{}");
  v1::CompleteTrialRequest complete;
  complete.set_trial_id("no-such-trial");
  complete.set_result_json(ResultLine());
  v1::FailTrialRequest fail;
  fail.set_trial_id("no-such-trial");
  return {
      RpcOf("RegisterWorker", &CoordinatorHarness::WorkerStub, &Workers::RegisterWorker,
            v1::RegisterWorkerRequest()),
      RpcOf("LeaseTrial", &CoordinatorHarness::WorkerStub, &Workers::LeaseTrial, lease),
      RpcOf("Heartbeat", &CoordinatorHarness::WorkerStub, &Workers::Heartbeat, heartbeat),
      RpcOf("ReportProgress", &CoordinatorHarness::WorkerStub, &Workers::ReportProgress, progress),
      RpcOf("CompleteTrial", &CoordinatorHarness::WorkerStub, &Workers::CompleteTrial, complete),
      RpcOf("FailTrial", &CoordinatorHarness::WorkerStub, &Workers::FailTrial, fail),
  };
}

std::string SubmitAs(CoordinatorHarness& h, const std::string& token) {
  v1::SubmitExperimentRequest req;
  req.set_space_yaml(TinySpace());
  v1::SubmitExperimentResponse resp;
  const grpc::Status s = h.UserStub(token)->SubmitExperiment(CoordinatorHarness::Context().get(), req, &resp);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return resp.experiment().id();
}

TEST(AuthTest, EveryUserRpcNeedsTheUserToken) {
  CoordinatorHarness h(Tokens());
  const std::string id = SubmitAs(h, kUserToken);
  for (const Rpc& rpc : UserRpcs(id)) {
    EXPECT_EQ(rpc.call(h, "").error_code(), grpc::StatusCode::UNAUTHENTICATED) << rpc.name;
    EXPECT_EQ(rpc.call(h, "not-a-token").error_code(), grpc::StatusCode::UNAUTHENTICATED) << rpc.name;
    EXPECT_EQ(rpc.call(h, kWorkerToken).error_code(), grpc::StatusCode::PERMISSION_DENIED) << rpc.name;
    const grpc::Status own = rpc.call(h, kUserToken);
    EXPECT_TRUE(own.ok()) << rpc.name << ": " << own.error_message();
  }
}

TEST(AuthTest, EveryWorkerRpcNeedsTheWorkerToken) {
  CoordinatorHarness h(Tokens());
  for (const Rpc& rpc : WorkerRpcs()) {
    EXPECT_EQ(rpc.call(h, "").error_code(), grpc::StatusCode::UNAUTHENTICATED) << rpc.name;
    EXPECT_EQ(rpc.call(h, "not-a-token").error_code(), grpc::StatusCode::UNAUTHENTICATED) << rpc.name;
    EXPECT_EQ(rpc.call(h, kUserToken).error_code(), grpc::StatusCode::PERMISSION_DENIED) << rpc.name;
    const grpc::Status own = rpc.call(h, kWorkerToken);
    EXPECT_TRUE(own.ok()) << rpc.name << ": " << own.error_message();
  }
}

TEST(AuthTest, AWorkerTokenCannotSubmitOrCancel) {
  CoordinatorHarness h(Tokens());
  const std::string id = SubmitAs(h, kUserToken);
  for (const Rpc& rpc : UserRpcs(id)) {
    if (std::string(rpc.name) != "SubmitExperiment" && std::string(rpc.name) != "CancelExperiment") continue;
    const grpc::Status s = rpc.call(h, kWorkerToken);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << rpc.name;
    EXPECT_EQ(s.error_message(), "this call needs a user token; the token given is a worker token (worker)");
  }
  ASSERT_EQ(h.store().ListExperiments(10).size(), 1u);       // nothing submitted
  EXPECT_EQ(h.store().GetExperiment(id)->state, "running");  // nothing cancelled
}

TEST(AuthTest, WithoutTokensEveryRpcIsOpen) {
  CoordinatorHarness h;
  const std::string id = SubmitAs(h, "");
  for (const Rpc& rpc : UserRpcs(id)) {
    const grpc::Status s = rpc.call(h, "");
    EXPECT_TRUE(s.ok()) << rpc.name << ": " << s.error_message();
  }
  for (const Rpc& rpc : WorkerRpcs()) {
    const grpc::Status s = rpc.call(h, "");
    EXPECT_TRUE(s.ok()) << rpc.name << ": " << s.error_message();
  }
}

}  // namespace
}  // namespace frontier
