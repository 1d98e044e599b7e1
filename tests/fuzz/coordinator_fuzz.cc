// The coordinator's request handlers (SubmitExperiment, LeaseTrial,
// Heartbeat, ReportProgress, CompleteTrial, FailTrial, RegisterWorker,
// UploadArtifact into an artifact store in a temporary folder, ProfileTrial,
// ReadArtifact) fed
// arbitrary decoded messages through a real Coordinator on an in-memory
// SQLite store, over loopback gRPC as the CLI and workers reach it. The first
// byte picks the RPC; bit 0 of the second binds the request's worker, trial
// and attempt to a lease the harness holds (so that progress and results
// reach a running trial); the rest is the request in protobuf wire format
// (inputs that do not decode are skipped). The coordinator must answer every
// call and never crash.
#include <grpcpp/grpcpp.h>

#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <type_traits>

#include "frontier/v1/frontier.grpc.pb.h"
#include "proto/auth.h"
#include "server/rpc/coordinator.h"
#include "server/rpc/coordinator_metrics.h"
#include "server/store/sqlite_store.h"
#include "tests/fuzz/fuzz_entry.h"
#include "tests/server/fake_clock.h"

namespace frontier {
namespace {

constexpr char kSpace[] = R"(name: fuzz
task: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3}, batch_size: 8, steps: 4,
       warmup_steps: 1, eval_every: 0}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
  runtime: {threads: 1}
objectives: [{metric: val_accuracy, goal: maximize}, {metric: throughput, goal: maximize}]
space:
  stages[*].block: [basic, mbconv]
)";

class Target {
 public:
  Target() {
    CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    options.max_lease_wait_ms = 0;  // an empty queue answers at once
    static char artifacts[] = "/tmp/frontier-fuzz-artifacts-XXXXXX";  // removed when the process exits
    if (mkdtemp(artifacts) != nullptr) {
      options.artifacts_dir = artifacts;
      std::atexit([] { std::filesystem::remove_all(artifacts); });
    }
    coordinator_ = std::make_unique<Coordinator>(store_, clock_, metrics_, options);
    const int port = coordinator_->Start();
    const auto channel = MakeClientChannel("127.0.0.1:" + std::to_string(port), ClientSecurity{});
    users_ = v1::ExperimentService::NewStub(channel);
    workers_ = v1::WorkerService::NewStub(channel);
    v1::RegisterWorkerRequest reg;
    reg.set_host("fuzz");
    reg.set_device("cpu");
    v1::RegisterWorkerResponse registered;
    Check(workers_->RegisterWorker(Context().get(), reg, &registered));
    worker_id_ = registered.worker_id();
  }

  void Run(const uint8_t* data, size_t size) {
    if (size < 2) return;
    const int rpc = data[0] % 10;
    const bool bind = data[1] & 1;
    const std::string bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
    switch (rpc) {
      case 0: Call<v1::SubmitExperimentRequest, v1::SubmitExperimentResponse>(bytes, false, &Users::SubmitExperiment); break;
      case 1: Call<v1::LeaseTrialRequest, v1::LeaseTrialResponse>(bytes, bind, &Workers::LeaseTrial); break;
      case 2: Call<v1::HeartbeatRequest, v1::HeartbeatResponse>(bytes, bind, &Workers::Heartbeat); break;
      case 3: Call<v1::ReportProgressRequest, v1::ReportProgressResponse>(bytes, bind, &Workers::ReportProgress); break;
      case 4: Call<v1::CompleteTrialRequest, v1::CompleteTrialResponse>(bytes, bind, &Workers::CompleteTrial); break;
      case 5: Call<v1::FailTrialRequest, v1::FailTrialResponse>(bytes, bind, &Workers::FailTrial); break;
      case 7: Call<v1::UploadArtifactRequest, v1::UploadArtifactResponse>(bytes, bind, &Workers::UploadArtifact); break;
      case 8: Call<v1::ProfileTrialRequest, v1::ProfileTrialResponse>(bytes, false, &Users::ProfileTrial); break;
      case 9: Call<v1::ReadArtifactRequest, v1::ReadArtifactResponse>(bytes, false, &Users::ReadArtifact); break;
      default: Call<v1::RegisterWorkerRequest, v1::RegisterWorkerResponse>(bytes, false, &Workers::RegisterWorker); break;
    }
  }

 private:
  using Users = v1::ExperimentService::Stub;
  using Workers = v1::WorkerService::Stub;

  static std::unique_ptr<grpc::ClientContext> Context() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return ctx;
  }

  // A call the coordinator did not answer (it hung, or is gone) is a finding.
  static void Check(const grpc::Status& s) {
    if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED || s.error_code() == grpc::StatusCode::UNAVAILABLE) {
      std::abort();
    }
  }

  template <typename Request>
  void Bind(Request& req) {
    if (trial_id_.empty()) {
      v1::LeaseTrialRequest lease;
      lease.set_worker_id(worker_id_);
      v1::LeaseTrialResponse leased;
      Check(workers_->LeaseTrial(Context().get(), lease, &leased));
      if (!leased.has_trial()) {
        v1::SubmitExperimentRequest submit;
        submit.set_space_yaml(kSpace);
        v1::SubmitExperimentResponse submitted;
        Check(users_->SubmitExperiment(Context().get(), submit, &submitted));
        Check(workers_->LeaseTrial(Context().get(), lease, &leased));
      }
      trial_id_ = leased.trial_id();
      attempt_ = leased.attempt();
    }
    req.set_worker_id(worker_id_);
    if constexpr (!std::is_same_v<Request, v1::LeaseTrialRequest>) {
      req.set_trial_id(trial_id_);
      req.set_attempt(attempt_);
    }
  }

  template <typename Request, typename Response, typename Stub>
  void Call(const std::string& bytes, bool bind,
            grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*)) {
    Request req;
    if (!req.ParseFromString(bytes)) return;
    if constexpr (!std::is_same_v<Request, v1::SubmitExperimentRequest> &&
                  !std::is_same_v<Request, v1::RegisterWorkerRequest> &&
                  !std::is_same_v<Request, v1::ProfileTrialRequest> && !std::is_same_v<Request, v1::ReadArtifactRequest>) {
      if (bind) Bind(req);
    }
    Response resp;
    Stub& stub = [&]() -> Stub& {
      if constexpr (std::is_same_v<Stub, Users>) {
        return *users_;
      } else {
        return *workers_;
      }
    }();
    Check((stub.*method)(Context().get(), req, &resp));
    if constexpr (std::is_same_v<Request, v1::CompleteTrialRequest> || std::is_same_v<Request, v1::FailTrialRequest>) {
      if (bind) trial_id_.clear();  // the attempt ended, or its report was refused: lease another
    }
  }

  SqliteStore store_{":memory:"};
  FakeClock clock_;
  CoordinatorMetrics metrics_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<Users> users_;
  std::unique_ptr<Workers> workers_;
  std::string worker_id_;
  std::string trial_id_;
  int attempt_ = 0;
};

}  // namespace
}  // namespace frontier

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static frontier::Target* target = new frontier::Target();  // never destroyed: the process ends with the run
  target->Run(data, size);
  return 0;
}
