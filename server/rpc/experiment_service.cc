#include "server/rpc/experiment_service.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "search_spaces/input_bounds.h"
#include "search_spaces/search_space.h"
#include "server/rpc/artifact_reads.h"
#include "server/rpc/proto_conversion.h"
#include "server/rpc/rpc_status.h"
#include "server/rpc/stored_report.h"

namespace frontier {
using grpc::Status;
using grpc::StatusCode;

namespace {

Status NotFound(const std::string& id) { return Status(StatusCode::NOT_FOUND, "no experiment '" + id + "'"); }

// The caller as the log names it: a user name and role, never a token.
std::string CallerName(const Identity& who) {
  return who.user.empty() ? "anonymous (no tokens)" : who.user + " (" + RoleName(who.role) + ")";
}

// Why the submission's source name is refused ("" when it is not): it is
// quoted in every message about the space, so it is one line of UTF-8.
std::string SourceNameProblem(const std::string& name) {
  if (name.size() > ExperimentServiceImpl::kMaxSourceName) return "source_name: longer than 1024 characters";
  if (std::optional<InputFault> fault = FindEncodingFault(name)) {
    return "source_name: byte " + std::to_string(fault->offset) + ": " + fault->problem;
  }
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", c);
      return "source_name: byte " + std::to_string(i) + ": control character " + hex +
             "; the name must be one line of text";
    }
  }
  return "";
}

// Why the submission's idempotency key is refused ("" when it is not).
std::string SubmitIdProblem(const std::string& id) {
  constexpr size_t kMaxSubmitId = 128;
  const auto allowed = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' || c == '-';
  };
  const auto bad = std::find_if_not(id.begin(), id.end(), allowed);
  // The key is quoted only when every byte is of the allowed kind: no message carries a client's raw bytes.
  if (bad != id.end()) {
    return "submit_id: byte " + std::to_string(bad - id.begin()) +
           " is not of [A-Za-z0-9._:-]; a key is at most 128 characters of [A-Za-z0-9._:-]";
  }
  if (id.size() > kMaxSubmitId) {
    return "submit_id '" + Abbreviated(id, 64) + "': at most 128 characters of [A-Za-z0-9._:-]";
  }
  return "";
}

}  // namespace

ExperimentServiceImpl::ExperimentServiceImpl(Scheduler& scheduler, std::atomic<bool>& stopping,
                                             const ServerSecurity& security, ArtifactStore* artifacts)
    : security_(security),
      scheduler_(scheduler),
      store_(scheduler.store()),
      stopping_(stopping),
      artifacts_(artifacts) {}

Status ExperimentServiceImpl::SubmitExperiment(grpc::ServerContext* ctx,
                                               const v1::SubmitExperimentRequest* req,
                                               v1::SubmitExperimentResponse* resp) {
  Identity who;
  if (Status denied = Authorize(*ctx, security_, Role::kUser, &who); !denied.ok()) return denied;
  if (req->space_yaml().size() > kMaxSpaceBytes) {
    return Status(
        StatusCode::INVALID_ARGUMENT,
        "search-space file of " + std::to_string(req->space_yaml().size()) + " bytes; the limit is 1 MiB");
  }
  for (const std::string& problem :
       {SourceNameProblem(req->source_name()), SubmitIdProblem(req->submit_id())}) {
    if (!problem.empty()) return Status(StatusCode::INVALID_ARGUMENT, problem);
  }
  return Guarded("SubmitExperiment", [&] {
    const std::string source = req->source_name().empty() ? "<submitted>" : req->source_name();
    bool repeated = false;
    ExperimentRecord e = scheduler_.Submit(req->space_yaml(), source, who.user, req->submit_id(), &repeated);
    FillExperiment(store_, e, resp->mutable_experiment(), false);
    if (repeated) {
      spdlog::info("experiment {} '{}' submitted again by {} (submit_id {}): nothing created", e.id, e.name,
                   CallerName(who), req->submit_id());
    } else {
      spdlog::info("experiment {} '{}' submitted by {}: {} trials, {} combinations skipped", e.id, e.name,
                   CallerName(who), resp->experiment().counts().total(), e.skipped.size());
    }
    return Status::OK;
  });
}

Status ExperimentServiceImpl::GetExperiment(grpc::ServerContext* ctx, const v1::GetExperimentRequest* req,
                                            v1::Experiment* resp) {
  if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
  return Guarded("GetExperiment", [&] {
    auto e = store_.GetExperiment(req->experiment_id());
    if (!e) return NotFound(req->experiment_id());
    FillExperiment(store_, *e, resp, true);
    return Status::OK;
  });
}

Status ExperimentServiceImpl::ListExperiments(grpc::ServerContext* ctx, const v1::ListExperimentsRequest* req,
                                              v1::ListExperimentsResponse* resp) {
  if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
  return Guarded("ListExperiments", [&] {
    const int limit = req->limit() > 0 ? std::min(req->limit(), 10000) : 100;
    for (const auto& e : store_.ListExperiments(limit))
      FillExperiment(store_, e, resp->add_experiments(), false);
    return Status::OK;
  });
}

Status ExperimentServiceImpl::CancelExperiment(grpc::ServerContext* ctx,
                                               const v1::CancelExperimentRequest* req, v1::Experiment* resp) {
  Identity who;
  if (Status denied = Authorize(*ctx, security_, Role::kUser, &who); !denied.ok()) return denied;
  return Guarded("CancelExperiment", [&] {
    const std::string& id = req->experiment_id();
    const std::optional<ExperimentRecord> e = store_.GetExperiment(id);
    if (!e) return NotFound(id);
    // With tokens, an experiment is cancelled by the user who submitted it or by an admin.
    if (security_.auth_enabled() && who.role != Role::kAdmin && who.user != e->owner) {
      spdlog::warn("experiment {} cancel by {} refused: submitted by {}", id, CallerName(who), e->owner);
      const std::string owner = e->owner.empty() ? "nobody named (before tokens)" : e->owner;
      return Status(StatusCode::PERMISSION_DENIED, "experiment " + id + " was submitted by " + owner +
                                                       "; only its owner or an admin may cancel it");
    }
    if (!scheduler_.Cancel(id)) return NotFound(id);
    FillExperiment(store_, *store_.GetExperiment(id), resp, false);
    spdlog::info("experiment {} cancelled by {}", id, CallerName(who));
    return Status::OK;
  });
}

Status ExperimentServiceImpl::WatchExperiment(grpc::ServerContext* ctx, const v1::WatchExperimentRequest* req,
                                              grpc::ServerWriter<v1::ExperimentEvent>* writer) {
  if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
  return Guarded("WatchExperiment", [&] {
    const std::string& id = req->experiment_id();
    if (!store_.GetExperiment(id)) return NotFound(id);
    std::map<std::string, std::pair<std::string, int>> seen;  // trial -> (state, attempt)
    uint64_t changes = scheduler_.change_count();
    bool first = true;
    std::string paused;  // the last paused status sent (docs/proposers.md)
    while (!ctx->IsCancelled() && !stopping_) {
      auto e = store_.GetExperiment(id);
      v1::ExperimentEvent event;
      FillExperiment(store_, *e, event.mutable_experiment(), false);
      for (const TrialRow& t : store_.ListTrials(id)) {
        auto& last = seen[t.id];
        if (last == std::make_pair(t.state, t.attempt)) continue;
        last = {t.state, t.attempt};
        if (first) continue;  // the first event summarizes; later ones name each change
        FillTrial(t, event.mutable_trial(), false);
        event.set_message(t.id + " " + t.state + (t.error.empty() ? "" : ": " + t.error));
        if (!writer->Write(event)) return Status::OK;
      }
      if (!first && e->paused != paused) {
        event.clear_trial();
        event.set_message(e->paused.empty() ? "search resumed" : "search paused: " + e->paused);
        if (!writer->Write(event)) return Status::OK;
      }
      paused = e->paused;
      const bool final = e->state != experiment_state::kRunning;
      if (first || final) {
        event.clear_trial();
        event.set_message(first ? "watching " + id : "experiment " + e->state);
        if (!writer->Write(event)) return Status::OK;
      }
      first = false;
      if (final) return Status::OK;
      changes = scheduler_.WaitForChange(changes, 1000);
    }
    return Status::OK;
  });
}

Status ExperimentServiceImpl::ListTrials(grpc::ServerContext* ctx, const v1::ListTrialsRequest* req,
                                         v1::ListTrialsResponse* resp) {
  if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
  return Guarded("ListTrials", [&] {
    return FillTrialList(store_, *req, resp) ? Status::OK : NotFound(req->experiment_id());
  });
}

Status ExperimentServiceImpl::GetReport(grpc::ServerContext* ctx, const v1::GetReportRequest* req,
                                        v1::GetReportResponse* resp) {
  if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
  return Guarded("GetReport", [&] {
    ReportRequest request;
    request.experiment_id = req->experiment_id();
    request.format = req->format();
    request.front_only = req->front_only();
    request.wide = req->wide();
    request.compare.assign(req->compare().begin(), req->compare().end());
    request.artifacts = artifacts_;
    request.artifacts_href = req->artifacts_href().substr(0, 4096);
    std::optional<RenderedReport> rendered;
    try {
      rendered = RenderStoredReport(store_, request);
    } catch (const std::invalid_argument& e) {
      return Status(StatusCode::INVALID_ARGUMENT, e.what());
    }
    if (!rendered) return NotFound(req->experiment_id());
    resp->set_content(std::move(rendered->content));
    resp->set_content_type(std::move(rendered->content_type));
    return Status::OK;
  });
}

namespace {
constexpr const char* kNoArtifacts = "this coordinator keeps none (frontier-server --artifacts-dir DIR)";
}  // namespace

Status ExperimentServiceImpl::ListArtifacts(grpc::ServerContext* ctx, const v1::ListArtifactsRequest* req,
                                            v1::ListArtifactsResponse* resp) {
  if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
  return ListStoredArtifacts(store_, artifacts_, kNoArtifacts, *req, resp);
}

Status ExperimentServiceImpl::ReadArtifact(grpc::ServerContext* ctx, const v1::ReadArtifactRequest* req,
                                           v1::ReadArtifactResponse* resp) {
  if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
  return ReadStoredArtifact(store_, artifacts_, kNoArtifacts, *req, resp);
}

Status ExperimentServiceImpl::ProfileTrial(grpc::ServerContext* ctx, const v1::ProfileTrialRequest* req,
                                           v1::ProfileTrialResponse* resp) {
  Identity who;
  if (Status denied = Authorize(*ctx, security_, Role::kUser, &who); !denied.ok()) return denied;
  return Guarded("ProfileTrial", [&] {
    if (!store_.GetExperiment(req->experiment_id())) return NotFound(req->experiment_id());
    const std::optional<TrialRow> run =
        scheduler_.ProfileRun(req->experiment_id(), req->trial_id(), req->steps() == 0 ? 3 : req->steps(),
                              req->tool().empty() ? "libtorch" : req->tool());
    if (!run) {
      return Status(StatusCode::NOT_FOUND, "experiment " + req->experiment_id() + " has no trial '" +
                                               req->trial_id().substr(0, 100) + "' to profile");
    }
    FillTrial(*run, resp->mutable_run(), false);
    spdlog::info("trial {}: profile run {} queued by {}", req->trial_id(), run->id, CallerName(who));
    return Status::OK;
  });
}

Status ExperimentServiceImpl::GetTrial(grpc::ServerContext* ctx, const v1::GetTrialRequest* req,
                                       v1::Trial* resp) {
  if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
  return Guarded("GetTrial", [&] {
    const std::optional<TrialRow> trial = store_.GetTrial(req->trial_id());
    if (!trial || trial->experiment_id != req->experiment_id()) {
      return Status(StatusCode::NOT_FOUND, "experiment " + req->experiment_id().substr(0, 100) +
                                               " has no trial '" + req->trial_id().substr(0, 100) + "'");
    }
    FillTrial(*trial, resp, true);
    return Status::OK;
  });
}

}  // namespace frontier
