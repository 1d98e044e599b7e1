// frontier-server's parts wired together over an injected store and clock:
// the scheduler, the two gRPC services (users' ExperimentService in
// experiment_service.h, workers' WorkerService in worker_service.h) and the
// standard health service, on one listening address, plus the dispatcher
// thread that answers parked lease polls and expires leases.
//
// The coordinator owns none of what it is given: the store, the clock and
// the metric families must outlive it. A process makes them with
// CoordinatorProcess (coordinator_process.h); tests pass an in-memory store
// and a fake clock. Scheduler time (leases, timestamps) comes from the clock;
// the cadence of the dispatcher and the deadlines of long polls are real
// (steady) time.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "proto/auth.h"
#include "proto/clock.h"
#include "server/scheduler/scheduler.h"
#include "server/store/artifact_store.h"
#include "server/store/store.h"

namespace grpc {
class Server;
}

namespace frontier {

class CoordinatorMetrics;
class ExperimentServiceImpl;
class MetricsEndpoint;
class WorkerServiceImpl;

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:50051";  // host:port; port 0 picks a free one
  SchedulerOptions scheduler;
  int64_t max_lease_wait_ms = 30'000;  // cap on LeaseTrial long polls
  ServerSecurity security;             // tokens and TLS; default: none
  // The artifact store's folder (artifact_store.h: trials' files uploaded by
  // their workers); empty: none, UploadArtifact and the artifact reads are
  // refused with FAILED_PRECONDITION.
  std::string artifacts_dir;
  ArtifactLimits artifact_limits;
};

class Coordinator {
 public:
  // Builds the scheduler over `store` (running trials get a fresh lease of
  // restart_grace_ms) and opens the artifact store (ArtifactError when its
  // folder cannot be created). Lease, retry, attempt and store-latency metrics move
  // only when `store` reports to `metrics` (a MeasuredStore over it). Throws
  // StoreError.
  Coordinator(Store& store, Clock& clock, CoordinatorMetrics& metrics, CoordinatorOptions options);
  ~Coordinator();

  // Starts serving; returns the bound port. Throws std::runtime_error when
  // the address cannot be bound.
  int Start();
  // Ends long polls and watches, then stops the server. Idempotent.
  void Shutdown();
  // Blocks until Shutdown.
  void Wait();

  // Serves Prometheus metrics at http://ADDRESS/metrics (HOST:PORT; port 0
  // picks a free one) and starts refreshing the store gauges; returns the
  // bound port. Call once, after Start. Throws std::runtime_error when the
  // address cannot be bound. docs/metrics.md lists the metrics.
  int ServeMetrics(const std::string& address);
  // "http://HOST:PORT/metrics" once ServeMetrics succeeded, else empty.
  std::string metrics_url() const;

  Scheduler& scheduler() { return *scheduler_; }
  int port() const { return port_; }
  // The workers whose LeaseTrial polls are parked now, waiting for a trial.
  std::vector<std::string> ParkedWorkers();

 private:
  void RunDispatcher();
  void RefreshMetrics();

  CoordinatorOptions options_;
  Store& store_;
  CoordinatorMetrics& metrics_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ArtifactStore> artifacts_;  // null: none
  std::unique_ptr<ExperimentServiceImpl> experiments_;
  std::unique_ptr<WorkerServiceImpl> workers_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsEndpoint> metrics_endpoint_;
  std::atomic<bool> metrics_served_{false};
  std::thread dispatcher_;
  std::atomic<bool> stopping_{false};
  int port_ = 0;
};

}  // namespace frontier
