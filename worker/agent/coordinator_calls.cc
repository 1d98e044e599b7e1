// The agent's calls to the coordinator's WorkerService and their retry rules
// (agent.h): Call (every RPC of the agent goes through it), how long a call
// keeps retrying (GivingUp, SleepUnless: Retry's patience against a drain or
// stop), registration (Register: the calibrated peaks, the heartbeat
// interval the coordinator asks for; Reregister once per forgotten worker
// id), a trial's end reported (Report: CompleteTrial, possibly with the
// slot's next lease; Fail: FailTrial), and the channel they travel on
// (MakeCoordinatorChannel). Heartbeats and progress are sent by Supervise
// (supervision.cc), artifacts by UploadArtifacts (trial_artifacts.cc), leases
// asked for by RunSlot (agent.cc), all through Call.
#include "worker/agent/agent.h"

#include <algorithm>
#include <cstdint>
#include <random>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "worker/agent/placement.h"
#include "worker/agent/result_line.h"
#include "worker/agent/worker_metrics.h"

namespace frontier {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// Deadline of the single report attempt made for a trial killed by RequestStop.
constexpr milliseconds kStopReportDeadline{1000};
constexpr milliseconds kDefaultHeartbeatInterval{10000};

std::chrono::system_clock::time_point DeadlineIn(milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

milliseconds JitteredBackoff(milliseconds backoff) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const int64_t half = std::max<int64_t>(1, backoff.count() / 2);
  return milliseconds(half + std::uniform_int_distribution<int64_t>(0, half)(random));
}

// The number at `pointer` in `document`, formatted, or "n/a".
std::string NumberAt(const json& document, const char* pointer, const char* format) {
  const json::json_pointer path(pointer);
  if (!document.contains(path) || !document.at(path).is_number()) return "n/a";
  return fmt::format(fmt::runtime(format), document.at(path).get<double>());
}

}  // namespace

bool Agent::GivingUp(Retry retry) const {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (retry) {
    case Retry::kOnce:
      return true;
    case Retry::kUntilDrain:
      return draining_;
    case Retry::kUntilStop:
      return stopping_ || (draining_ && Now() >= drain_deadline_);
  }
  return true;
}

bool Agent::SleepUnless(Retry retry, milliseconds delay) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, delay, [&] { return retry == Retry::kUntilDrain ? draining_ : stopping_; });
  }
  return !GivingUp(retry);
}

grpc::Status Agent::Call(const char* name, Retry retry, milliseconds deadline, const Rpc& rpc,
                         bool reregister) {
  milliseconds backoff = options_.retry_initial_backoff;
  int failures = 0;
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(deadline));
    const bool cancellable = retry == Retry::kUntilDrain;
    if (cancellable) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (draining_) return grpc::Status(grpc::StatusCode::CANCELLED, "worker draining");
      pending_leases_.insert(&context);
    }
    const std::string worker_id = this->worker_id();
    grpc::Status status = rpc(&context, worker_id);
    if (cancellable) {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_leases_.erase(&context);
    }
    if (status.ok()) {
      if (failures > 0) spdlog::info("{}: coordinator reachable again", name);
      return status;
    }

    const grpc::StatusCode code = status.error_code();
    if (reregister && (code == grpc::StatusCode::NOT_FOUND || code == grpc::StatusCode::UNAUTHENTICATED)) {
      spdlog::warn("{}: the coordinator does not know worker {} ({}); registering again", name, worker_id,
                   status.error_message());
      Reregister(worker_id);
      reregister = false;
      continue;
    }
    const bool transient =
        code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!transient || GivingUp(retry)) return status;
    const milliseconds delay = JitteredBackoff(backoff);
    if (failures++ % 10 == 0) {
      spdlog::warn("{}: coordinator unreachable ({}: {}); retrying in {} ms", name, static_cast<int>(code),
                   status.error_message(), delay.count());
    }
    if (!SleepUnless(retry, delay)) return status;
    backoff = std::min(backoff * 2, options_.retry_max_backoff);
  }
}

grpc::Status Agent::Register(Retry retry) {
  v1::RegisterWorkerRequest request;
  request.set_host(options_.host);
  request.set_device(NameOf(options_.device));
  request.set_device_name(options_.device_name);
  request.set_device_count(options_.slots);
  request.set_version(kWorkerVersion);
  if (calibration_.is_object()) {
    for (const auto& [dtype, peak] : calibration_["peaks"].items()) {
      if (peak.is_number()) (*request.mutable_peak_flops())[dtype] = peak.get<double>();
    }
  }
  v1::RegisterWorkerResponse response;
  grpc::Status status = Call(
      "RegisterWorker", retry, options_.rpc_timeout,
      [&](grpc::ClientContext* context, const std::string&) {
        return stub_->RegisterWorker(context, request, &response);
      },
      /*reregister=*/false);
  if (!status.ok()) return status;

  milliseconds interval(response.heartbeat_interval_ms());
  if (interval.count() <= 0) {
    interval = response.lease_timeout_ms() > 0 ? milliseconds(response.lease_timeout_ms() / 3)
                                               : kDefaultHeartbeatInterval;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  worker_id_ = response.worker_id();
  heartbeat_interval_ = interval;
  spdlog::info("registered as {}: {} ({}), {} slot(s); lease timeout {} ms, heartbeat every {} ms",
               worker_id_, NameOf(options_.device), options_.device_name, options_.slots, response.lease_timeout_ms(),
               interval.count());
  return status;
}

void Agent::Reregister(const std::string& stale_worker_id) {
  std::lock_guard<std::mutex> registration(registration_mutex_);
  if (worker_id() != stale_worker_id) return;  // another slot already registered again
  const grpc::Status status = Register(Retry::kUntilStop);
  if (!status.ok()) spdlog::error("registering again failed: {}", status.error_message());
}

void Agent::Report(const Lease& lease, const Outcome& outcome, std::optional<Lease>* next) {
  switch (outcome.kind) {
    case Outcome::Kind::kLeaseLost:
      if (options_.metrics) options_.metrics->TrialEnded(lease.trial_id, "lease_lost");
      spdlog::warn("trial {} (attempt {}): lease lost; trial killed, nothing reported", lease.trial_id,
                   lease.attempt);
      return;
    case Outcome::Kind::kFail:
      if (options_.metrics) {
        std::string ended = "failed";
        if (outcome.error.rfind("stopped:", 0) == 0) ended = "stopped";
        if (outcome.error == "worker shutting down") ended = "interrupted";
        options_.metrics->TrialEnded(lease.trial_id, ended);
      }
      Fail(lease, outcome.error, outcome.retryable, outcome.result_json);
      return;
    case Outcome::Kind::kComplete:
      break;
  }
  const json result = json::parse(outcome.result_json);
  if (options_.metrics) options_.metrics->TrialEnded(lease.trial_id, StringField(result, "status"));
  spdlog::info("trial {} (attempt {}) {}: median step {} ms, val acc {}", lease.trial_id, lease.attempt,
               StringField(result, "status"), NumberAt(result, "/step_time_ms/median", "{:.2f}"),
               NumberAt(result, "/val_accuracy", "{:.4f}"));
  const milliseconds deadline = GivingUp(Retry::kUntilStop) ? kStopReportDeadline : options_.rpc_timeout;
  // The slot's next trial comes with the completion when the slot may take
  // one now: a trial leased while a calibration waits would wait for it
  // without heartbeats (the turnstile is tried once, not waited for).
  const bool lease_next = next != nullptr && !GivingUp(Retry::kUntilDrain) &&
                          HostLock(options_.host_lock).Shared([] { return true; }) != nullptr &&
                          ReserveTrial();
  v1::CompleteTrialResponse response;
  const grpc::Status status = Call("CompleteTrial", Retry::kUntilStop, deadline,
                                   [&](grpc::ClientContext* context, const std::string& id) {
                                     v1::CompleteTrialRequest request;
                                     request.set_worker_id(id);
                                     request.set_trial_id(lease.trial_id);
                                     request.set_attempt(lease.attempt);
                                     request.set_result_json(outcome.result_json);
                                     request.set_lease_next(lease_next);
                                     return stub_->CompleteTrial(context, request, &response);
                                   });
  if (lease_next && status.ok() && response.next().has_trial()) {
    *next = Lease{response.next().trial_id(), response.next().attempt(), response.next().spec_json()};
  } else if (lease_next) {
    ReleaseTrial();
  }
  if (!status.ok()) {
    spdlog::error("trial {}: result not delivered: {}", lease.trial_id, status.error_message());
  } else if (!response.accepted()) {
    spdlog::warn("trial {} (attempt {}): result rejected: {}", lease.trial_id, lease.attempt,
                 response.reason());
  }
}

void Agent::Fail(const Lease& lease, const std::string& error, bool retryable,
                 const std::string& result_json) {
  const milliseconds deadline = GivingUp(Retry::kUntilStop) ? kStopReportDeadline : options_.rpc_timeout;
  v1::FailTrialResponse response;
  const grpc::Status status = Call("FailTrial", Retry::kUntilStop, deadline,
                                   [&](grpc::ClientContext* context, const std::string& id) {
                                     v1::FailTrialRequest request;
                                     request.set_worker_id(id);
                                     request.set_trial_id(lease.trial_id);
                                     request.set_attempt(lease.attempt);
                                     request.set_error(error);
                                     request.set_retryable(retryable);
                                     request.set_result_json(result_json);
                                     return stub_->FailTrial(context, request, &response);
                                   });
  if (!status.ok()) {
    spdlog::error("trial {} (attempt {}) failed: {}; the failure was not delivered: {}", lease.trial_id,
                  lease.attempt, error, status.error_message());
  } else if (response.accepted()) {
    // The coordinator decides whether it runs again (its retry policy, the attempts left).
    spdlog::warn("trial {} (attempt {}) failed ({}): {}", lease.trial_id, lease.attempt,
                 response.retried() ? "to be retried" : "final", error);
  } else {
    spdlog::warn("trial {} (attempt {}): failure rejected: {}", lease.trial_id, lease.attempt,
                 response.reason());
  }
}

std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address,
                                                      milliseconds max_reconnect_backoff,
                                                      const ClientSecurity& security) {
  grpc::ChannelArguments arguments;
  const int max_ms = static_cast<int>(max_reconnect_backoff.count());
  const int initial_ms = std::min(max_ms, 1000);
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial_ms);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, initial_ms);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_ms);
  return MakeClientChannel(address, security, arguments);
}

}  // namespace frontier
