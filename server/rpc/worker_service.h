// The workers' service (frontier.v1.WorkerService): register, lease a trial
// (long poll), heartbeat, report progress, complete or fail a trial. Every
// RPC requires the worker role (proto/auth.h), counts the worker as seen in
// the metrics, and hands the call to the scheduler, which owns the rules
// (leases, attempts, idempotency by (trial, attempt), early stopping).
//
// gRPC's callback API, so that hundreds of parked LeaseTrial long polls hold
// no server thread: a poll that finds nothing pending is parked as a waiter,
// and whoever calls ServeWaiters (the coordinator's dispatcher thread)
// answers it with a trial once one can be leased, or empty at its deadline
// (the request's wait_ms, at most `max_wait_ms`, on the steady clock).
// Each call's body (its store work) runs on a CallPool (call_pool.h), never
// on gRPC's callback threads, so that many commits wait at once.
// Thread-safe. The scheduler, metrics and security must outlive it.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "frontier/v1/frontier.grpc.pb.h"
#include "proto/auth.h"
#include "server/rpc/call_pool.h"
#include "server/rpc/coordinator_metrics.h"
#include "server/scheduler/scheduler.h"
#include "server/store/artifact_store.h"

namespace frontier {

class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  // `artifacts`: where UploadArtifact stores trials' files; null: refused.
  WorkerServiceImpl(Scheduler& scheduler, int64_t max_wait_ms, CoordinatorMetrics& metrics,
                    const ServerSecurity& security, ArtifactStore* artifacts = nullptr);

  grpc::ServerUnaryReactor* RegisterWorker(grpc::CallbackServerContext* ctx,
                                           const v1::RegisterWorkerRequest* req,
                                           v1::RegisterWorkerResponse* resp) override;
  grpc::ServerUnaryReactor* LeaseTrial(grpc::CallbackServerContext* ctx, const v1::LeaseTrialRequest* req,
                                       v1::LeaseTrialResponse* resp) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* ctx, const v1::HeartbeatRequest* req,
                                      v1::HeartbeatResponse* resp) override;
  grpc::ServerUnaryReactor* ReportProgress(grpc::CallbackServerContext* ctx,
                                           const v1::ReportProgressRequest* req,
                                           v1::ReportProgressResponse* resp) override;
  // Accepted when applied or a duplicate of this attempt's; the reason says why not.
  grpc::ServerUnaryReactor* CompleteTrial(grpc::CallbackServerContext* ctx,
                                          const v1::CompleteTrialRequest* req,
                                          v1::CompleteTrialResponse* resp) override;
  grpc::ServerUnaryReactor* FailTrial(grpc::CallbackServerContext* ctx, const v1::FailTrialRequest* req,
                                      v1::FailTrialResponse* resp) override;
  // One chunk of a trial's artifact, checked (name, size, offset, the
  // trial's limits) and stored while the lease is held, which it extends.
  grpc::ServerUnaryReactor* UploadArtifact(grpc::CallbackServerContext* ctx,
                                           const v1::UploadArtifactRequest* req,
                                           v1::UploadArtifactResponse* resp) override;

  // The workers whose LeaseTrial polls are parked now.
  std::vector<std::string> ParkedWorkers();
  // Answers parked polls: with a trial when one can be leased, empty at
  // their deadline, or every one (empty) when `closing`.
  void ServeWaiters(bool closing);

 private:
  struct Waiter {
    grpc::ServerUnaryReactor* reactor;
    std::string worker_id;
    v1::LeaseTrialResponse* response;
    std::chrono::steady_clock::time_point deadline;
  };

  // Authorizes the worker role, counts `worker_id` as seen, and finishes
  // the call with the status `body` returns (rpc_status.h's Guarded).
  template <typename Body>
  grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* ctx, const char* rpc,
                                   const std::string& worker_id, Body&& body,
                                   CallPool* pool = nullptr);  // null: calls_
  // Leases the next pending trial into `resp`; false (has_trial unset) when none is pending.
  bool TryLease(const std::string& worker_id, v1::LeaseTrialResponse* resp);
  // Fills `resp` with `trial`, leased to `worker_id`; false when there is none.
  bool AnswerLease(const std::string& worker_id, const std::optional<TrialRow>& trial,
                   v1::LeaseTrialResponse* resp);

  const ServerSecurity& security_;
  Scheduler& scheduler_;
  int64_t max_wait_ms_;
  CoordinatorMetrics& metrics_;
  ArtifactStore* artifacts_;
  std::mutex mu_;  // guards waiters_ and closed_
  std::deque<Waiter> waiters_;
  bool closed_ = false;  // ServeWaiters(true) ran: polls that find nothing are answered at once
  // Threads for the bodies: as many commits in flight as the PostgreSQL store has connections.
  static constexpr int kCallThreads = 16;
  // ReportProgress's own threads: progress events never wait behind completions' synchronous
  // commits for a thread, and as many as wait here are recorded together (PostgresStore::RecordProgress).
  // At a lower CPU priority (nice +10): when the coordinator's cores are busy, the completions and
  // leases a worker waits on run first; a trial does not wait on its progress reports.
  static constexpr int kProgressThreads = 32;
  static constexpr int kProgressNiceness = 10;
  CallPool progress_calls_{kProgressThreads,
                           kProgressNiceness};  // last two: joined first, while the rest still stands
  CallPool calls_{kCallThreads};
};

}  // namespace frontier
