// The workers' side of the RPC contract (proto/frontier/v1/frontier.proto,
// WorkerService) through a real gRPC channel: leases and long polls,
// progress answered with stop, completion idempotent on (trial, attempt),
// stale attempts rejected after a lease expired. Scheduler time is a fake
// clock; the only waits are long-poll deadlines of a fraction of a second.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "server/rpc/call_pool.h"
#include "tests/server/rpc/coordinator_harness.h"

namespace frontier {
namespace {

// ReportProgress's pool runs at a lower CPU priority than the completions' (worker_service.h): its tasks
// see their thread's niceness raised by the pool's, the default pool's see it unchanged.
TEST(CallPoolTest, RunsTasksAtItsNiceness) {
  const auto niceness_in = [](CallPool& pool) {
    std::promise<int> seen;
    pool.Run([&] { seen.set_value(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)))); });
    return seen.get_future().get();
  };
  const int mine = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  CallPool plain(1), lower(2, 10);
  EXPECT_EQ(niceness_in(plain), mine);
  EXPECT_EQ(niceness_in(lower), std::min(mine + 10, 19));
}

class WorkerServiceTest : public ::testing::Test {
 protected:
  WorkerServiceTest() : users_(harness_.UserStub()), workers_(harness_.WorkerStub()) {}

  using Users = v1::ExperimentService::Stub;
  using Workers = v1::WorkerService::Stub;

  // `method` through `stub`; the call itself must succeed.
  template <typename Stub, typename Request, typename Response>
  static Response Ok(Stub& stub,
                     grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                     const Request& request) {
    Response response;
    const grpc::Status s = Call(stub, method, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  std::string Submit(const std::string& yaml) {
    v1::SubmitExperimentRequest req;
    req.set_space_yaml(yaml);
    req.set_source_name("space.yaml");
    return Ok(*users_, &Users::SubmitExperiment, req).experiment().id();
  }

  std::string Register() {
    v1::RegisterWorkerRequest req;
    req.set_host("test-host");
    req.set_device("cpu");
    req.set_device_name("test cpu");
    return Ok(*workers_, &Workers::RegisterWorker, req).worker_id();
  }

  v1::LeaseTrialResponse Lease(const std::string& worker, int64_t wait_ms = 0) {
    v1::LeaseTrialRequest req;
    req.set_worker_id(worker);
    req.set_wait_ms(wait_ms);
    return Ok(*workers_, &Workers::LeaseTrial, req);
  }

  v1::ReportProgressResponse Progress(const std::string& worker, const v1::LeaseTrialResponse& lease,
                                      int attempt, const std::string& event) {
    v1::ReportProgressRequest req;
    req.set_worker_id(worker);
    req.set_trial_id(lease.trial_id());
    req.set_attempt(attempt);
    req.set_event_json(event);
    return Ok(*workers_, &Workers::ReportProgress, req);
  }

  v1::CompleteTrialResponse Complete(const std::string& worker, const std::string& trial_id, int attempt,
                                     bool lease_next = false) {
    v1::CompleteTrialRequest req;
    req.set_worker_id(worker);
    req.set_trial_id(trial_id);
    req.set_attempt(attempt);
    req.set_result_json(ResultLine());
    req.set_lease_next(lease_next);
    return Ok(*workers_, &Workers::CompleteTrial, req);
  }

  v1::FailTrialResponse Fail(const std::string& worker, const std::string& trial_id, int attempt,
                             const std::string& error, bool retryable) {
    v1::FailTrialRequest req;
    req.set_worker_id(worker);
    req.set_trial_id(trial_id);
    req.set_attempt(attempt);
    req.set_error(error);
    req.set_retryable(retryable);
    return Ok(*workers_, &Workers::FailTrial, req);
  }

  v1::HeartbeatResponse Heartbeat(const std::string& worker, const std::string& trial_id, int attempt) {
    v1::HeartbeatRequest req;
    req.set_worker_id(worker);
    req.set_trial_id(trial_id);
    req.set_attempt(attempt);
    return Ok(*workers_, &Workers::Heartbeat, req);
  }

  // A LeaseTrial long poll of 30 s on its own thread. Its client gives up
  // after 20 s, before the poll's own deadline, so only a trial arriving (or
  // a shutdown) answers it in time. Join `thread` before reading the rest.
  struct ParkedPoll {
    std::unique_ptr<grpc::ClientContext> ctx = CoordinatorHarness::Context(20);
    v1::LeaseTrialRequest request;
    v1::LeaseTrialResponse lease;
    grpc::Status status;
    std::thread thread;
  };

  // Starts `poll` for `worker` and returns once the coordinator has parked it.
  void Park(const std::string& worker, ParkedPoll& poll) {
    poll.request.set_worker_id(worker);
    poll.request.set_wait_ms(30'000);
    poll.thread = std::thread(
        [&poll, this] { poll.status = workers_->LeaseTrial(poll.ctx.get(), poll.request, &poll.lease); });
    EXPECT_TRUE(harness_.WaitUntilParked(worker));
  }

  v1::Trial TrialOf(const std::string& experiment_id, const std::string& trial_id) {
    v1::ListTrialsRequest req;
    req.set_experiment_id(experiment_id);
    const v1::ListTrialsResponse trials = Ok(*users_, &Users::ListTrials, req);
    for (const v1::Trial& t : trials.trials()) {
      if (t.id() == trial_id) return t;
    }
    ADD_FAILURE() << "no trial " << trial_id;
    return {};
  }

  v1::Experiment ExperimentOf(const std::string& id) {
    v1::GetExperimentRequest req;
    req.set_experiment_id(id);
    return Ok(*users_, &Users::GetExperiment, req);
  }

  CoordinatorHarness harness_;
  std::unique_ptr<v1::ExperimentService::Stub> users_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

TEST_F(WorkerServiceTest, RegistrationTellsTheLeaseTimeoutAndHeartbeatInterval) {
  v1::RegisterWorkerRequest req;
  req.set_host("h");
  req.set_device_count(0);
  v1::RegisterWorkerResponse resp;
  ASSERT_TRUE(workers_->RegisterWorker(CoordinatorHarness::Context().get(), req, &resp).ok());
  EXPECT_FALSE(resp.worker_id().empty());
  EXPECT_EQ(resp.lease_timeout_ms(), CoordinatorHarness::kLeaseTimeoutMs);
  EXPECT_EQ(resp.heartbeat_interval_ms(), 1'000);
  const std::vector<WorkerRecord> known = harness_.store().ListWorkers();
  ASSERT_EQ(known.size(), 1u);
  EXPECT_EQ(known[0].device_count, 1);  // at least one device
}

TEST_F(WorkerServiceTest, LeaseHandsOutAPendingTrialAtOnce) {
  const std::string experiment = Submit(TinySpace());
  const std::string worker = Register();
  const v1::LeaseTrialResponse lease = Lease(worker, 30'000);  // pending: no wait
  ASSERT_TRUE(lease.has_trial());
  EXPECT_EQ(lease.attempt(), 1);
  EXPECT_EQ(lease.lease_timeout_ms(), CoordinatorHarness::kLeaseTimeoutMs);
  EXPECT_NE(lease.spec_json().find(lease.trial_id()), std::string::npos) << lease.spec_json();
  const v1::Trial trial = TrialOf(experiment, lease.trial_id());
  EXPECT_TRUE(trial.is_baseline());  // the baseline is queued first
  EXPECT_EQ(trial.state(), v1::TRIAL_RUNNING);
  EXPECT_EQ(trial.worker_id(), worker);
}

TEST_F(WorkerServiceTest, LeaseWithNothingPendingAnswersEmptyAtItsDeadline) {
  const std::string worker = Register();
  const auto start = std::chrono::steady_clock::now();
  const v1::LeaseTrialResponse lease = Lease(worker, 200);
  EXPECT_FALSE(lease.has_trial());
  // It was parked until the deadline rather than answered at once.
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_TRUE(harness_.coordinator().ParkedWorkers().empty());
}

TEST_F(WorkerServiceTest, AParkedLeaseWakesWhenATrialArrives) {
  const std::string worker = Register();
  ParkedPoll poll;
  Park(worker, poll);
  const std::string experiment = Submit(TinySpace());
  poll.thread.join();
  ASSERT_TRUE(poll.status.ok()) << poll.status.error_message();
  ASSERT_TRUE(poll.lease.has_trial());
  EXPECT_EQ(poll.lease.attempt(), 1);
  EXPECT_EQ(TrialOf(experiment, poll.lease.trial_id()).state(), v1::TRIAL_RUNNING);
}

TEST_F(WorkerServiceTest, ShutdownAnswersParkedLeasesEmpty) {
  const std::string worker = Register();
  ParkedPoll poll;
  Park(worker, poll);
  harness_.coordinator().Shutdown();
  poll.thread.join();
  EXPECT_TRUE(poll.status.ok()) << poll.status.error_message();
  EXPECT_FALSE(poll.lease.has_trial());
}

TEST_F(WorkerServiceTest, ProgressOfACancelledExperimentRepliesStop) {
  const std::string experiment = Submit(TinySpace());
  const std::string worker = Register();
  const v1::LeaseTrialResponse lease = Lease(worker);
  ASSERT_TRUE(lease.has_trial());
  EXPECT_FALSE(Progress(worker, lease, 1, R"({"event":"progress","step":1})").stop());
  v1::CancelExperimentRequest cancel;
  cancel.set_experiment_id(experiment);
  v1::Experiment cancelled;
  ASSERT_TRUE(users_->CancelExperiment(CoordinatorHarness::Context().get(), cancel, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), v1::EXPERIMENT_CANCELLED);
  const v1::ReportProgressResponse reply = Progress(worker, lease, 1, R"({"event":"progress","step":2})");
  EXPECT_TRUE(reply.stop());
  EXPECT_EQ(reply.reason(), "experiment cancelled");
  EXPECT_TRUE(Heartbeat(worker, lease.trial_id(), 1).stop());
  const v1::FailTrialResponse stopped =
      Fail(worker, lease.trial_id(), 1, "stopped: " + reply.reason(), false);
  EXPECT_TRUE(stopped.accepted()) << stopped.reason();
  EXPECT_EQ(TrialOf(experiment, lease.trial_id()).state(), v1::TRIAL_CANCELLED);
}

// Worker-sent JSON with a field of another type: a progress event is refused
// naming the field, and nothing is stored (it was stored, then early stopping
// threw on it); a failure's "error_kind": 7 reads as absent and the failure
// is recorded (it answered INTERNAL, and the trial ran on until its lease expired).
TEST_F(WorkerServiceTest, ReportedFieldsOfAnotherTypeAreRefusedOrReadAsAbsent) {
  const std::string experiment = Submit(TinySpace());
  const std::string worker = Register();
  const v1::LeaseTrialResponse lease = Lease(worker);
  ASSERT_TRUE(lease.has_trial());
  v1::ReportProgressRequest progress;
  progress.set_worker_id(worker);
  progress.set_trial_id(lease.trial_id());
  progress.set_attempt(1);
  progress.set_event_json(R"({"event":5,"step":1})");
  v1::ReportProgressResponse progressed;
  const grpc::Status refused = Call(*workers_, &Workers::ReportProgress, progress, &progressed);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused.error_message(), "event_json.event: expected a string, got 5");
  v1::FailTrialRequest fail;
  fail.set_worker_id(worker);
  fail.set_trial_id(lease.trial_id());
  fail.set_attempt(1);
  fail.set_error("my program found bad input");
  fail.set_result_json(R"({"event":"result","status":"failed","error":"bad input","error_kind":7})");
  EXPECT_TRUE(Ok(*workers_, &Workers::FailTrial, fail).accepted());
  const v1::Trial failed = TrialOf(experiment, lease.trial_id());
  EXPECT_EQ(failed.state(), v1::TRIAL_FAILED);
  EXPECT_EQ(failed.error(), "my program found bad input");
}

TEST_F(WorkerServiceTest, ProgressRepliesStopWhenAshaEndsATrialAtARung) {
  const std::string experiment = Submit(AshaSpace());
  const std::string worker = Register();
  // As in SchedulerTest.AshaStopsTrialsAtRungsButNeverTheBaseline, through the RPCs.
  const std::vector<double> accuracy = {0.2, 0.6, 0.4, 0.7};  // baseline first, in queue order
  std::vector<v1::TrialState> states;
  for (double acc : accuracy) {
    const v1::LeaseTrialResponse lease = Lease(worker);
    ASSERT_TRUE(lease.has_trial());
    harness_.clock().now += 1000;
    const v1::ReportProgressResponse reply = Progress(worker, lease, lease.attempt(), EvalEvent(10, acc));
    if (reply.stop()) {
      EXPECT_EQ(reply.reason().rfind("asha: at step 10", 0), 0u) << reply.reason();
      EXPECT_TRUE(
          Fail(worker, lease.trial_id(), lease.attempt(), "stopped: " + reply.reason(), false).accepted());
    } else {
      EXPECT_FALSE(Progress(worker, lease, lease.attempt(), EvalEvent(20, acc)).stop());
      EXPECT_TRUE(Complete(worker, lease.trial_id(), lease.attempt()).accepted());
    }
    states.push_back(TrialOf(experiment, lease.trial_id()).state());
  }
  EXPECT_EQ(states, (std::vector<v1::TrialState>{v1::TRIAL_COMPLETED, v1::TRIAL_COMPLETED, v1::TRIAL_STOPPED,
                                                 v1::TRIAL_COMPLETED}));
}

TEST_F(WorkerServiceTest, CompletionIsIdempotentOnTrialAndAttempt) {
  const std::string experiment = Submit(TinySpace());
  const std::string worker = Register();
  const v1::LeaseTrialResponse first = Lease(worker);
  ASSERT_TRUE(first.has_trial());
  const v1::CompleteTrialResponse applied = Complete(worker, first.trial_id(), 1);
  EXPECT_TRUE(applied.accepted());
  EXPECT_EQ(applied.reason(), "");
  const v1::CompleteTrialResponse again = Complete(worker, first.trial_id(), 1);  // e.g. a retried RPC
  EXPECT_TRUE(again.accepted());
  EXPECT_EQ(again.reason(), "already recorded for this attempt");

  const v1::LeaseTrialResponse second = Lease(worker);
  ASSERT_TRUE(second.has_trial());
  const v1::FailTrialResponse failed = Fail(worker, second.trial_id(), 1, "boom", false);
  EXPECT_TRUE(failed.accepted());
  EXPECT_EQ(failed.reason(), "");
  const v1::FailTrialResponse failed_again = Fail(worker, second.trial_id(), 1, "boom", false);
  EXPECT_TRUE(failed_again.accepted());
  EXPECT_EQ(failed_again.reason(), "already recorded for this attempt");

  // Nothing counted twice.
  const v1::TrialCounts counts = ExperimentOf(experiment).counts();
  EXPECT_EQ(counts.completed(), 1);
  EXPECT_EQ(counts.failed(), 1);
  EXPECT_EQ(counts.total(), 2);
  EXPECT_EQ(TrialOf(experiment, first.trial_id()).attempt(), 1);
  EXPECT_EQ(TrialOf(experiment, second.trial_id()).error(), "boom");
}

TEST_F(WorkerServiceTest, ACompletionCanLeaseTheWorkersNextTrial) {
  const std::string experiment = Submit(TinySpace());
  const std::string worker = Register();
  const v1::LeaseTrialResponse first = Lease(worker);
  ASSERT_TRUE(first.has_trial());
  const v1::CompleteTrialResponse completed = Complete(worker, first.trial_id(), 1, /*lease_next=*/true);
  EXPECT_TRUE(completed.accepted());
  ASSERT_TRUE(completed.next().has_trial());
  EXPECT_NE(completed.next().trial_id(), first.trial_id());
  EXPECT_EQ(completed.next().attempt(), 1);
  EXPECT_FALSE(completed.next().spec_json().empty());
  EXPECT_EQ(completed.next().lease_timeout_ms(), CoordinatorHarness::kLeaseTimeoutMs);
  const v1::Trial next = TrialOf(experiment, completed.next().trial_id());
  EXPECT_EQ(next.state(), v1::TRIAL_RUNNING);
  EXPECT_EQ(next.worker_id(), worker);
  EXPECT_EQ(TrialOf(experiment, first.trial_id()).state(), v1::TRIAL_COMPLETED);

  // A retried completion is answered as before; it leases no second trial while none is pending.
  const v1::CompleteTrialResponse again = Complete(worker, first.trial_id(), 1, /*lease_next=*/true);
  EXPECT_TRUE(again.accepted());
  EXPECT_EQ(again.reason(), "already recorded for this attempt");
  EXPECT_FALSE(again.next().has_trial());
  // The last trial: nothing pending, so no next trial and no wait.
  const v1::CompleteTrialResponse last =
      Complete(worker, completed.next().trial_id(), 1, /*lease_next=*/true);
  EXPECT_TRUE(last.accepted());
  EXPECT_FALSE(last.next().has_trial());
  EXPECT_EQ(ExperimentOf(experiment).counts().completed(), 2);
}

TEST_F(WorkerServiceTest, ACompletionWithoutLeaseNextLeasesNothing) {
  const std::string experiment = Submit(TinySpace());
  const std::string worker = Register();
  const v1::LeaseTrialResponse first = Lease(worker);
  ASSERT_TRUE(first.has_trial());
  EXPECT_FALSE(Complete(worker, first.trial_id(), 1).next().has_trial());
  const v1::TrialCounts counts = ExperimentOf(experiment).counts();
  EXPECT_EQ(counts.running(), 0);
  EXPECT_EQ(counts.pending(), 1);
}

TEST_F(WorkerServiceTest, ProgressKeepsTheLeaseAliveWithoutHeartbeats) {
  const std::string experiment = Submit(TinySpace());
  const std::string worker = Register();
  const v1::LeaseTrialResponse lease = Lease(worker);
  ASSERT_TRUE(lease.has_trial());
  const int64_t timeout = CoordinatorHarness::kLeaseTimeoutMs;
  EXPECT_FALSE(Progress(worker, lease, 1, R"({"event":"progress","step":1})").stop());  // lease still fresh
  harness_.clock().now += timeout * 6 / 10;
  EXPECT_FALSE(Progress(worker, lease, 1, R"({"event":"progress","step":2})").stop());  // renews it
  harness_.clock().now += timeout * 6 / 10;  // 1.2 timeouts after the lease
  harness_.coordinator().scheduler().Tick();
  EXPECT_EQ(TrialOf(experiment, lease.trial_id()).state(), v1::TRIAL_RUNNING);
  harness_.clock().now += timeout * 5 / 10;  // a whole timeout after the last renewal
  harness_.coordinator().scheduler().Tick();
  EXPECT_EQ(TrialOf(experiment, lease.trial_id()).state(), v1::TRIAL_PENDING);
}

TEST_F(WorkerServiceTest, AnUnknownTrialIsRejected) {
  const std::string worker = Register();
  const v1::CompleteTrialResponse resp = Complete(worker, "trial-does-not-exist", 1);
  EXPECT_FALSE(resp.accepted());
  EXPECT_EQ(resp.reason(), "unknown trial");
}

TEST_F(WorkerServiceTest, AReportFromAStaleAttemptIsRejectedAfterTheLeaseExpired) {
  const std::string experiment = Submit(TinySpace());
  const std::string worker = Register();
  const v1::LeaseTrialResponse first = Lease(worker);
  ASSERT_TRUE(first.has_trial());
  harness_.clock().now += CoordinatorHarness::kLeaseTimeoutMs + 1;  // no heartbeat for a whole timeout
  harness_.coordinator().scheduler().Tick();
  EXPECT_EQ(TrialOf(experiment, first.trial_id()).state(), v1::TRIAL_PENDING);

  const v1::HeartbeatResponse late = Heartbeat(worker, first.trial_id(), 1);
  EXPECT_FALSE(late.lease_valid());
  EXPECT_TRUE(late.stop());
  const v1::ReportProgressResponse progress = Progress(worker, first, 1, R"({"event":"progress","step":3})");
  EXPECT_TRUE(progress.stop());
  EXPECT_EQ(progress.reason(), "this attempt no longer holds the trial's lease");
  const v1::CompleteTrialResponse stale = Complete(worker, first.trial_id(), 1);
  EXPECT_FALSE(stale.accepted());
  EXPECT_EQ(stale.reason(), "stale attempt: the trial's lease was lost or it already ended");

  const std::string other = Register();
  const v1::LeaseTrialResponse again = Lease(other);
  ASSERT_TRUE(again.has_trial());
  EXPECT_EQ(again.trial_id(), first.trial_id());  // re-queued, oldest pending first
  EXPECT_EQ(again.attempt(), 2);
  EXPECT_TRUE(Complete(other, again.trial_id(), 2).accepted());
  EXPECT_FALSE(Complete(worker, first.trial_id(), 1).accepted());  // still stale after the new attempt ended
  const v1::Trial trial = TrialOf(experiment, first.trial_id());
  EXPECT_EQ(trial.state(), v1::TRIAL_COMPLETED);
  EXPECT_EQ(trial.attempt(), 2);
  EXPECT_EQ(trial.worker_id(), other);
}

}  // namespace
}  // namespace frontier
