#include "server/rpc/coordinator_process.h"

#include <chrono>

#include <spdlog/spdlog.h>

#include "server/store/measured_store.h"
#include "server/store/open_store.h"

namespace frontier {

CoordinatorProcess::CoordinatorProcess(const std::string& store_url, CoordinatorOptions options) {
  CoordinatorMetricsOptions metrics_options;
  metrics_options.worker_connected_within = std::chrono::milliseconds(options.scheduler.lease_timeout_ms);
  metrics_ = std::make_unique<CoordinatorMetrics>(metrics_options);
  store_ = std::make_unique<MeasuredStore>(OpenStore(store_url, OpenMode::kServe), *metrics_);
  coordinator_ = std::make_unique<Coordinator>(*store_, clock_, *metrics_, std::move(options));
}

CoordinatorProcess::~CoordinatorProcess() = default;

void ReloadTokens(const ServerSecurity& security) {
  if (!security.users) {
    spdlog::warn("SIGHUP: no --tokens file to reload");
    return;
  }
  try {
    const size_t n = security.users->Reload();
    spdlog::info("tokens reloaded from {}: {} tokens", security.users->path(), n);
  } catch (const std::exception& e) {
    spdlog::error("tokens not reloaded, the previous ones stay in use: {}", e.what());
  }
}

}  // namespace frontier
