#include "server/cli/server_flags.h"

#include <iostream>

#include <CLI/CLI.hpp>

namespace frontier {

std::optional<int> ParseServerFlags(int argc, char** argv, ServerFlags& flags) {
  CLI::App app{"frontier-server: the Frontier coordinator (experiments, trial leases, results, reports)"};
  CoordinatorOptions& options = flags.coordinator;
  options.listen = "0.0.0.0:50051";
  double lease_timeout_s = options.scheduler.lease_timeout_ms / 1000.0;
  double heartbeat_s = options.scheduler.heartbeat_interval_ms / 1000.0;
  double grace_s = options.scheduler.restart_grace_ms / 1000.0;
  app.add_option("--listen", options.listen, "host:port to serve gRPC on (port 0: any free port)")
      ->capture_default_str();
  auto* metrics_flag =
      app.add_option("--metrics-listen", flags.metrics_listen,
                     "host:port to serve Prometheus /metrics on (port 0: any free port; 0 or empty: none)")
          ->capture_default_str();
  app.add_option("--store", flags.store, "SQLite database file (or sqlite:PATH)")->capture_default_str();
  app.add_option("--lease-timeout", lease_timeout_s, "seconds without heartbeat before a lease expires")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--heartbeat-interval", heartbeat_s, "seconds between worker heartbeats")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--restart-grace", grace_s, "seconds running trials keep their lease after a start")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  options.artifacts_dir = "artifacts";
  app.add_option("--artifacts-dir", options.artifacts_dir,
                 "the artifact store: trials' files uploaded by their workers, under DIR/EXPERIMENT/TRIAL/ "
                 "(empty: keep none)")
      ->capture_default_str();
  int64_t max_trial_mb = options.artifact_limits.max_trial_bytes >> 20;
  app.add_option("--artifacts-max-trial-mb", max_trial_mb, "at most this many MiB of artifacts a trial")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--artifacts-max-files", options.artifact_limits.max_files,
                 "at most this many artifact files a trial")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  std::string user_token_file, worker_token_file, tokens_file;
  app.add_option("--tokens", tokens_file,
                 "token file (or a directory of them) of named users: lines 'USER ROLE TOKEN', ROLE user, "
                 "admin or worker; reloaded on "
                 "SIGHUP (docs/security.md)");
  app.add_option(
      "--user-token-file", user_token_file,
      "file with the token users must present (else $FRONTIER_USER_TOKEN; neither: no user token)");
  app.add_option("--worker-token-file", worker_token_file,
                 "file with the token workers must present (else $FRONTIER_WORKER_TOKEN)");
  app.add_option("--tls-cert", options.security.tls_cert_file, "serve TLS with this certificate (PEM)");
  app.add_option("--tls-key", options.security.tls_key_file, "the certificate's private key (PEM)");
  app.add_option("--tls-client-ca", options.security.tls_client_ca_file,
                 "require client certificates signed by this CA (mutual TLS)");
  auto* migrate = app.add_subcommand("migrate", "apply the store's schema migrations and exit");
  // Its flags are the server's: `frontier-server migrate --store URL` (README.md) and `--store URL migrate`.
  migrate->fallthrough();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  flags.metrics_listen_given = metrics_flag->count() > 0;
  options.artifact_limits.max_trial_bytes = max_trial_mb << 20;
  flags.migrate = migrate->parsed();
  if (flags.migrate) return std::nullopt;
  try {
    options.security.user_token = ReadToken(user_token_file, "FRONTIER_USER_TOKEN");
    options.security.worker_token = ReadToken(worker_token_file, "FRONTIER_WORKER_TOKEN");
    if (!tokens_file.empty()) options.security.users = std::make_shared<TokenTable>(tokens_file);
  } catch (const std::exception& e) {
    std::cerr << "frontier-server: " << e.what() << "\n";
    return 64;
  }
  if (options.security.users &&
      (!options.security.user_token.empty() || !options.security.worker_token.empty())) {
    std::cerr << "frontier-server: --tokens names every user and worker; give it without the shared user and "
                 "worker tokens\n";
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
  return std::nullopt;
}

}  // namespace frontier
