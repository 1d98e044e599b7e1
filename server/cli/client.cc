#include "server/cli/client.h"

#include <chrono>
#include <iostream>

#include "server/cli/cli.h"

namespace frontier {

Client::Client(const std::string& address, const ClientSecurity& security)
    : address_(address),
      channel_(MakeClientChannel(address, security)),
      stub_(v1::ExperimentService::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> Client::Context(int seconds) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

int Client::Failure(const grpc::Status& s, const std::string& what) const {
  std::cerr << "frontier: " << what << ": " << s.error_message();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    std::cerr << " (is frontier-server running at " << address_ << "?)";
  }
  std::cerr << "\n";
  if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) return kCliInvalid;
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
      s.error_code() == grpc::StatusCode::PERMISSION_DENIED) {
    return kCliDenied;
  }
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return kCliNotFound;
  return kCliFailed;
}

}  // namespace frontier
