// The CLI's connection to a coordinator's ExperimentService: one channel
// (TLS and the user token as proto/auth.h says), a deadline on every call,
// and the mapping of a failed call to a message on stderr and an exit code
// (cli.h).
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "frontier/v1/frontier.grpc.pb.h"
#include "proto/auth.h"

namespace frontier {

class Client {
 public:
  Client(const std::string& address, const ClientSecurity& security);

  v1::ExperimentService::Stub& stub() { return *stub_; }

  // A context whose deadline is `seconds` from now.
  std::unique_ptr<grpc::ClientContext> Context(int seconds = 30);

  // SubmitExperiment with an idempotency key (req.submit_id; a fresh random
  // one when empty), retried with the same key on UNAVAILABLE and
  // DEADLINE_EXCEEDED (kSubmitTries in all, 0.5, 1, 2 s apart, each retry
  // waiting up to kSubmitRetryDeadlineS for the coordinator; each noted on
  // stderr): a reply lost after the coordinator committed never creates a
  // second experiment. An unreachable coordinator fails in ~12.5 s.
  grpc::Status SubmitExperiment(v1::SubmitExperimentRequest req, v1::SubmitExperimentResponse* resp);
  static constexpr int kSubmitTries = 4;
  static constexpr int kSubmitRetryDeadlineS = 3;

  // Prints "frontier: WHAT: MESSAGE" (with a hint when the server is not
  // reachable) and returns the exit code for the status: kCliInvalid,
  // kCliDenied, kCliNotFound or kCliFailed.
  int Failure(const grpc::Status& status, const std::string& what) const;

 private:
  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ExperimentService::Stub> stub_;
};

}  // namespace frontier
