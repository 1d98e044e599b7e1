#include "server/rpc/worker_service.h"

#include <algorithm>
#include <map>
#include <utility>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "server/rpc/proto_conversion.h"
#include "server/rpc/rpc_status.h"

namespace frontier {
using grpc::Status;
using grpc::StatusCode;

namespace {

// What TryLease's caller sees when nothing is pending: the poll is parked.
Status Parked() { return Status(StatusCode::ABORTED, "parked"); }

grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* ctx, const Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

}  // namespace

WorkerServiceImpl::WorkerServiceImpl(Scheduler& scheduler, int64_t max_wait_ms, CoordinatorMetrics& metrics,
                                     const ServerSecurity& security, ArtifactStore* artifacts)
    : security_(security),
      scheduler_(scheduler),
      max_wait_ms_(max_wait_ms),
      metrics_(metrics),
      artifacts_(artifacts) {}

grpc::ServerUnaryReactor* WorkerServiceImpl::RegisterWorker(grpc::CallbackServerContext* ctx,
                                                            const v1::RegisterWorkerRequest* req,
                                                            v1::RegisterWorkerResponse* resp) {
  if (Status denied = Authorize(*ctx, security_, Role::kWorker); !denied.ok()) return Respond(ctx, denied);
  auto register_worker = [=] {
    WorkerRecord w;
    w.host = req->host();
    w.device = req->device();
    w.device_name = req->device_name();
    w.device_count = std::max(1, req->device_count());
    w.version = req->version();
    w.peak_flops_json =
        nlohmann::json(std::map<std::string, double>(req->peak_flops().begin(), req->peak_flops().end()))
            .dump();
    resp->set_worker_id(scheduler_.RegisterWorker(w));
    metrics_.WorkerSeen(resp->worker_id());
    resp->set_lease_timeout_ms(scheduler_.options().lease_timeout_ms);
    resp->set_heartbeat_interval_ms(scheduler_.options().heartbeat_interval_ms);
    spdlog::info("worker {} registered: {} x{} ({})", resp->worker_id(), req->device_name(), w.device_count,
                 req->host());
    return Status::OK;
  };
  auto* reactor = ctx->DefaultReactor();
  calls_.Run([reactor, register_worker] { reactor->Finish(Guarded("RegisterWorker", register_worker)); });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::LeaseTrial(grpc::CallbackServerContext* ctx,
                                                        const v1::LeaseTrialRequest* req,
                                                        v1::LeaseTrialResponse* resp) {
  auto* reactor = ctx->DefaultReactor();
  if (Status denied = Authorize(*ctx, security_, Role::kWorker); !denied.ok()) {
    reactor->Finish(denied);
    return reactor;
  }
  metrics_.WorkerSeen(req->worker_id());
  calls_.Run([this, req, resp, reactor] {
    Status status =
        Guarded("LeaseTrial", [&] { return TryLease(req->worker_id(), resp) ? Status::OK : Parked(); });
    if (status.error_code() == StatusCode::ABORTED) {  // parked: the dispatcher answers it
      const int64_t wait = std::clamp<int64_t>(req->wait_ms(), 0, max_wait_ms_);
      std::lock_guard<std::mutex> lock(mu_);
      if (closed_) {  // the parked polls were answered for good: no one would answer this one
        reactor->Finish(Status::OK);
        return;
      }
      waiters_.push_back({reactor, req->worker_id(), resp,
                          std::chrono::steady_clock::now() + std::chrono::milliseconds(wait)});
      return;
    }
    reactor->Finish(status);
  });
  return reactor;
}

template <typename Body>
grpc::ServerUnaryReactor* WorkerServiceImpl::Answer(grpc::CallbackServerContext* ctx, const char* rpc,
                                                    const std::string& worker_id, Body&& body,
                                                    CallPool* pool) {
  if (Status denied = Authorize(*ctx, security_, Role::kWorker); !denied.ok()) return Respond(ctx, denied);
  metrics_.WorkerSeen(worker_id);
  auto* reactor = ctx->DefaultReactor();
  (pool != nullptr ? *pool : calls_).Run([reactor, rpc, body = std::forward<Body>(body)]() mutable {
    reactor->Finish(Guarded(rpc, body));
  });
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* ctx,
                                                       const v1::HeartbeatRequest* req,
                                                       v1::HeartbeatResponse* resp) {
  return Answer(ctx, "Heartbeat", req->worker_id(), [=] {  // runs on calls_: copies, no references
    const HeartbeatReply r = scheduler_.Heartbeat(req->worker_id(), req->trial_id(), req->attempt());
    resp->set_lease_valid(r.lease_valid);
    resp->set_stop(r.stop);
    return Status::OK;
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::ReportProgress(grpc::CallbackServerContext* ctx,
                                                            const v1::ReportProgressRequest* req,
                                                            v1::ReportProgressResponse* resp) {
  return Answer(
      ctx, "ReportProgress", req->worker_id(),
      [=] {  // runs on progress_calls_: copies, no references
        const std::string problem = ReportedJsonProblem("event_json", req->event_json());
        if (!problem.empty()) return Status(StatusCode::INVALID_ARGUMENT, problem);
        const ProgressReply r =
            scheduler_.Progress(req->worker_id(), req->trial_id(), req->attempt(), req->event_json());
        resp->set_stop(r.stop);
        resp->set_reason(r.reason);
        return Status::OK;
      },
      &progress_calls_);
}

grpc::ServerUnaryReactor* WorkerServiceImpl::CompleteTrial(grpc::CallbackServerContext* ctx,
                                                           const v1::CompleteTrialRequest* req,
                                                           v1::CompleteTrialResponse* resp) {
  return Answer(ctx, "CompleteTrial", req->worker_id(), [=] {  // runs on calls_: copies, no references
    const std::string problem = ReportedJsonProblem("result_json", req->result_json());
    if (!problem.empty()) return Status(StatusCode::INVALID_ARGUMENT, problem);
    std::optional<TrialRow> next;
    const Transition t = scheduler_.Complete(req->worker_id(), req->trial_id(), req->attempt(),
                                             req->result_json(), req->lease_next() ? &next : nullptr);
    resp->set_accepted(t == Transition::kApplied || t == Transition::kDuplicate);
    resp->set_reason(TransitionReason(t));
    if (t == Transition::kApplied)
      spdlog::info("trial {} finished (attempt {})", req->trial_id(), req->attempt());
    if (!resp->accepted()) spdlog::warn("trial {} result rejected: {}", req->trial_id(), resp->reason());
    if (req->lease_next()) AnswerLease(req->worker_id(), next, resp->mutable_next());
    return Status::OK;
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::FailTrial(grpc::CallbackServerContext* ctx,
                                                       const v1::FailTrialRequest* req,
                                                       v1::FailTrialResponse* resp) {
  return Answer(ctx, "FailTrial", req->worker_id(), [=] {  // runs on calls_: copies, no references
    const std::string problem = ReportedJsonProblem("result_json", req->result_json());
    if (!problem.empty()) return Status(StatusCode::INVALID_ARGUMENT, problem);
    bool retried = false;
    const Transition t = scheduler_.Fail(req->worker_id(), req->trial_id(), req->attempt(), req->error(),
                                         req->retryable(), req->result_json(), &retried);
    resp->set_accepted(t == Transition::kApplied || t == Transition::kDuplicate);
    resp->set_reason(TransitionReason(t));
    resp->set_retried(retried);
    if (t == Transition::kApplied && !req->retryable() && req->error().rfind("stopped:", 0) == 0) {
      spdlog::info("trial {} attempt {} {}", req->trial_id(), req->attempt(), req->error());
    } else if (t == Transition::kApplied) {
      spdlog::warn("trial {} attempt {} failed ({}): {}", req->trial_id(), req->attempt(),
                   retried ? "to be retried" : "final", req->error());
    }
    return Status::OK;
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::UploadArtifact(grpc::CallbackServerContext* ctx,
                                                            const v1::UploadArtifactRequest* req,
                                                            v1::UploadArtifactResponse* resp) {
  return Answer(ctx, "UploadArtifact", req->worker_id(), [=] {  // runs on calls_: copies, no references
    if (artifacts_ == nullptr) {
      return Status(StatusCode::FAILED_PRECONDITION,
                    "this coordinator keeps no artifacts (frontier-server --artifacts-dir DIR)");
    }
    // What the request alone can show is checked before the store is asked.
    if (std::optional<std::string> problem = ArtifactNameProblem(req->name())) {
      return Status(StatusCode::INVALID_ARGUMENT, *problem);
    }
    if (static_cast<int64_t>(req->data().size()) > artifacts_->limits().max_chunk_bytes) {
      return Status(StatusCode::INVALID_ARGUMENT,
                    "chunk of " + std::to_string(req->data().size()) + " bytes; the limit is " +
                        std::to_string(artifacts_->limits().max_chunk_bytes) + " bytes a chunk");
    }
    if (!scheduler_.Heartbeat(req->worker_id(), req->trial_id(), req->attempt()).lease_valid) {
      return Status(StatusCode::FAILED_PRECONDITION,
                    "trial " + req->trial_id().substr(0, 100) + " attempt " + std::to_string(req->attempt()) +
                        " is not leased to " + req->worker_id().substr(0, 100) +
                        ": artifacts are uploaded while the lease is held");
    }
    resp->set_stored(artifacts_->Write(req->trial_id(), req->attempt(), req->name(), req->offset(),
                                       req->data(), req->last()));
    if (req->last()) {
      spdlog::info("trial {} attempt {}: artifact {} stored ({} bytes)", req->trial_id(), req->attempt(),
                   req->name(), resp->stored());
    }
    return Status::OK;
  });
}

std::vector<std::string> WorkerServiceImpl::ParkedWorkers() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> ids;
  for (const Waiter& w : waiters_) ids.push_back(w.worker_id);
  return ids;
}

void WorkerServiceImpl::ServeWaiters(bool closing) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closing) closed_ = true;
  const auto now = std::chrono::steady_clock::now();
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    Status status = Status::OK;
    bool answered = closing || now >= it->deadline;
    if (!closing) {
      status = Guarded("LeaseTrial",
                       [&] { return TryLease(it->worker_id, it->response) ? Status::OK : Parked(); });
      if (status.error_code() != StatusCode::ABORTED) answered = true;
      if (status.error_code() == StatusCode::ABORTED) status = Status::OK;  // deadline: no trial
    }
    if (answered) {
      it->reactor->Finish(status);
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

bool WorkerServiceImpl::TryLease(const std::string& worker_id, v1::LeaseTrialResponse* resp) {
  return AnswerLease(worker_id, scheduler_.Lease(worker_id), resp);
}

bool WorkerServiceImpl::AnswerLease(const std::string& worker_id, const std::optional<TrialRow>& trial,
                                    v1::LeaseTrialResponse* resp) {
  if (!trial) {
    resp->set_has_trial(false);
    return false;
  }
  resp->set_has_trial(true);
  resp->set_trial_id(trial->id);
  resp->set_attempt(trial->attempt);
  resp->set_spec_json(trial->spec_json);
  resp->set_lease_timeout_ms(scheduler_.options().lease_timeout_ms);
  spdlog::info("trial {} leased to {} (attempt {})", trial->id, worker_id, trial->attempt);
  return true;
}

}  // namespace frontier
