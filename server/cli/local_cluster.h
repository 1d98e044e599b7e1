// The local workers of `frontier run`: N frontier-worker processes forked
// and exec'd beside the CLI (the binary next to it, under ../worker, or on
// PATH), each with its share of the cores, its own log and process group, so
// that Ctrl-C reaches only the CLI, which stops them itself.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "search_spaces/runtime_kinds.h"

namespace frontier {

// A program of Frontier's (frontier-worker, frontier-trial): beside this
// binary, under ../worker (the build tree), else `name` (looked up on PATH).
std::string SiblingBinary(const std::string& name);

struct LocalWorkerOptions {
  int count = 1;              // worker processes
  int slots = 1;              // each worker's --slots: trials at once (on cuda: slot i on GPU i)
  DeviceKind device = DeviceKind::kCpu;  // each worker's --device
  int64_t memory_limit_mb = 0;  // each worker's --memory-limit-mb; 0: none
};

class LocalWorkers {
 public:
  LocalWorkers() = default;
  // Stops whatever is still running (5 s of grace).
  ~LocalWorkers();

  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;

  // Starts `options.count` workers "local-0".. against `coordinator`
  // (host:port), each with the options' slots and device and a disjoint set
  // of this process's cores (--cpus: an equal run of cores per slot, threads
  // per trial = cores per slot; with fewer cores than slots the sets wrap
  // and the trials' results say they shared), logging to LOG_DIR/worker-I.log, profiles
  // under LOG_DIR/artifacts. `metrics_listen` is each worker's
  // --metrics-listen (HOST:0 gives each a free port; "0": none). Throws
  // std::runtime_error when fork fails.
  void Start(const LocalWorkerOptions& options, const std::string& coordinator,
             const std::filesystem::path& log_dir, const std::string& metrics_listen);

  // Workers that exited on their own (e.g. a missing binary), reaped.
  int Exited();

  // SIGTERM (workers drain), then SIGKILL to each worker's process group
  // (its trial too) after `grace`; returns once every worker is reaped.
  void Stop(std::chrono::seconds grace);

 private:
  std::vector<pid_t> pids_;
};

}  // namespace frontier
