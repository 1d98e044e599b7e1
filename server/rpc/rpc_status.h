// How the coordinator's errors become gRPC statuses, in one place: an invalid
// search space or trial spec is INVALID_ARGUMENT, an unreachable store
// UNAVAILABLE (the client may retry), an artifact store's refusal as
// ArtifactStatus says, anything else INTERNAL; and why a
// trial transition was refused, as the reason a worker is told.
#pragma once

#include <exception>
#include <string>

#include <grpcpp/support/status.h>
#include <spdlog/spdlog.h>

#include "search_spaces/search_space.h"
#include "search_spaces/trial_spec.h"
#include "server/store/artifact_store.h"
#include "server/store/store.h"

namespace frontier {

// An artifact store's refusal: a bad name, chunk or offset INVALID_ARGUMENT,
// past the trial's limits RESOURCE_EXHAUSTED, a missing file NOT_FOUND, a
// read past its end OUT_OF_RANGE, an older attempt FAILED_PRECONDITION, a
// folder that cannot be written INTERNAL (logged under `rpc`).
grpc::Status ArtifactStatus(const char* rpc, const ArtifactError& error);

// Runs `body` (which returns a grpc::Status), turning the exceptions it
// throws into statuses; store and internal errors are logged under `rpc`.
template <typename Body>
grpc::Status Guarded(const char* rpc, Body&& body) {
  try {
    return body();
  } catch (const SpaceError& e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const SpecError& e) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const ArtifactError& e) {
    return ArtifactStatus(rpc, e);
  } catch (const StoreError& e) {
    spdlog::error("{}: store unavailable: {}", rpc, e.what());
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string("store unavailable: ") + e.what());
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", rpc, e.what());
    return grpc::Status(grpc::StatusCode::INTERNAL, e.what());
  }
}

// "" for an applied transition, else why a result or failure was not
// recorded (a duplicate is accepted; stale and unknown are rejected).
std::string TransitionReason(Transition transition);

}  // namespace frontier
