#include "server/proposer/grpc_proposer.h"

#include <chrono>
#include <cstdio>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "frontier/v1/proposer.grpc.pb.h"
#include "proto/auth.h"
#include "server/proposer/proposer_conversion.h"
#include "server/search/external.h"

namespace frontier {
namespace {

const char* CodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::CANCELLED: return "cancelled";
    case grpc::StatusCode::UNKNOWN: return "unknown error";
    case grpc::StatusCode::INVALID_ARGUMENT: return "invalid argument";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "no answer within the deadline";
    case grpc::StatusCode::NOT_FOUND: return "not found";
    case grpc::StatusCode::PERMISSION_DENIED: return "permission denied";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "resource exhausted";
    case grpc::StatusCode::FAILED_PRECONDITION: return "failed precondition";
    case grpc::StatusCode::UNIMPLEMENTED: return "no Proposer service there (unimplemented)";
    case grpc::StatusCode::INTERNAL: return "internal error";
    case grpc::StatusCode::UNAVAILABLE: return "unreachable";
    case grpc::StatusCode::UNAUTHENTICATED: return "unauthenticated (check token_file)";
    default: return "error";
  }
}

class GrpcProposerClient final : public ProposerClient {
 public:
  GrpcProposerClient(const SearchSpace& space, std::string address, const ClientSecurity& security,
                     int64_t deadline_ms)
      : space_(space),
        address_(std::move(address)),
        steps_(FullSteps(space_)),
        deadline_ms_(deadline_ms),
        stub_(v1::Proposer::NewStub(MakeClientChannel(address_, security))) {}

  ProposerAnswer Propose(const ProposerCall& call) override {
    const v1::ProposeRequest request = ToProposeRequest(space_, call, steps_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(deadline_ms_));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_) throw ProposerUnavailable("cancelled");
      context_ = &context;
    }
    v1::ProposeResponse response;
    const grpc::Status status = stub_->Propose(&context, request, &response);
    {
      std::lock_guard<std::mutex> lock(mu_);
      context_ = nullptr;
    }
    if (!status.ok()) {
      std::string message = CodeName(status.error_code());
      if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%g", static_cast<double>(deadline_ms_) / 1000.0);
        message += std::string(" (") + seconds + " s: the strategy's deadline_s; a slower proposer needs more)";
      }
      if (!status.error_message().empty()) message += ": " + status.error_message().substr(0, 300);
      throw ProposerUnavailable(message);
    }
    const size_t max_configs = static_cast<size_t>(std::max(64, call.count * 4));
    return FromProposeResponse(response, max_configs);
  }

  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    if (context_) context_->TryCancel();
  }

  std::string Where() const override { return address_; }

 private:
  const SearchSpace space_;
  const std::string address_;
  const int steps_;
  const int64_t deadline_ms_;
  std::unique_ptr<v1::Proposer::Stub> stub_;
  std::mutex mu_;
  grpc::ClientContext* context_ = nullptr;  // of the call in flight
  bool cancelled_ = false;
};

}  // namespace

ProposerFactory GrpcProposerFactory() {
  return [](const SearchSpace& space) -> std::unique_ptr<ProposerClient> {
    const nlohmann::json& options = space.strategy.options;
    ClientSecurity security;
    security.tls_ca_file = options.value("tls_ca", "");
    security.tls_cert_file = options.value("tls_cert", "");
    security.tls_key_file = options.value("tls_key", "");
    try {
      security.token = ReadToken(options.value("token_file", ""), "FRONTIER_PROPOSER_TOKEN");
    } catch (const std::exception& e) {
      throw SpaceError(space.source, 0, "strategy.token_file", e.what());
    }
    const auto deadline_ms = static_cast<int64_t>(options.value("deadline_s", 30.0) * 1000);
    try {
      return std::make_unique<GrpcProposerClient>(space, options.value("address", ""), security, deadline_ms);
    } catch (const SpaceError&) {
      throw;
    } catch (const std::exception& e) {
      throw SpaceError(space.source, 0, "strategy", std::string("external: ") + e.what());
    }
  };
}

}  // namespace frontier
