// frontier-server: the coordinator. Thin main: flags -> CoordinatorOptions.
#include <pthread.h>

#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "metrics/endpoint.h"
#include "server/rpc/coordinator.h"
#include "server/store/open_store.h"

int main(int argc, char** argv) {
  // Block the stop signals before any thread starts, so that every thread
  // inherits the mask and only sigwait below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  CLI::App app{"frontier-server: the Frontier coordinator (experiments, trial leases, results, reports)"};
  frontier::CoordinatorOptions options;
  options.listen = "0.0.0.0:50051";
  double lease_timeout_s = options.scheduler.lease_timeout_ms / 1000.0;
  double heartbeat_s = options.scheduler.heartbeat_interval_ms / 1000.0;
  double grace_s = options.scheduler.restart_grace_ms / 1000.0;
  app.add_option("--listen", options.listen, "host:port to serve gRPC on (port 0: any free port)")
      ->capture_default_str();
  std::string metrics_listen = "127.0.0.1:9464";
  auto* metrics_flag =
      app.add_option("--metrics-listen", metrics_listen,
                     "host:port to serve Prometheus /metrics on (port 0: any free port; 0 or empty: none)")
          ->capture_default_str();
  app.add_option("--store", options.store, "SQLite database file (or sqlite:PATH)")->capture_default_str();
  app.add_option("--lease-timeout", lease_timeout_s, "seconds without heartbeat before a lease expires")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--heartbeat-interval", heartbeat_s, "seconds between worker heartbeats")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--restart-grace", grace_s, "seconds running trials keep their lease after a start")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  std::string user_token_file, worker_token_file;
  app.add_option("--user-token-file", user_token_file,
                 "file with the token users must present (else $FRONTIER_USER_TOKEN; neither: no user token)");
  app.add_option("--worker-token-file", worker_token_file,
                 "file with the token workers must present (else $FRONTIER_WORKER_TOKEN)");
  app.add_option("--tls-cert", options.security.tls_cert_file, "serve TLS with this certificate (PEM)");
  app.add_option("--tls-key", options.security.tls_key_file, "the certificate's private key (PEM)");
  app.add_option("--tls-client-ca", options.security.tls_client_ca_file,
                 "require client certificates signed by this CA (mutual TLS)");
  auto* migrate = app.add_subcommand("migrate", "apply the store's schema migrations and exit");
  CLI11_PARSE(app, argc, argv);
  if (migrate->parsed()) {
    try {
      frontier::OpenStore(options.store);
      spdlog::info("store {} is at the latest schema", options.store);
      return 0;
    } catch (const std::exception& e) {
      spdlog::error("frontier-server migrate: {}", e.what());
      return 1;
    }
  }
  try {
    options.security.user_token = frontier::ReadToken(user_token_file, "FRONTIER_USER_TOKEN");
    options.security.worker_token = frontier::ReadToken(worker_token_file, "FRONTIER_WORKER_TOKEN");
  } catch (const std::exception& e) {
    std::cerr << "frontier-server: " << e.what() << "\n";
    return 64;
  }
  if (options.security.user_token.empty() != options.security.worker_token.empty()) {
    std::cerr << "frontier-server: set both a user and a worker token, or neither\n";
    return 64;
  }
  options.scheduler.lease_timeout_ms = static_cast<int64_t>(lease_timeout_s * 1000);
  options.scheduler.heartbeat_interval_ms = static_cast<int64_t>(heartbeat_s * 1000);
  options.scheduler.restart_grace_ms = static_cast<int64_t>(grace_s * 1000);
  if (options.scheduler.heartbeat_interval_ms >= options.scheduler.lease_timeout_ms) {
    std::cerr << "frontier-server: --heartbeat-interval must be shorter than --lease-timeout\n";
    return 64;
  }

  try {
    frontier::Coordinator coordinator(options);
    const int port = coordinator.Start();
    spdlog::info("frontier-server listening on {} (port {}), store {}", options.listen, port, options.store);
    if (!frontier::MetricsDisabled(metrics_listen)) {
      try {
        coordinator.ServeMetrics(metrics_listen);
        spdlog::info("metrics at {}", coordinator.metrics_url());
      } catch (const std::exception& e) {
        if (metrics_flag->count() > 0) throw;  // asked for explicitly: a failure is fatal
        spdlog::warn("{}; running without /metrics (choose an address with --metrics-listen)", e.what());
      }
    }
    int received = 0;
    sigwait(&signals, &received);
    spdlog::info("signal {}: shutting down", received);
    coordinator.Shutdown();
  } catch (const std::exception& e) {
    spdlog::error("frontier-server: {}", e.what());
    return 1;
  }
  return 0;
}
