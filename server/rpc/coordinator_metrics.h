// The coordinator's Prometheus metrics (docs/metrics.md): experiments and
// trials by state, queue depth, leases, retries, attempts by outcome, RPC
// and store latency, connected workers and their last heartbeat.
//
// Counters and histograms are updated as things happen (by MeasuredStore, by
// the RPC interceptor, by the worker service); the gauges that describe the
// store's contents are set by Refresh, which the coordinator's dispatcher
// thread calls about once a second while /metrics is served. Thread-safe.
//
// Label cardinality is bounded: experiment ids only for running experiments
// and the `kept_finished_experiments` newest finished ones; worker ids only
// for workers the store knows and heard from within `forget_worker_after`;
// RPC methods capped.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

#include "metrics/families.h"
#include "server/store/measured_store.h"

namespace frontier {

class Store;

struct CoordinatorMetricsOptions {
  // A worker heard from within this long counts as connected (the lease timeout).
  std::chrono::milliseconds worker_connected_within{std::chrono::seconds(60)};
  // Workers not heard from for this long lose their series.
  std::chrono::milliseconds forget_worker_after{std::chrono::hours(1)};
  // Finished experiments that keep their per-experiment trial series, newest first.
  int kept_finished_experiments = 20;
  // At most this many experiments (newest first) are counted by state.
  int experiment_scan_limit = 10000;
};

class CoordinatorMetrics final : public StoreObserver {
 public:
  explicit CoordinatorMetrics(CoordinatorMetricsOptions options = {});
  ~CoordinatorMetrics();

  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  // What /metrics serves.
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // A trial was leased for its `attempt`-th time (attempt >= 2 is a retry).
  void LeaseGranted(int attempt) override;
  // A lease ran out without heartbeats; the trial was re-queued or failed.
  void LeaseExpired() override;
  // An attempt ended: "completed", "diverged", "failed", "stopped",
  // "cancelled" or "lease_expired".
  void AttemptEnded(const std::string& outcome) override;
  // One store call of `operation` (e.g. "lease_next_trial") took `seconds`;
  // `failed` when it threw.
  void ObserveStoreOperation(const char* operation, double seconds, bool failed) override;
  // One RPC ended with `code` after `seconds`. `method` is the gRPC path
  // "/package.Service/Method"; the label is the bare method name.
  void ObserveRpc(const std::string& method, int code, double seconds);
  // The (authenticated) worker called the coordinator: registration, lease
  // poll, heartbeat, progress or result.
  void WorkerSeen(const std::string& worker_id);

  // Sets the gauges from the store's contents (experiments, trial counts per
  // experiment, queue depth, worker hosts) and from the workers seen; the
  // workers in `parked_workers` count as seen now. Throws StoreError.
  void Refresh(Store& store, const std::vector<std::string>& parked_workers);

  // A gRPC server interceptor factory that times every RPC into
  // frontier_coordinator_rpc_duration_seconds. This object must outlive the server.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MakeRpcInterceptorFactory();

 private:
  std::string MethodLabel(const std::string& method);
  void SetExperimentGauges(const std::string& experiment_id, const int (&counts)[7]);
  void DropExperiment(const std::string& experiment_id);

  const CoordinatorMetricsOptions options_;
  const std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Gauge>& experiments_;
  prometheus::Family<prometheus::Gauge>& trials_;
  prometheus::Gauge& queue_depth_;
  prometheus::Counter& leases_granted_;
  prometheus::Counter& leases_expired_;
  prometheus::Counter& retries_;
  prometheus::Family<prometheus::Counter>& attempts_;
  prometheus::Family<prometheus::Histogram>& rpc_duration_;
  prometheus::Family<prometheus::Histogram>& store_duration_;
  prometheus::Family<prometheus::Counter>& store_errors_;
  prometheus::Gauge& workers_connected_;
  prometheus::Family<prometheus::Gauge>& heartbeat_age_;
  prometheus::Gauge& parked_polls_;

  std::mutex mutex_;  // guards what follows
  std::set<std::string> labelled_experiments_;
  std::map<std::string, std::chrono::steady_clock::time_point> worker_seen_;
  std::map<std::string, prometheus::Gauge*> worker_age_gauges_;
  std::map<std::string, prometheus::Histogram*> rpc_histograms_;  // by "method code"
  std::set<std::string> methods_;
  std::map<std::string, prometheus::Histogram*> store_histograms_;
};

}  // namespace frontier
