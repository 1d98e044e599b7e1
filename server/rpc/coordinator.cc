#include "server/rpc/coordinator.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>
#include <vector>

#include "metrics/endpoint.h"
#include "server/proposer/grpc_proposer.h"
#include "server/rpc/coordinator_metrics.h"
#include "server/rpc/experiment_service.h"
#include "server/rpc/worker_service.h"

namespace frontier {

Coordinator::Coordinator(Store& store, Clock& clock, CoordinatorMetrics& metrics, CoordinatorOptions options)
    : options_(std::move(options)), store_(store), metrics_(metrics) {
  if (!options_.scheduler.proposers) options_.scheduler.proposers = GrpcProposerFactory();
  scheduler_ = std::make_unique<Scheduler>(store_, clock, options_.scheduler);
  if (!options_.artifacts_dir.empty()) {
    artifacts_ = std::make_unique<ArtifactStore>(options_.artifacts_dir, options_.artifact_limits);
  }
  experiments_ = std::make_unique<ExperimentServiceImpl>(*scheduler_, stopping_, options_.security, artifacts_.get());
  workers_ = std::make_unique<WorkerServiceImpl>(*scheduler_, options_.max_lease_wait_ms, metrics_,
                                                 options_.security, artifacts_.get());
}

Coordinator::~Coordinator() { Shutdown(); }

int Coordinator::Start() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, MakeServerCredentials(options_.security), &port_);
  builder.RegisterService(experiments_.get());
  builder.RegisterService(workers_.get());
  builder.SetMaxReceiveMessageSize(4 << 20);  // results and specs are kilobytes; a space file at most 1 MiB
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(metrics_.MakeRpcInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) throw std::runtime_error("cannot listen on " + options_.listen);
  dispatcher_ = std::thread([this] { RunDispatcher(); });
  return port_;
}

void Coordinator::RunDispatcher() {
  uint64_t changes = scheduler_->change_count();
  auto last_tick = std::chrono::steady_clock::now();
  auto last_metrics = last_tick;
  while (!stopping_) {
    changes = scheduler_->WaitForChange(changes, 100);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_tick >= std::chrono::milliseconds(250)) {
      try {
        scheduler_->Tick();
      } catch (const std::exception& e) {
        spdlog::error("lease expiry failed: {}", e.what());
      }
      last_tick = now;
    }
    if (metrics_served_ && now - last_metrics >= std::chrono::seconds(1)) {
      RefreshMetrics();
      last_metrics = now;
    }
    workers_->ServeWaiters(false);
  }
}

std::vector<std::string> Coordinator::ParkedWorkers() { return workers_->ParkedWorkers(); }

void Coordinator::RefreshMetrics() {
  try {
    metrics_.Refresh(store_, ParkedWorkers());
  } catch (const std::exception& e) {
    spdlog::warn("metrics refresh failed: {}", e.what());
  }
}

int Coordinator::ServeMetrics(const std::string& address) {
  metrics_endpoint_ = std::make_unique<MetricsEndpoint>(address, metrics_.registry());
  RefreshMetrics();  // the first scrape already sees the store
  metrics_served_ = true;
  return metrics_endpoint_->port();
}

std::string Coordinator::metrics_url() const { return metrics_endpoint_ ? metrics_endpoint_->url() : ""; }

void Coordinator::Shutdown() {
  if (stopping_.exchange(true)) return;
  if (dispatcher_.joinable()) dispatcher_.join();
  workers_->ServeWaiters(true);
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

void Coordinator::Wait() {
  if (server_) server_->Wait();
}

}  // namespace frontier
