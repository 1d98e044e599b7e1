#include "tests/server/rpc/coordinator_harness.h"

#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

namespace frontier {

CoordinatorHarness::CoordinatorHarness(ServerSecurity security, const std::string& artifacts_dir,
                                       const std::string& store_path)
    : store_(store_path) {
  CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.scheduler.lease_timeout_ms = kLeaseTimeoutMs;
  options.scheduler.heartbeat_interval_ms = 1'000;
  options.security = std::move(security);
  options.artifacts_dir = artifacts_dir;
  coordinator_ = std::make_unique<Coordinator>(store_, clock_, metrics_, options);
  coordinator_->Start();
}

CoordinatorHarness::~CoordinatorHarness() { coordinator_->Shutdown(); }

std::shared_ptr<grpc::Channel> CoordinatorHarness::Channel(const std::string& token) {
  ClientSecurity security;
  security.token = token;
  return MakeClientChannel("127.0.0.1:" + std::to_string(coordinator_->port()), security);
}

std::unique_ptr<v1::ExperimentService::Stub> CoordinatorHarness::UserStub(const std::string& token) {
  return v1::ExperimentService::NewStub(Channel(token));
}

std::unique_ptr<v1::WorkerService::Stub> CoordinatorHarness::WorkerStub(const std::string& token) {
  return v1::WorkerService::NewStub(Channel(token));
}

std::unique_ptr<grpc::ClientContext> CoordinatorHarness::Context(int seconds) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

bool CoordinatorHarness::WaitUntilParked(const std::string& worker_id) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < give_up) {
    const std::vector<std::string> parked = coordinator_->ParkedWorkers();
    if (std::find(parked.begin(), parked.end(), worker_id) != parked.end()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

namespace {

// A synthetic task and a one-stage baseline, for a space file to add its dimensions to.
std::string SyntheticSpaceOf(const std::string& name, int steps, int eval_every) {
  return "name: " + name +
         "\ntask: {dataset: synthetic, input: {channels: 1, height: 8, width: 8, classes: 3},\n" +
         "       batch_size: 8, steps: " + std::to_string(steps) +
         ", warmup_steps: 1, eval_every: " + std::to_string(eval_every) + R"(}
baseline:
  arch: {stem: {kind: conv3x3, width: 8, stride: 1}, stages: [{block: basic, width: 8, depth: 1}]}
  runtime: {threads: 1}
objectives: [{metric: val_accuracy, goal: maximize}, {metric: throughput, goal: maximize}]
)";
}

}  // namespace

std::string TinySpace(int repeats, const std::string& name) {
  return SyntheticSpaceOf(name, 4, 0) + R"(space:
  stages[*].block: [basic, mbconv]
max_attempts: 2
repeats: )" +
         std::to_string(repeats) + "\n";
}

std::string AshaSpace() {
  return SyntheticSpaceOf("asha", 40, 10) + R"(space:
  stem.width: [8, 12, 16, 20]
  stages[0].width: [8, 12, 16, 20]
  activation: [relu, gelu, silu]
strategy: {name: asha, min_steps: 10, eta: 2, trials: 3, seed: 1}
repeats: 1
)";
}

std::string ResultLine(const std::string& status) {
  return nlohmann::json{{"event", "result"},
                        {"status", status},
                        {"val_accuracy", 0.5},
                        {"throughput", {{"samples_per_s", 100.0}}}}
      .dump();
}

}  // namespace frontier
