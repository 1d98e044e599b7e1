// A Coordinator as the RPC contract tests see it: an in-memory (or file) SQLite store,
// a fake clock, its own metric families, serving on 127.0.0.1 (port 0), and
// stubs of both services over loopback channels that carry a token the way
// the CLI and the workers do (proto/auth.h). Scheduler time moves only when
// a test advances the clock; long-poll deadlines are real time, so tests use
// short ones.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "frontier/v1/frontier.grpc.pb.h"
#include "proto/auth.h"
#include "proto/clock.h"
#include "server/rpc/coordinator.h"
#include "server/rpc/coordinator_metrics.h"
#include "server/store/sqlite_store.h"
#include "tests/server/fake_clock.h"
#include "tests/server/trial_events.h"

namespace frontier {

// Read by the coordinator's threads while a test advances it.

class CoordinatorHarness {
 public:
  static constexpr int64_t kLeaseTimeoutMs = 10'000;

  // `artifacts_dir`: the coordinator's artifact store (empty: none).
  // `store_path`: its SQLite store (a file, for a test that restarts the
  // coordinator on it).
  explicit CoordinatorHarness(ServerSecurity security = {}, const std::string& artifacts_dir = "",
                              const std::string& store_path = ":memory:");
  ~CoordinatorHarness();

  Coordinator& coordinator() { return *coordinator_; }
  SqliteStore& store() { return store_; }
  FakeClock& clock() { return clock_; }

  // Stubs whose calls carry `token` (none when empty).
  std::unique_ptr<v1::ExperimentService::Stub> UserStub(const std::string& token = "");
  std::unique_ptr<v1::WorkerService::Stub> WorkerStub(const std::string& token = "");

  // A context with a deadline `seconds` from now: a call that hangs fails the test.
  static std::unique_ptr<grpc::ClientContext> Context(int seconds = 30);

  // Blocks until `worker_id` has a parked LeaseTrial poll (at most 30 s); false if it never had.
  bool WaitUntilParked(const std::string& worker_id);

 private:
  std::shared_ptr<grpc::Channel> Channel(const std::string& token);

  SqliteStore store_;
  FakeClock clock_;
  CoordinatorMetrics metrics_;
  std::unique_ptr<Coordinator> coordinator_;
};

// Calls `method` of `stub` under a 30 s deadline.
template <typename Stub, typename Request, typename Response>
grpc::Status Call(Stub& stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                  const Request& request, Response* response) {
  return (stub.*method)(CoordinatorHarness::Context().get(), request, response);
}

// A search space of a baseline and one variant on a synthetic task, `repeats` seeds each.
std::string TinySpace(int repeats = 1, const std::string& name = "tiny");
// The same with strategy ASHA (min_steps 10, eta 2) over 3 sampled configurations, one seed each.
std::string AshaSpace();
// A result line of `status` that the scheduler accepts.
std::string ResultLine(const std::string& status = "completed");

}  // namespace frontier
