// The coordinator of one process (frontier-server, the embedded one of
// `frontier run`) with everything it runs on, made and owned in order: the
// metric families, the store a URL names (OpenStore, migrated) wrapped in a
// MeasuredStore that reports to them, the system clock, and the Coordinator
// over these. Destroyed in reverse: the coordinator stops before its store
// closes. Tests build a Coordinator over their own store and clock instead.
#pragma once

#include <memory>
#include <string>

#include "proto/clock.h"
#include "server/rpc/coordinator.h"
#include "server/rpc/coordinator_metrics.h"
#include "server/store/store.h"

namespace frontier {

class CoordinatorProcess {
 public:
  // A worker counts as connected in the metrics while heard from within the
  // lease timeout. Throws StoreError, or std::invalid_argument for an unknown
  // store scheme.
  CoordinatorProcess(const std::string& store_url, CoordinatorOptions options);
  ~CoordinatorProcess();

  CoordinatorProcess(const CoordinatorProcess&) = delete;
  CoordinatorProcess& operator=(const CoordinatorProcess&) = delete;

  Coordinator& coordinator() { return *coordinator_; }
  // The measured store, as the scheduler sees it.
  Store& store() { return *store_; }

 private:
  std::unique_ptr<CoordinatorMetrics> metrics_;  // before store_: the store reports to it
  std::unique_ptr<Store> store_;
  SystemClock clock_;
  std::unique_ptr<Coordinator> coordinator_;
};

// Re-reads the token file of `security.users` (SIGHUP in frontier-server):
// the new tokens apply to the next call, the old ones stop working. A file
// that cannot be read or is malformed is logged and the tokens in use stay.
void ReloadTokens(const ServerSecurity& security);

}  // namespace frontier
