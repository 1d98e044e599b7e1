#include "server/rpc/artifact_reads.h"

#include "server/rpc/rpc_status.h"

namespace frontier {
namespace {

using grpc::Status;
using grpc::StatusCode;

// OK when the trial is one of the experiment's and there is an artifact store.
Status CheckTrial(Store& store, const ArtifactStore* artifacts, const std::string& where,
                  const std::string& experiment_id, const std::string& trial_id) {
  if (!store.GetExperiment(experiment_id)) {
    return Status(StatusCode::NOT_FOUND, "no experiment '" + experiment_id.substr(0, 100) + "'");
  }
  const std::optional<TrialRow> trial = store.GetTrial(trial_id);
  if (!trial || trial->experiment_id != experiment_id) {
    return Status(StatusCode::NOT_FOUND,
                  "experiment " + experiment_id + " has no trial '" + trial_id.substr(0, 100) + "'");
  }
  if (artifacts == nullptr) return Status(StatusCode::FAILED_PRECONDITION, "no artifact store: " + where);
  return Status::OK;
}

}  // namespace

Status ListStoredArtifacts(Store& store, const ArtifactStore* artifacts, const std::string& where,
                           const v1::ListArtifactsRequest& req, v1::ListArtifactsResponse* resp) {
  return Guarded("ListArtifacts", [&] {
    Status ok = CheckTrial(store, artifacts, where, req.experiment_id(), req.trial_id());
    if (!ok.ok()) return ok;
    for (const ArtifactFile& f : artifacts->List(req.trial_id())) {
      v1::Artifact* a = resp->add_artifacts();
      a->set_name(f.name);
      a->set_size(f.size);
    }
    for (const TrialRow& run : store.ListProfileRuns(req.trial_id())) resp->add_profile_runs(run.id);
    return Status::OK;
  });
}

Status ReadStoredArtifact(Store& store, const ArtifactStore* artifacts, const std::string& where,
                          const v1::ReadArtifactRequest& req, v1::ReadArtifactResponse* resp) {
  return Guarded("ReadArtifact", [&] {
    if (std::optional<std::string> problem = ArtifactNameProblem(req.name())) {
      return Status(StatusCode::INVALID_ARGUMENT, *problem);
    }
    Status ok = CheckTrial(store, artifacts, where, req.experiment_id(), req.trial_id());
    if (!ok.ok()) return ok;
    int64_t size = 0;
    resp->set_data(artifacts->Read(req.trial_id(), req.name(), req.offset(), &size));
    resp->set_size(size);
    return Status::OK;
  });
}

}  // namespace frontier
