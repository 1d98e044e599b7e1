// Where the `frontier` read commands (status, list, trials, pareto, report,
// compare) get their answers: a coordinator over gRPC (--server), or a store
// read directly (--db FILE, --store URL) through the code the coordinator
// answers with (server/rpc/proto_conversion.h, server/rpc/stored_report.h),
// so both print the same. Answers are the ExperimentService's messages and
// statuses; a store is only read, never migrated.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "frontier/v1/frontier.grpc.pb.h"
#include "server/cli/client.h"

namespace frontier {

class ExperimentSource {
 public:
  virtual ~ExperimentSource() = default;
  virtual grpc::Status GetExperiment(const v1::GetExperimentRequest& req, v1::Experiment* out) = 0;
  virtual grpc::Status ListExperiments(const v1::ListExperimentsRequest& req, v1::ListExperimentsResponse* out) = 0;
  virtual grpc::Status ListTrials(const v1::ListTrialsRequest& req, v1::ListTrialsResponse* out) = 0;
  virtual grpc::Status GetReport(const v1::GetReportRequest& req, v1::GetReportResponse* out) = 0;
  virtual grpc::Status ListArtifacts(const v1::ListArtifactsRequest& req, v1::ListArtifactsResponse* out) = 0;
  virtual grpc::Status ReadArtifact(const v1::ReadArtifactRequest& req, v1::ReadArtifactResponse* out) = 0;
  // The HTML report's link to the artifact folder for a page written to
  // `html_file` (GetReportRequest.artifacts_href): relative to the page when
  // the artifacts lie on this machine, else empty (the page names the command).
  virtual std::string ArtifactsHref(const std::string& html_file) const = 0;
  // Prints "frontier: WHAT: MESSAGE" (with a hint where to look) and returns
  // the exit code for the status (cli.h).
  virtual int Failure(const grpc::Status& status, const std::string& what) const = 0;
};

// The coordinator `client` talks to; it must outlive the source.
std::unique_ptr<ExperimentSource> ServerSource(Client& client);

// The store at `url` (a SQLite file, sqlite:PATH or postgresql://...), opened
// read-only (OpenMode::kReadOnly: never created, migrated or written; a
// schema other than this build's is refused, naming the command that
// migrates it). Throws std::runtime_error (no such file) and StoreError.
// The artifacts are read from `artifacts_dir` (an artifact store's folder,
// server/store/artifact_store.h); empty: ARTIFACTS beside a SQLite file
// (where `frontier run` keeps them) when that folder exists, else none.
std::unique_ptr<ExperimentSource> StoreSource(const std::string& url, const std::string& artifacts_dir = "");

}  // namespace frontier
