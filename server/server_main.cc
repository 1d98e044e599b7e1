// frontier-server: the coordinator. Thin main: flags (server/cli/server_flags.h)
// -> a CoordinatorProcess (server/rpc/coordinator_process.h), served until
// SIGINT or SIGTERM; SIGHUP reloads the --tokens file.
#include <pthread.h>

#include <csignal>

#include <spdlog/spdlog.h>

#include "metrics/endpoint.h"
#include "server/cli/server_flags.h"
#include "server/rpc/coordinator_process.h"
#include "server/store/open_store.h"

int main(int argc, char** argv) {
  // Block the stop signals before any thread starts, so that every thread
  // inherits the mask and only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  frontier::ServerFlags flags;
  if (const std::optional<int> exit_code = frontier::ParseServerFlags(argc, argv, flags)) return *exit_code;
  if (flags.migrate) {
    try {
      frontier::OpenStore(flags.store);
      spdlog::info("store {} is at the latest schema", flags.store);
      return 0;
    } catch (const std::exception& e) {
      spdlog::error("frontier-server migrate: {}", e.what());
      return 1;
    }
  }
  try {
    frontier::CoordinatorProcess process(flags.store, flags.coordinator);
    frontier::Coordinator& coordinator = process.coordinator();
    const int port = coordinator.Start();
    spdlog::info("frontier-server listening on {} (port {}), store {}, artifacts {}", flags.coordinator.listen, port,
                 flags.store, flags.coordinator.artifacts_dir.empty() ? "none" : flags.coordinator.artifacts_dir);
    if (!frontier::MetricsDisabled(flags.metrics_listen)) {
      try {
        coordinator.ServeMetrics(flags.metrics_listen);
        spdlog::info("metrics at {}", coordinator.metrics_url());
      } catch (const std::exception& e) {
        if (flags.metrics_listen_given) throw;  // asked for explicitly: a failure is fatal
        spdlog::warn("{}; running without /metrics (choose an address with --metrics-listen)", e.what());
      }
    }
    int received = 0;
    while (sigwait(&signals, &received) == 0 && received == SIGHUP) frontier::ReloadTokens(flags.coordinator.security);
    spdlog::info("signal {}: shutting down", received);
    coordinator.Shutdown();
  } catch (const std::exception& e) {
    spdlog::error("frontier-server: {}", e.what());
    return 1;
  }
  return 0;
}
