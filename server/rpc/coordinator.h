// frontier-server's parts wired together: the store, the scheduler, the two
// gRPC services (users' ExperimentService, workers' WorkerService) and the
// standard health service, on one listening address. Used by frontier-server
// and embedded by `frontier run`.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "proto/auth.h"
#include "proto/clock.h"
#include "server/scheduler/scheduler.h"
#include "server/store/store.h"

namespace grpc {
class Server;
}

namespace frontier {

class CoordinatorMetrics;
class MetricsEndpoint;

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:50051";  // host:port; port 0 picks a free one
  std::string store = "frontier.db";  // postgresql://USER@HOST:PORT/DB, a SQLite path, sqlite:PATH or ":memory:"
  SchedulerOptions scheduler;
  int64_t max_lease_wait_ms = 30'000;      // cap on LeaseTrial long polls
  ServerSecurity security;                 // tokens and TLS; default: none
};

class Coordinator {
 public:
  // Opens the store (migrating it) and builds the scheduler. Throws StoreError.
  explicit Coordinator(CoordinatorOptions options);
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

 private:
  class ExperimentServiceImpl;
  class WorkerServiceImpl;
  void RunDispatcher();
  void RefreshMetrics();

  CoordinatorOptions options_;
  SystemClock clock_;
  std::unique_ptr<CoordinatorMetrics> metrics_;  // before store_: the store reports to it
  std::unique_ptr<Store> store_;
  std::unique_ptr<Scheduler> scheduler_;
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
