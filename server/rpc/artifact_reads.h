// ListArtifacts and ReadArtifact answered from a store and its artifact
// store (server/store/artifact_store.h): the one path for the coordinator's
// ExperimentService and the CLI's reads without a server (`frontier
// artifacts --db FILE`). Statuses as rpc_status.h says; never throws.
#pragma once

#include <grpcpp/support/status.h>

#include "frontier/v1/frontier.pb.h"
#include "server/store/artifact_store.h"
#include "server/store/store.h"

namespace frontier {

// NOT_FOUND for an unknown experiment or a trial not of it;
// FAILED_PRECONDITION when `artifacts` is null (`where` says how to set one).
grpc::Status ListStoredArtifacts(Store& store, const ArtifactStore* artifacts, const std::string& where,
                                 const v1::ListArtifactsRequest& req, v1::ListArtifactsResponse* resp);
grpc::Status ReadStoredArtifact(Store& store, const ArtifactStore* artifacts, const std::string& where,
                                const v1::ReadArtifactRequest& req, v1::ReadArtifactResponse* resp);

}  // namespace frontier
