#include "server/rpc/coordinator_process.h"

#include <chrono>

#include "server/store/measured_store.h"
#include "server/store/open_store.h"

namespace frontier {

CoordinatorProcess::CoordinatorProcess(const std::string& store_url, CoordinatorOptions options) {
  CoordinatorMetricsOptions metrics_options;
  metrics_options.worker_connected_within = std::chrono::milliseconds(options.scheduler.lease_timeout_ms);
  metrics_ = std::make_unique<CoordinatorMetrics>(metrics_options);
  store_ = std::make_unique<MeasuredStore>(OpenStore(store_url), *metrics_);
  coordinator_ = std::make_unique<Coordinator>(*store_, clock_, *metrics_, std::move(options));
}

CoordinatorProcess::~CoordinatorProcess() = default;

}  // namespace frontier
