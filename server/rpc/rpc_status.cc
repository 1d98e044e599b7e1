#include "server/rpc/rpc_status.h"

namespace frontier {

grpc::Status ArtifactStatus(const char* rpc, const ArtifactError& error) {
  using grpc::StatusCode;
  switch (error.kind()) {
    case ArtifactError::Kind::kInvalid:
      return grpc::Status(StatusCode::INVALID_ARGUMENT, error.what());
    case ArtifactError::Kind::kExhausted:
      return grpc::Status(StatusCode::RESOURCE_EXHAUSTED, error.what());
    case ArtifactError::Kind::kNotFound:
      return grpc::Status(StatusCode::NOT_FOUND, error.what());
    case ArtifactError::Kind::kOutOfRange:
      return grpc::Status(StatusCode::OUT_OF_RANGE, error.what());
    case ArtifactError::Kind::kStale:
      return grpc::Status(StatusCode::FAILED_PRECONDITION, error.what());
    case ArtifactError::Kind::kIo:
      break;
  }
  spdlog::error("{}: {}", rpc, error.what());
  return grpc::Status(StatusCode::INTERNAL, std::string("artifact store: ") + error.what());
}

std::string TransitionReason(Transition t) {
  switch (t) {
    case Transition::kApplied:
      return "";
    case Transition::kDuplicate:
      return "already recorded for this attempt";
    case Transition::kStale:
      return "stale attempt: the trial's lease was lost or it already ended";
    case Transition::kNotFound:
      return "unknown trial";
  }
  return "";
}

}  // namespace frontier
