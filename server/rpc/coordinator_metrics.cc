#include "server/rpc/coordinator_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "metrics/families.h"

#include <grpcpp/support/interceptor.h>
#include <grpcpp/support/status.h>

#include "server/store/store.h"

namespace frontier {
namespace {

// Trial states in TrialCountsRow order.
constexpr const char* kTrialStates[7] = {
    trial_state::kPending,  trial_state::kRunning, trial_state::kCompleted, trial_state::kFailed,
    trial_state::kDiverged, trial_state::kStopped, trial_state::kCancelled};
constexpr const char* kExperimentStates[] = {experiment_state::kRunning, experiment_state::kCompleted,
                                             experiment_state::kCancelled};
constexpr const char* kAttemptOutcomes[] = {"completed", "diverged",  "failed",
                                            "stopped",   "cancelled", "lease_expired"};
// Distinct RPC method labels; later ones are counted as "other".
constexpr size_t kMaxMethods = 64;

// RPCs: from sub-millisecond unary calls to LeaseTrial long polls (up to the 30 s cap).
const prometheus::Histogram::BucketBoundaries kRpcBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const prometheus::Histogram::BucketBoundaries kStoreBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                               0.01,   0.025,   0.05,   0.1,   0.25,   1};

const char* StatusCodeName(int code) {
  static const char* const kNames[] = {
      "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
      "DATA_LOSS", "UNAUTHENTICATED"};
  return code >= 0 && code < 17 ? kNames[code] : "UNKNOWN";
}

// Times one RPC from its start (the interceptor is created when the call is
// matched) to the moment its status is sent.
class RpcTimer final : public grpc::experimental::Interceptor {
 public:
  RpcTimer(CoordinatorMetrics& metrics, const char* method)
      : metrics_(metrics), method_(method ? method : ""), started_(std::chrono::steady_clock::now()) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
      metrics_.ObserveRpc(method_, static_cast<int>(methods->GetSendStatus().error_code()), seconds);
    }
    methods->Proceed();
  }

 private:
  CoordinatorMetrics& metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point started_;
};

class RpcTimerFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcTimerFactory(CoordinatorMetrics& metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    return new RpcTimer(metrics_, info->method());
  }

 private:
  CoordinatorMetrics& metrics_;
};

}  // namespace

CoordinatorMetrics::CoordinatorMetrics(CoordinatorMetricsOptions options)
    : options_(options),
      registry_(std::make_shared<prometheus::Registry>()),
      experiments_(GaugeFamily(*registry_, "frontier_coordinator_experiments",
                               "Experiments in the store by state (running, completed, cancelled)")),
      trials_(
          GaugeFamily(*registry_, "frontier_coordinator_trials",
                      "Trials of an experiment by state; running experiments and the newest finished ones")),
      queue_depth_(GaugeFamily(*registry_, "frontier_coordinator_queue_depth",
                               "Pending trials of running experiments, waiting for a worker")
                       .Add({})),
      leases_granted_(CounterFamily(*registry_, "frontier_coordinator_leases_granted_total",
                                    "Trial leases handed to workers")
                          .Add({})),
      leases_expired_(
          CounterFamily(*registry_, "frontier_coordinator_leases_expired_total",
                        "Leases that ran out without a heartbeat; the trial was re-queued or failed")
              .Add({})),
      retries_(CounterFamily(*registry_, "frontier_coordinator_trial_retries_total",
                             "Leases of a trial's second or later attempt")
                   .Add({})),
      attempts_(CounterFamily(*registry_, "frontier_coordinator_attempts_finished_total",
                              "Trial attempts that ended, by outcome (completed, diverged, failed, stopped, "
                              "cancelled, lease_expired)")),
      rpc_duration_(HistogramFamily(*registry_, "frontier_coordinator_rpc_duration_seconds",
                                    "gRPC calls served, from arrival to status, by method and status code "
                                    "(LeaseTrial includes its long poll)")),
      store_duration_(HistogramFamily(*registry_, "frontier_coordinator_store_operation_duration_seconds",
                                      "Store calls (one transaction each) by operation")),
      store_errors_(CounterFamily(*registry_, "frontier_coordinator_store_errors_total",
                                  "Store calls that failed, by operation")),
      workers_connected_(
          GaugeFamily(*registry_, "frontier_coordinator_workers_connected",
                      "Workers heard from within the lease timeout (a parked lease poll counts)")
              .Add({})),
      heartbeat_age_(
          GaugeFamily(*registry_, "frontier_coordinator_worker_last_heartbeat_age_seconds",
                      "Seconds since the worker was last heard from: heartbeat, progress, result or "
                      "lease poll (a parked poll counts as now)")),
      parked_polls_(GaugeFamily(*registry_, "frontier_coordinator_parked_lease_polls",
                                "LeaseTrial long polls waiting for a trial")
                        .Add({})) {
  for (const char* state : kExperimentStates) experiments_.Add({{"state", state}});
  for (const char* outcome : kAttemptOutcomes) attempts_.Add({{"outcome", outcome}});
}

CoordinatorMetrics::~CoordinatorMetrics() = default;

void CoordinatorMetrics::LeaseGranted(int attempt) {
  leases_granted_.Increment();
  if (attempt >= 2) retries_.Increment();
}

void CoordinatorMetrics::LeaseExpired() { leases_expired_.Increment(); }

void CoordinatorMetrics::AttemptEnded(const std::string& outcome) {
  for (const char* known : kAttemptOutcomes) {
    if (outcome == known) {
      attempts_.Add({{"outcome", known}}).Increment();
      return;
    }
  }
  attempts_.Add({{"outcome", "other"}}).Increment();
}

void CoordinatorMetrics::ObserveStoreOperation(const char* operation, double seconds, bool failed) {
  prometheus::Histogram* histogram;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    prometheus::Histogram*& cached = store_histograms_[operation];
    if (cached == nullptr) cached = &store_duration_.Add({{"operation", operation}}, kStoreBuckets);
    histogram = cached;
  }
  histogram->Observe(seconds);
  if (failed) store_errors_.Add({{"operation", operation}}).Increment();
}

std::string CoordinatorMetrics::MethodLabel(const std::string& method) {
  const size_t slash = method.rfind('/');
  std::string name = slash == std::string::npos ? method : method.substr(slash + 1);
  if (name.empty()) return "other";
  if (methods_.count(name) == 0) {
    if (methods_.size() >= kMaxMethods) return "other";
    methods_.insert(name);
  }
  return name;
}

void CoordinatorMetrics::ObserveRpc(const std::string& method, int code, double seconds) {
  prometheus::Histogram* histogram;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string label = MethodLabel(method);
    const char* code_name = StatusCodeName(code);
    prometheus::Histogram*& cached = rpc_histograms_[label + " " + code_name];
    if (cached == nullptr) cached = &rpc_duration_.Add({{"method", label}, {"code", code_name}}, kRpcBuckets);
    histogram = cached;
  }
  histogram->Observe(seconds);
}

void CoordinatorMetrics::WorkerSeen(const std::string& worker_id) {
  if (worker_id.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  worker_seen_[worker_id] = std::chrono::steady_clock::now();
}

void CoordinatorMetrics::SetExperimentGauges(const std::string& experiment_id, const int (&counts)[7]) {
  for (int i = 0; i < 7; ++i) {
    trials_.Add({{"experiment", experiment_id}, {"state", kTrialStates[i]}}).Set(counts[i]);
  }
}

void CoordinatorMetrics::DropExperiment(const std::string& experiment_id) {
  for (const char* state : kTrialStates) {
    const prometheus::Labels labels = {{"experiment", experiment_id}, {"state", state}};
    if (trials_.Has(labels)) trials_.Remove(&trials_.Add(labels));
  }
}

void CoordinatorMetrics::Refresh(Store& store, const std::vector<std::string>& parked_workers) {
  // Store reads first, without the lock: they take milliseconds.
  const std::vector<ExperimentRecord> experiments = store.ListExperiments(options_.experiment_scan_limit);
  std::map<std::string, double> by_state;
  for (const char* state : kExperimentStates) by_state[state] = 0;
  std::map<std::string, TrialCountsRow> kept;  // experiment -> counts
  int finished_kept = 0;
  int64_t queue = 0;
  for (const ExperimentRecord& e : experiments) {  // newest first
    by_state[e.state] += 1;
    const bool running = e.state == experiment_state::kRunning;
    if (!running && finished_kept >= options_.kept_finished_experiments) continue;
    if (!running) ++finished_kept;
    const TrialCountsRow counts = store.CountTrials(e.id);
    if (running) queue += counts.pending;
    kept[e.id] = counts;
  }
  std::map<std::string, std::string> hosts;
  for (const WorkerRecord& w : store.ListWorkers()) hosts[w.id] = w.host;

  for (const auto& [state, count] : by_state) experiments_.Add({{"state", state}}).Set(count);
  queue_depth_.Set(static_cast<double>(queue));
  parked_polls_.Set(static_cast<double>(parked_workers.size()));

  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, c] : kept) {
    const int counts[7] = {c.pending, c.running, c.completed, c.failed, c.diverged, c.stopped, c.cancelled};
    SetExperimentGauges(id, counts);
  }
  for (auto it = labelled_experiments_.begin(); it != labelled_experiments_.end();) {
    if (kept.count(*it) == 0) {
      DropExperiment(*it);
      it = labelled_experiments_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& entry : kept) labelled_experiments_.insert(entry.first);

  const std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  for (const std::string& id : parked_workers) worker_seen_[id] = now;
  int connected = 0;
  for (auto it = worker_seen_.begin(); it != worker_seen_.end();) {
    const auto age = now - it->second;
    auto gauge = worker_age_gauges_.find(it->first);
    const auto host = hosts.find(it->first);
    // Ids the store does not know (a stale or made-up worker_id) get no series.
    if (age > options_.forget_worker_after || host == hosts.end()) {
      if (gauge != worker_age_gauges_.end()) {
        heartbeat_age_.Remove(gauge->second);
        worker_age_gauges_.erase(gauge);
      }
      it = worker_seen_.erase(it);
      continue;
    }
    if (age <= options_.worker_connected_within) ++connected;
    if (gauge == worker_age_gauges_.end()) {
      gauge = worker_age_gauges_
                  .emplace(it->first, &heartbeat_age_.Add({{"worker", it->first}, {"host", host->second}}))
                  .first;
    }
    gauge->second->Set(std::chrono::duration<double>(age).count());
    ++it;
  }
  workers_connected_.Set(connected);
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
CoordinatorMetrics::MakeRpcInterceptorFactory() {
  return std::make_unique<RpcTimerFactory>(*this);
}

}  // namespace frontier
