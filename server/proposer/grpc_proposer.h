// The external strategy's proposer over gRPC: a Proposer service
// (proto/frontier/v1/proposer.proto) at the strategy's `address`, called with
// the strategy's deadline, over TLS and with a bearer token as workers
// connect (`tls_ca`, `tls_cert`/`tls_key`, `token_file`, else the
// environment's FRONTIER_PROPOSER_TOKEN). docs/proposers.md.
#pragma once

#include "server/search/strategy.h"

namespace frontier {

// The factory MakeStrategy uses for strategy external (the coordinator's).
// Its clients throw ProposerUnavailable naming the gRPC code and message of
// a failed call; making one throws SpaceError for an unreadable token file.
ProposerFactory GrpcProposerFactory();

}  // namespace frontier
