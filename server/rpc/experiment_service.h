// The users' service (frontier.v1.ExperimentService): submit, get, list and
// cancel experiments, watch one, list its trials, render its report. Every
// RPC requires the user role (proto/auth.h) and translates between proto
// messages (proto_conversion.h) and the scheduler and store; errors become
// statuses as rpc_status.h says.
//
// Synchronous gRPC API: a WatchExperiment stream holds a server thread until
// its experiment ends, the client goes away or `stopping` is set.
// Thread-safe. The scheduler, `stopping` and `security` must outlive it.
#pragma once

#include <atomic>
#include <cstddef>

#include "frontier/v1/frontier.grpc.pb.h"
#include "proto/auth.h"
#include "server/scheduler/scheduler.h"
#include "server/store/artifact_store.h"

namespace frontier {

class ExperimentServiceImpl final : public v1::ExperimentService::Service {
 public:
  // Bounds on what the network may hand SubmitExperiment (INVALID_ARGUMENT
  // beyond them); the search-space parser bounds the rest (name, grid size).
  static constexpr size_t kMaxSpaceBytes = 1 << 20;  // 1 MiB
  static constexpr size_t kMaxSourceName = 1024;     // characters

  // `artifacts`: the store ListArtifacts and ReadArtifact read, and the HTML
  // report links; null: none.
  ExperimentServiceImpl(Scheduler& scheduler, std::atomic<bool>& stopping, const ServerSecurity& security,
                        ArtifactStore* artifacts = nullptr);

  grpc::Status SubmitExperiment(grpc::ServerContext* ctx, const v1::SubmitExperimentRequest* req,
                                v1::SubmitExperimentResponse* resp) override;
  grpc::Status GetExperiment(grpc::ServerContext* ctx, const v1::GetExperimentRequest* req,
                             v1::Experiment* resp) override;
  grpc::Status ListExperiments(grpc::ServerContext* ctx, const v1::ListExperimentsRequest* req,
                               v1::ListExperimentsResponse* resp) override;
  grpc::Status CancelExperiment(grpc::ServerContext* ctx, const v1::CancelExperimentRequest* req,
                                v1::Experiment* resp) override;
  grpc::Status WatchExperiment(grpc::ServerContext* ctx, const v1::WatchExperimentRequest* req,
                               grpc::ServerWriter<v1::ExperimentEvent>* writer) override;
  grpc::Status ListTrials(grpc::ServerContext* ctx, const v1::ListTrialsRequest* req,
                          v1::ListTrialsResponse* resp) override;
  // Formats: json (default), table, csv, html.
  grpc::Status GetReport(grpc::ServerContext* ctx, const v1::GetReportRequest* req,
                         v1::GetReportResponse* resp) override;
  grpc::Status ProfileTrial(grpc::ServerContext* ctx, const v1::ProfileTrialRequest* req,
                            v1::ProfileTrialResponse* resp) override;
  grpc::Status GetTrial(grpc::ServerContext* ctx, const v1::GetTrialRequest* req, v1::Trial* resp) override;
  grpc::Status ListArtifacts(grpc::ServerContext* ctx, const v1::ListArtifactsRequest* req,
                             v1::ListArtifactsResponse* resp) override;
  grpc::Status ReadArtifact(grpc::ServerContext* ctx, const v1::ReadArtifactRequest* req,
                            v1::ReadArtifactResponse* resp) override;

 private:
  const ServerSecurity& security_;
  Scheduler& scheduler_;
  Store& store_;
  std::atomic<bool>& stopping_;
  ArtifactStore* artifacts_;
};

}  // namespace frontier
