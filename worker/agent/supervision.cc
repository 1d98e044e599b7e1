// Agent::Supervise and Agent::ClassifyOutOfMemory (agent.h): one running
// trial process, from its first line to how it ended. While it runs: its
// heartbeats (a lost lease kills it and nothing is reported; the
// coordinator's stop is asked of it through its stop file, then SIGTERM),
// its progress and eval events forwarded (progress at most once per
// progress_interval), every event told to the worker's metrics, and its time
// limit, a drain's deadline and a stop. Then which failures are final and
// which are retried: final are a stop asked by the coordinator, a result
// that breaks the protocol's schema, a command trial's line that is not a
// JSON object, a failed result of error_kind spec, precision, out_of_memory,
// incorrect or plugin, and running out of memory (ClassifyOutOfMemory);
// retryable are a crash (no result), a timeout (error_kind timeout), a worker
// shutting down, an unknown status and any other failed result: whether they
// run again is the coordinator's decision (server/scheduler/retry_policy.h).
#include "worker/agent/agent.h"

#include <algorithm>
#include <optional>
#include <string>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "search_spaces/input_bounds.h"
#include "worker/agent/result_line.h"
#include "worker/agent/trial_protocol.h"
#include "worker/agent/worker_metrics.h"
#include "worker/host.h"

namespace frontier {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// Evidence of an allocation failure in a crashed trial's error (its stderr tail).
bool MentionsAllocationFailure(const std::string& text) {
  for (const char* sign :
       {"std::bad_alloc", "can't allocate memory", "Cannot allocate memory", "out of memory"}) {
    if (text.find(sign) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

Agent::Outcome Agent::Supervise(const Lease& lease, const Launch& launch, TrialProcess& process) {
  const milliseconds started = Now();
  const milliseconds timeout_at = started + launch.timeout;
  milliseconds heartbeat_interval;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    heartbeat_interval = heartbeat_interval_;
  }
  milliseconds next_heartbeat = started + heartbeat_interval;
  milliseconds last_progress = started - options_.progress_interval;
  bool output_closed = false;
  bool reporting_failed = false;
  std::string result_line;
  const auto stopped = [&](const std::string& reason) {
    // The protocol's polite request, then SIGTERM. A new file: the trial may have put a FIFO or a link there.
    if (const std::string problem = WriteNewFile(launch.stop_file, reason + "\n"); !problem.empty()) {
      spdlog::warn("trial {}: the stop file: {}", lease.trial_id, problem);
    }
    process.Terminate(options_.kill_grace);
    return Outcome{Outcome::Kind::kFail, "stopped: " + reason, /*retryable=*/false, ""};
  };

  for (;;) {
    const milliseconds now = Now();
    bool stop_now;
    bool drain_expired;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_now = stopping_;
      drain_expired = draining_ && now >= drain_deadline_;
    }
    if (stop_now || drain_expired) {
      process.Terminate(stop_now ? milliseconds(0) : options_.kill_grace);
      return Outcome{Outcome::Kind::kFail, "worker shutting down", /*retryable=*/true, ""};
    }
    if (now >= timeout_at) {
      process.Terminate(options_.kill_grace);
      // error_kind timeout: the coordinator retries it only where the space asks (retry_policy.h).
      const std::string error = launch.what + " timed out after " + Seconds(launch.timeout) + " s";
      const json result = {{"event", "result"}, {"schema", 1}, {"status", "failed"}, {"error_kind", "timeout"},
                           {"error", error}};
      return Outcome{Outcome::Kind::kFail, error, /*retryable=*/true, result.dump()};
    }
    if (now >= next_heartbeat) {
      next_heartbeat = now + heartbeat_interval;
      v1::HeartbeatResponse response;
      const grpc::Status status = Call("Heartbeat", Retry::kOnce, options_.rpc_timeout,
                                       [&](grpc::ClientContext* context, const std::string& worker_id) {
                                         v1::HeartbeatRequest request;
                                         request.set_worker_id(worker_id);
                                         request.set_trial_id(lease.trial_id);
                                         request.set_attempt(lease.attempt);
                                         return stub_->Heartbeat(context, request, &response);
                                       });
      if ((status.ok() && !response.lease_valid()) || status.error_code() == grpc::StatusCode::NOT_FOUND) {
        process.Terminate(options_.kill_grace);
        return Outcome{Outcome::Kind::kLeaseLost, "lease lost", /*retryable=*/true, ""};
      }
      if (status.ok() && response.stop()) return stopped("the coordinator asked to stop the trial");
      if (!status.ok())
        spdlog::warn("trial {}: heartbeat failed: {}", lease.trial_id, status.error_message());
    }

    const milliseconds poll_from = Now();
    const milliseconds wait = std::min({next_heartbeat, timeout_at, poll_from + kSupervisePoll}) - poll_from;
    if (output_closed) {
      if (std::optional<ProcessExit> exit = process.Wait(std::max(wait, milliseconds(0)))) {
        if (result_line.empty()) {
          return Outcome{Outcome::Kind::kFail,
                         launch.what + " ended without a result (" + exit->Describe() +
                             "); stderr: " + process.StderrTail(),
                         /*retryable=*/true, ""};
        }
        const json result = json::parse(result_line);
        if (std::optional<std::string> problem = ResultSchemaProblem(result)) {
          return Outcome{Outcome::Kind::kFail,
                         launch.what + " printed a result that breaks the trial protocol: " + *problem +
                             "; stderr: " + process.StderrTail(),
                         /*retryable=*/false, ""};
        }
        const std::string status = StringField(result, "status");
        if (status == "completed" || status == "diverged") {
          return Outcome{Outcome::Kind::kComplete, "", /*retryable=*/false, result_line};
        }
        if (status == "failed") {
          // Final, not retried: a bad spec or precision, out of memory, an output the
          // trial found wrong itself (incorrect: another attempt computes the same thing),
          // and a plugin that does not load (the spec names the same file on every worker).
          const std::string kind = StringField(result, "error_kind");
          return Outcome{Outcome::Kind::kFail, StringField(result, "error"),
                         /*retryable=*/kind != "spec" && kind != "precision" && kind != "out_of_memory" &&
                             kind != "incorrect" && kind != "plugin",
                         result_line};
        }
        return Outcome{Outcome::Kind::kFail,
                       launch.what + " printed a result with unknown status '" + status + "'",
                       /*retryable=*/true, result_line};
      }
      continue;
    }

    std::string line;
    const TrialProcess::ReadStatus read = process.ReadLine(std::max(wait, milliseconds(0)), &line);
    if (read == TrialProcess::ReadStatus::kEnd) output_closed = true;
    if (read != TrialProcess::ReadStatus::kLine) continue;

    const json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object() && launch.strict_output) {
      process.Terminate(options_.kill_grace);
      return Outcome{Outcome::Kind::kFail,
                     launch.what +
                         " printed a line that is not a JSON object (standard output is for the "
                         "protocol's lines; logs go to standard error): " +
                         Abbreviated(line, 200),
                     /*retryable=*/false, ""};
    }
    if (!event.is_object()) {
      spdlog::debug("trial {}: ignoring output that is not a JSON object: {}", lease.trial_id, line);
      continue;
    }
    const std::string kind = StringField(event, "event");
    if (kind == "result") result_line = line;
    if (options_.metrics) options_.metrics->TrialEvent(lease.trial_id, event);
    if (kind != "progress" && kind != "eval") continue;
    if (kind == "progress") {
      if (Now() - last_progress < options_.progress_interval) continue;
      last_progress = Now();
    }
    v1::ReportProgressResponse response;
    const grpc::Status status = Call("ReportProgress", Retry::kOnce, options_.rpc_timeout,
                                     [&](grpc::ClientContext* context, const std::string& worker_id) {
                                       v1::ReportProgressRequest request;
                                       request.set_worker_id(worker_id);
                                       request.set_trial_id(lease.trial_id);
                                       request.set_attempt(lease.attempt);
                                       request.set_event_json(line);
                                       return stub_->ReportProgress(context, request, &response);
                                     });
    if (status.ok() && response.stop()) {
      return stopped(response.reason().empty() ? "the coordinator asked to stop the trial"
                                               : response.reason());
    }
    if (status.ok() == reporting_failed) {
      reporting_failed = !status.ok();
      if (reporting_failed) {
        spdlog::warn("trial {}: progress not delivered ({}); the result will carry the evaluations",
                     lease.trial_id, status.error_message());
      }
    }
  }
}

void Agent::ClassifyOutOfMemory(const TrialProcess& process, Outcome* outcome) const {
  if (outcome->kind != Outcome::Kind::kFail) return;
  json result = outcome->result_json.empty()
                    ? json()
                    : json::parse(outcome->result_json, nullptr, /*allow_exceptions=*/false);
  const bool said_so = result.is_object() && StringField(result, "error_kind") == "out_of_memory";
  const bool crashed =
      outcome->result_json.empty() && outcome->error.find("ended without a result") != std::string::npos;
  const bool killed = crashed && process.OomKilled();
  const bool crashed_on_allocation =
      crashed && process.MemoryLimitKind() == "RLIMIT_AS" && MentionsAllocationFailure(outcome->error);
  if (!said_so && !killed && !crashed_on_allocation) return;
  std::string what = said_so ? StringField(result, "error") : outcome->error;
  if (killed) what = "killed by the kernel's OOM killer in its cgroup; " + what;
  const std::string limit = process.MemoryLimitKind().empty()
                                ? std::string()
                                : fmt::format("the worker's limit of {} MiB per trial ({})",
                                              options_.memory_limit_mb, process.MemoryLimitKind());
  if (!result.is_object()) result = {{"event", "result"}, {"schema", 1}, {"status", "failed"}};
  result["status"] = "failed";
  result["error_kind"] = "out_of_memory";
  result["error"] = "out of memory" + (limit.empty() ? std::string() : " under " + limit) + ": " + what;
  if (!limit.empty()) {
    result["memory_limit_mb"] = options_.memory_limit_mb;
    result["memory_limit_kind"] = process.MemoryLimitKind();
  }
  outcome->error = result["error"].get<std::string>();
  outcome->retryable = false;
  outcome->result_json = result.dump();
}

}  // namespace frontier
