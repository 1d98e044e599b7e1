#include "server/cli/client.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <thread>

#include "server/cli/cli.h"

namespace frontier {
namespace {

// The CLI reads whole answers from its own coordinator: a report or a trial list of 100,000
// trials is tens of megabytes, past gRPC's default 4 MiB for a received message.
grpc::ChannelArguments LargeAnswers() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(1 << 30);
  return args;
}

}  // namespace

Client::Client(const std::string& address, const ClientSecurity& security)
    : address_(address),
      channel_(MakeClientChannel(address, security, LargeAnswers())),
      stub_(v1::ExperimentService::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> Client::Context(int seconds) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

namespace {

// "cli-" and 32 random hex digits: a key no other invocation picks.
std::string FreshSubmitId() {
  std::random_device device;
  std::string id = "cli-";
  for (int i = 0; i < 4; ++i) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(device()));
    id += hex;
  }
  return id;
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE ||
         s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

grpc::Status Client::SubmitExperiment(v1::SubmitExperimentRequest req, v1::SubmitExperimentResponse* resp) {
  if (req.submit_id().empty()) req.set_submit_id(FreshSubmitId());
  std::chrono::milliseconds pause(500);
  for (int attempt = 1;; ++attempt, pause *= 2) {
    // A retry waits a few seconds for the channel to connect (a call would
    // otherwise fail at once while gRPC backs off reconnecting).
    const std::unique_ptr<grpc::ClientContext> ctx = Context(attempt == 1 ? 30 : kSubmitRetryDeadlineS);
    ctx->set_wait_for_ready(attempt > 1);
    const grpc::Status s = stub_->SubmitExperiment(ctx.get(), req, resp);
    if (s.ok() || !Retryable(s) || attempt == kSubmitTries) return s;
    std::cerr << "frontier: submit: " << s.error_message() << "; trying again in " << pause.count() / 1000.0
              << " s with the same submit_id (" << attempt + 1 << " of " << kSubmitTries << ")\n";
    std::this_thread::sleep_for(pause);
  }
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
