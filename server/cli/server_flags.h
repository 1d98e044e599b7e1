// frontier-server's command line (docs/cli.md): the flags, their checks and
// the tokens they name, turned into what server_main.cc wires.
#pragma once

#include <optional>
#include <string>

#include "server/rpc/coordinator.h"

namespace frontier {

struct ServerFlags {
  CoordinatorOptions coordinator;     // listen defaults to 0.0.0.0:50051; tokens and TLS filled in
  std::string store = "frontier.db";  // --store: a store URL (server/store/open_store.h)
  std::string metrics_listen = "127.0.0.1:9464";  // --metrics-listen; MetricsDisabled(): none
  bool metrics_listen_given = false;              // given explicitly: failing to serve /metrics is fatal
  bool migrate = false;                           // `frontier-server migrate`: migrate the store and exit
};

// Parses argv into `flags`, reads the token files (--tokens, or the shared
// pair: --user-token-file / $FRONTIER_USER_TOKEN and --worker-token-file /
// $FRONTIER_WORKER_TOKEN) and checks the combination. Returns nullopt to go
// on, or the exit code after printing why to stop: 0 after --help, CLI11's
// code for a parse error, 64 for unreadable or malformed tokens, one shared
// token without the other, --tokens with a shared token, or a heartbeat
// interval not shorter than the lease timeout. For
// `migrate` only the store is meaningful and nothing else is checked.
std::optional<int> ParseServerFlags(int argc, char** argv, ServerFlags& flags);

}  // namespace frontier
