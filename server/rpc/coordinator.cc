#include "server/rpc/coordinator.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>
#include <chrono>

#include <deque>
#include <map>

#include <nlohmann/json.hpp>

#include "frontier/v1/frontier.grpc.pb.h"
#include "proto/auth.h"
#include "server/rpc/coordinator_metrics.h"
#include "metrics/endpoint.h"
#include "server/store/measured_store.h"
#include "search_spaces/search_space.h"
#include "server/report/report.h"
#include "server/store/open_store.h"

namespace frontier {
namespace v1 = ::frontier::v1;
using grpc::Status;
using grpc::StatusCode;

namespace {

v1::TrialState ToProto(const std::string& state) {
  static const std::map<std::string, v1::TrialState> kStates = {
      {trial_state::kPending, v1::TRIAL_PENDING},     {trial_state::kRunning, v1::TRIAL_RUNNING},
      {trial_state::kCompleted, v1::TRIAL_COMPLETED}, {trial_state::kFailed, v1::TRIAL_FAILED},
      {trial_state::kDiverged, v1::TRIAL_DIVERGED},   {trial_state::kStopped, v1::TRIAL_STOPPED},
      {trial_state::kCancelled, v1::TRIAL_CANCELLED}};
  auto it = kStates.find(state);
  return it == kStates.end() ? v1::TRIAL_STATE_UNSPECIFIED : it->second;
}

v1::ExperimentState ExperimentStateToProto(const std::string& state) {
  if (state == experiment_state::kRunning) return v1::EXPERIMENT_RUNNING;
  if (state == experiment_state::kCompleted) return v1::EXPERIMENT_COMPLETED;
  if (state == experiment_state::kCancelled) return v1::EXPERIMENT_CANCELLED;
  return v1::EXPERIMENT_STATE_UNSPECIFIED;
}

void FillTrial(const TrialRow& t, v1::Trial* out, bool with_spec) {
  out->set_id(t.id);
  out->set_experiment_id(t.experiment_id);
  out->set_config_json(t.config_json);
  out->set_is_baseline(t.is_baseline);
  out->set_seed(t.seed);
  out->set_steps(t.steps);
  out->set_state(ToProto(t.state));
  out->set_attempt(t.attempt);
  out->set_worker_id(t.worker_id);
  out->set_result_json(t.result_json);
  out->set_error(t.error);
  if (with_spec) out->set_spec_json(t.spec_json);
}

void FillExperiment(Store& store, const ExperimentRecord& e, v1::Experiment* out, bool with_yaml) {
  out->set_id(e.id);
  out->set_name(e.name);
  out->set_state(ExperimentStateToProto(e.state));
  if (with_yaml) out->set_space_yaml(e.space_yaml);
  out->set_source_name(e.source_name);
  out->set_created_unix_ms(e.created_ms);
  for (const std::string& s : e.skipped) out->add_skipped(s);
  const TrialCountsRow c = store.CountTrials(e.id);
  v1::TrialCounts* counts = out->mutable_counts();
  counts->set_pending(c.pending);
  counts->set_running(c.running);
  counts->set_completed(c.completed);
  counts->set_failed(c.failed);
  counts->set_diverged(c.diverged);
  counts->set_stopped(c.stopped);
  counts->set_cancelled(c.cancelled);
  counts->set_total(c.total);
}

// Runs `body`, turning the coordinator's exceptions into RPC statuses.
template <typename Body>
Status Guarded(const char* rpc, Body&& body) {
  try {
    return body();
  } catch (const SpaceError& e) {
    return Status(StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const SpecError& e) {
    return Status(StatusCode::INVALID_ARGUMENT, e.what());
  } catch (const StoreError& e) {
    spdlog::error("{}: store unavailable: {}", rpc, e.what());
    return Status(StatusCode::UNAVAILABLE, std::string("store unavailable: ") + e.what());
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", rpc, e.what());
    return Status(StatusCode::INTERNAL, e.what());
  }
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

}  // namespace

class Coordinator::ExperimentServiceImpl final : public v1::ExperimentService::Service {
 public:
  ExperimentServiceImpl(Scheduler& scheduler, std::atomic<bool>& stopping, const ServerSecurity& security)
      : security_(security), scheduler_(scheduler), store_(scheduler.store()), stopping_(stopping) {}

  Status SubmitExperiment(grpc::ServerContext* ctx, const v1::SubmitExperimentRequest* req,
                          v1::SubmitExperimentResponse* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
    // Bounds on what the network may hand us; the parser bounds the rest (grid size).
    constexpr size_t kMaxSpaceBytes = 1 << 20, kMaxSourceName = 1024;
    if (req->space_yaml().size() > kMaxSpaceBytes) {
      return Status(StatusCode::INVALID_ARGUMENT, "search-space file of " + std::to_string(req->space_yaml().size()) +
                                                      " bytes; the limit is 1 MiB");
    }
    if (req->source_name().size() > kMaxSourceName) {
      return Status(StatusCode::INVALID_ARGUMENT, "source name longer than 1024 characters");
    }
    return Guarded("SubmitExperiment", [&] {
      const std::string source = req->source_name().empty() ? "<submitted>" : req->source_name();
      ExperimentRecord e = scheduler_.Submit(req->space_yaml(), source);
      FillExperiment(store_, e, resp->mutable_experiment(), false);
      spdlog::info("experiment {} '{}' submitted: {} trials, {} combinations skipped", e.id, e.name,
                   resp->experiment().counts().total(), e.skipped.size());
      return Status::OK;
    });
  }

  Status GetExperiment(grpc::ServerContext* ctx, const v1::GetExperimentRequest* req, v1::Experiment* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
    return Guarded("GetExperiment", [&] {
      auto e = store_.GetExperiment(req->experiment_id());
      if (!e) return NotFound(req->experiment_id());
      FillExperiment(store_, *e, resp, true);
      return Status::OK;
    });
  }

  Status ListExperiments(grpc::ServerContext* ctx, const v1::ListExperimentsRequest* req,
                         v1::ListExperimentsResponse* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
    return Guarded("ListExperiments", [&] {
      const int limit = req->limit() > 0 ? std::min(req->limit(), 10000) : 100;
      for (const auto& e : store_.ListExperiments(limit)) FillExperiment(store_, e, resp->add_experiments(), false);
      return Status::OK;
    });
  }

  Status CancelExperiment(grpc::ServerContext* ctx, const v1::CancelExperimentRequest* req,
                          v1::Experiment* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
    return Guarded("CancelExperiment", [&] {
      if (!scheduler_.Cancel(req->experiment_id())) return NotFound(req->experiment_id());
      FillExperiment(store_, *store_.GetExperiment(req->experiment_id()), resp, false);
      spdlog::info("experiment {} cancelled", req->experiment_id());
      return Status::OK;
    });
  }

  Status WatchExperiment(grpc::ServerContext* ctx, const v1::WatchExperimentRequest* req,
                         grpc::ServerWriter<v1::ExperimentEvent>* writer) override {
    if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
    return Guarded("WatchExperiment", [&] {
      const std::string& id = req->experiment_id();
      if (!store_.GetExperiment(id)) return NotFound(id);
      std::map<std::string, std::pair<std::string, int>> seen;  // trial -> (state, attempt)
      uint64_t changes = scheduler_.change_count();
      bool first = true;
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

  Status ListTrials(grpc::ServerContext* ctx, const v1::ListTrialsRequest* req, v1::ListTrialsResponse* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
    return Guarded("ListTrials", [&] {
      if (!store_.GetExperiment(req->experiment_id())) return NotFound(req->experiment_id());
      for (const TrialRow& t : store_.ListTrials(req->experiment_id())) FillTrial(t, resp->add_trials(), true);
      return Status::OK;
    });
  }

  Status GetReport(grpc::ServerContext* ctx, const v1::GetReportRequest* req, v1::GetReportResponse* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kUser); !denied.ok()) return denied;
    return Guarded("GetReport", [&] {
      auto e = store_.GetExperiment(req->experiment_id());
      if (!e) return NotFound(req->experiment_id());
      using Clock = std::chrono::steady_clock;
      const auto t0 = Clock::now();
      // The goals stored at submission are all a report needs; older experiments parse their space.
      std::optional<SearchSpace> goals;
      if (e->goals_json != "{}") goals = GoalsOnlySpace(e->name, nlohmann::json::parse(e->goals_json));
      const SearchSpace space = goals ? std::move(*goals) : ParseStoredSearchSpace(e->space_yaml, e->source_name);
      const auto t1 = Clock::now();
      // Each row is read for what the report needs and released in turn.
      ReportBuilder builder(e->id, space);
      std::vector<TrialRow> rows = store_.ListTrialOutcomes(e->id);
      const auto t2 = Clock::now();
      for (TrialRow& row : rows) {
        TrialRecord r;
        r.trial_id = std::move(row.id);
        r.config_key = std::move(row.config_json);  // stored as ConfigKey(config)
        r.is_baseline = row.is_baseline;
        r.seed = row.seed;
        r.state = std::move(row.state);
        builder.Add(std::move(r), row.result_json);
        row = TrialRow();
      }
      rows.clear();
      rows.shrink_to_fit();
      const auto t3 = Clock::now();
      Report report = builder.Build(req->front_only());
      const auto t4 = Clock::now();
      const auto ms = [](Clock::time_point a, Clock::time_point b) {
        return std::chrono::duration<double, std::milli>(b - a).count();
      };
      spdlog::info("report {}: {} configs; space {:.0f} ms, trials read {:.0f} ms, parsed {:.0f} ms, summarized {:.0f} ms",
                    e->id, report.configs.size(), ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4));
      const std::string& format = req->format();
      if (format.empty() || format == "json") {
        resp->set_content(ReportToJson(report).dump(2));
        resp->set_content_type("application/json");
      } else if (format == "table") {
        resp->set_content(RenderTable(report));
        resp->set_content_type("text/plain");
      } else if (format == "csv") {
        resp->set_content(RenderCsv(report));
        resp->set_content_type("text/csv");
      } else if (format == "html") {
        resp->set_content(RenderHtml(report));
        resp->set_content_type("text/html");
      } else {
        return Status(StatusCode::INVALID_ARGUMENT,
                      "unknown report format '" + format + "'; expected json, table, csv or html");
      }
      return Status::OK;
    });
  }

 private:
  static Status NotFound(const std::string& id) {
    return Status(StatusCode::NOT_FOUND, "no experiment '" + id + "'");
  }

  const ServerSecurity& security_;
  Scheduler& scheduler_;
  Store& store_;
  std::atomic<bool>& stopping_;
};

// The workers' service on gRPC's callback API, so that hundreds of parked
// LeaseTrial long polls hold no server thread: a parked poll is a waiter that
// the dispatcher thread answers when a trial becomes available or its
// deadline passes.
class Coordinator::WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  WorkerServiceImpl(Scheduler& scheduler, int64_t max_wait_ms, CoordinatorMetrics& metrics,
                    const ServerSecurity& security)
      : security_(security), scheduler_(scheduler), max_wait_ms_(max_wait_ms), metrics_(metrics) {}

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* ctx, const v1::RegisterWorkerRequest* req,
                                           v1::RegisterWorkerResponse* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kWorker); !denied.ok()) return Respond(ctx, denied);
    return Respond(ctx, Guarded("RegisterWorker", [&] {
      WorkerRecord w;
      w.host = req->host();
      w.device = req->device();
      w.device_name = req->device_name();
      w.device_count = std::max(1, req->device_count());
      w.version = req->version();
      w.peak_flops_json = nlohmann::json(std::map<std::string, double>(req->peak_flops().begin(),
                                                                       req->peak_flops().end()))
                              .dump();
      resp->set_worker_id(scheduler_.RegisterWorker(w));
      metrics_.WorkerSeen(resp->worker_id());
      resp->set_lease_timeout_ms(scheduler_.options().lease_timeout_ms);
      resp->set_heartbeat_interval_ms(scheduler_.options().heartbeat_interval_ms);
      spdlog::info("worker {} registered: {} x{} ({})", resp->worker_id(), req->device_name(), w.device_count,
                   req->host());
      return Status::OK;
    }));
  }

  grpc::ServerUnaryReactor* LeaseTrial(grpc::CallbackServerContext* ctx, const v1::LeaseTrialRequest* req,
                                       v1::LeaseTrialResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    if (Status denied = Authorize(*ctx, security_, Role::kWorker); !denied.ok()) {
      reactor->Finish(denied);
      return reactor;
    }
    metrics_.WorkerSeen(req->worker_id());
    Status status = Guarded("LeaseTrial", [&] { return TryLease(req->worker_id(), resp) ? Status::OK : Parked(); });
    if (status.error_code() == StatusCode::ABORTED) {  // parked: the dispatcher answers it
      const int64_t wait = std::clamp<int64_t>(req->wait_ms(), 0, max_wait_ms_);
      std::lock_guard<std::mutex> lock(mu_);
      waiters_.push_back({reactor, req->worker_id(), resp,
                          std::chrono::steady_clock::now() + std::chrono::milliseconds(wait)});
      return reactor;
    }
    reactor->Finish(status);
    return reactor;
  }

  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx, const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kWorker); !denied.ok()) return Respond(ctx, denied);
    metrics_.WorkerSeen(req->worker_id());
    return Respond(ctx, Guarded("Heartbeat", [&] {
      const HeartbeatReply r = scheduler_.Heartbeat(req->worker_id(), req->trial_id(), req->attempt());
      resp->set_lease_valid(r.lease_valid);
      resp->set_stop(r.stop);
      return Status::OK;
    }));
  }

  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* ctx, const v1::ReportProgressRequest* req,
                                           v1::ReportProgressResponse* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kWorker); !denied.ok()) return Respond(ctx, denied);
    metrics_.WorkerSeen(req->worker_id());
    return Respond(ctx, Guarded("ReportProgress", [&] {
      const ProgressReply r = scheduler_.Progress(req->worker_id(), req->trial_id(), req->attempt(), req->event_json());
      resp->set_stop(r.stop);
      resp->set_reason(r.reason);
      return Status::OK;
    }));
  }

  grpc::ServerUnaryReactor* CompleteTrial(grpc::CallbackServerContext* ctx, const v1::CompleteTrialRequest* req,
                                          v1::CompleteTrialResponse* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kWorker); !denied.ok()) return Respond(ctx, denied);
    metrics_.WorkerSeen(req->worker_id());
    return Respond(ctx, Guarded("CompleteTrial", [&] {
      const Transition t = scheduler_.Complete(req->worker_id(), req->trial_id(), req->attempt(), req->result_json());
      resp->set_accepted(t == Transition::kApplied || t == Transition::kDuplicate);
      resp->set_reason(TransitionReason(t));
      if (t == Transition::kApplied) spdlog::info("trial {} finished (attempt {})", req->trial_id(), req->attempt());
      if (!resp->accepted()) spdlog::warn("trial {} result rejected: {}", req->trial_id(), resp->reason());
      return Status::OK;
    }));
  }

  grpc::ServerUnaryReactor* FailTrial(grpc::CallbackServerContext* ctx, const v1::FailTrialRequest* req,
                                      v1::FailTrialResponse* resp) override {
    if (Status denied = Authorize(*ctx, security_, Role::kWorker); !denied.ok()) return Respond(ctx, denied);
    metrics_.WorkerSeen(req->worker_id());
    return Respond(ctx, Guarded("FailTrial", [&] {
      const Transition t = scheduler_.Fail(req->worker_id(), req->trial_id(), req->attempt(), req->error(),
                                           req->retryable(), req->result_json());
      resp->set_accepted(t == Transition::kApplied || t == Transition::kDuplicate);
      resp->set_reason(TransitionReason(t));
      if (t == Transition::kApplied && !req->retryable() && req->error().rfind("stopped:", 0) == 0) {
        spdlog::info("trial {} attempt {} {}", req->trial_id(), req->attempt(), req->error());
      } else if (t == Transition::kApplied) {
        spdlog::warn("trial {} attempt {} failed ({}): {}", req->trial_id(), req->attempt(),
                     req->retryable() ? "retryable" : "final", req->error());
      }
      return Status::OK;
    }));
  }

  // The workers whose LeaseTrial polls are parked now.
  std::vector<std::string> ParkedWorkers() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> ids;
    for (const Waiter& w : waiters_) ids.push_back(w.worker_id);
    return ids;
  }

  // Answers parked polls: with a trial when one can be leased, empty at their deadline, or all when `closing`.
  void ServeWaiters(bool closing) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      Status status = Status::OK;
      bool answered = closing || now >= it->deadline;
      if (!closing) {
        status = Guarded("LeaseTrial", [&] { return TryLease(it->worker_id, it->response) ? Status::OK : Parked(); });
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

 private:
  struct Waiter {
    grpc::ServerUnaryReactor* reactor;
    std::string worker_id;
    v1::LeaseTrialResponse* response;
    std::chrono::steady_clock::time_point deadline;
  };

  static Status Parked() { return Status(StatusCode::ABORTED, "parked"); }

  static grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* ctx, const Status& status) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  bool TryLease(const std::string& worker_id, v1::LeaseTrialResponse* resp) {
    auto trial = scheduler_.Lease(worker_id);
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

  const ServerSecurity& security_;
  Scheduler& scheduler_;
  int64_t max_wait_ms_;
  CoordinatorMetrics& metrics_;
  std::mutex mu_;
  std::deque<Waiter> waiters_;
};

Coordinator::Coordinator(CoordinatorOptions options) : options_(std::move(options)) {
  CoordinatorMetricsOptions metrics_options;
  metrics_options.worker_connected_within = std::chrono::milliseconds(options_.scheduler.lease_timeout_ms);
  metrics_ = std::make_unique<CoordinatorMetrics>(metrics_options);
  store_ = std::make_unique<MeasuredStore>(OpenStore(options_.store), *metrics_);
  scheduler_ = std::make_unique<Scheduler>(*store_, clock_, options_.scheduler);
  experiments_ = std::make_unique<ExperimentServiceImpl>(*scheduler_, stopping_, options_.security);
  workers_ = std::make_unique<WorkerServiceImpl>(*scheduler_, options_.max_lease_wait_ms, *metrics_, options_.security);
}

Coordinator::~Coordinator() { Shutdown(); }

int Coordinator::Start() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, MakeServerCredentials(options_.security), &port_);
  builder.RegisterService(experiments_.get());
  builder.RegisterService(workers_.get());
  builder.SetMaxReceiveMessageSize(4 << 20);  // results and specs are kilobytes; a space file at most 1 MiB
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(metrics_->MakeRpcInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) throw std::runtime_error("cannot listen on " + options_.listen);
  dispatcher_ = std::thread([this] { RunDispatcher(); });
  return port_;
}

void Coordinator::RunDispatcher() {
  uint64_t changes = scheduler_->change_count();
  auto last_tick = std::chrono::steady_clock::now();
  auto last_metrics = last_tick;
  while (!stopping_) {
    changes = scheduler_->WaitForChange(changes, 100);
    const auto now = std::chrono::steady_clock::now();
    if (now - last_tick >= std::chrono::milliseconds(250)) {
      try {
        scheduler_->Tick();
      } catch (const std::exception& e) {
        spdlog::error("lease expiry failed: {}", e.what());
      }
      last_tick = now;
    }
    if (metrics_served_ && now - last_metrics >= std::chrono::seconds(1)) {
      RefreshMetrics();
      last_metrics = now;
    }
    workers_->ServeWaiters(false);
  }
}

void Coordinator::RefreshMetrics() {
  try {
    metrics_->Refresh(*store_, workers_->ParkedWorkers());
  } catch (const std::exception& e) {
    spdlog::warn("metrics refresh failed: {}", e.what());
  }
}

int Coordinator::ServeMetrics(const std::string& address) {
  metrics_endpoint_ = std::make_unique<MetricsEndpoint>(address, metrics_->registry());
  RefreshMetrics();  // the first scrape already sees the store
  metrics_served_ = true;
  return metrics_endpoint_->port();
}

std::string Coordinator::metrics_url() const { return metrics_endpoint_ ? metrics_endpoint_->url() : ""; }

void Coordinator::Shutdown() {
  if (stopping_.exchange(true)) return;
  if (dispatcher_.joinable()) dispatcher_.join();
  workers_->ServeWaiters(true);
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

void Coordinator::Wait() {
  if (server_) server_->Wait();
}

}  // namespace frontier
