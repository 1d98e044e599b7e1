// The worker agent behind frontier-worker: registers with the coordinator,
// leases trials, runs each in a child frontier-trial process, forwards its
// progress, keeps its lease alive and reports its result (docs/worker.md).
// Torch-free: it only talks gRPC and starts processes.
//
// Agent's members are defined by concern: agent.cc (Run, the slots' loop and
// RunTrial: a leased trial from its spec to its report), coordinator_calls.cc
// (registration, Call and its retry rules, reporting a trial's end),
// supervision.cc (Supervise: one running trial, its heartbeats, progress, stop
// and timeout; which failures are retried), calibration.cc (Calibrate) and
// trial_artifacts.cc (UploadArtifacts). The free functions they share are in
// rank_launch.h, profile_tool.h, trial_protocol.h, result_line.h and
// trial_artifacts.h.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "frontier/v1/frontier.grpc.pb.h"
#include "proto/auth.h"
#include "proto/clock.h"
#include "search_spaces/runtime_kinds.h"
#include "worker/agent/trial_process.h"

namespace frontier {

class WorkerMetrics;

// Sent in RegisterWorker.
inline constexpr const char* kWorkerVersion = "0.1.0";

struct AgentOptions {
  std::string host;            // label for people in RegisterWorker (--name); the host name by default
  DeviceKind device = DeviceKind::kCpu;
  std::string device_name;     // e.g. "cpu: AMD EPYC 7B13" or "NVIDIA H200" (DetectDeviceName)
  int slots = 1;               // trials run at once (>= 1); on cuda slot i runs on GPU i
  // The GPUs this worker may use, from its own CUDA_VISIBLE_DEVICES (Slurm,
  // systemd, containers): slot i runs on visible_devices[i]. Empty: GPU i.
  std::vector<std::string> visible_devices;
  std::string work_dir;  // existing folder for the spec files of running trials
  // Written into a spec's runtime.threads when the spec leaves it at 0; 0
  // leaves the spec as it is.
  int threads_per_trial = 0;
  int progress_every = 10;  // frontier-trial --progress-every
  // frontier-trial --artifact-dir: profiles land in <artifact_dir>/<trial id>/
  // on this host; empty: the trial's default (./artifacts). A spec whose
  // profile.tool is nsys or ncu runs wrapped in that tool when this is a cuda
  // worker with the tool on its PATH, else unprofiled with the reason in the
  // result's "profile" (docs/profiling.md).
  std::string artifact_dir;
  // Given to every trial as FRONTIER_CPU_MEMORY_LIB: the library the Python
  // SDK counts a command trial's CPU memory with (CpuMemoryLibraryBeside
  // frontier-trial); empty: not given, the SDK falls back to resident memory.
  std::string cpu_memory_library;
  // After a trial's process ends (completed or failed, the lease still held),
  // every regular file of its artifact folder (symbolic links are not
  // followed) goes to the coordinator's artifact store in 1 MiB chunks
  // (UploadArtifact), so that it outlives this worker; the local copy stays.
  bool upload_artifacts = true;
  int max_trials = 0;  // Run returns after leasing this many trials and finishing them; 0: no limit
  // A running trial is killed after this.
  std::chrono::milliseconds trial_timeout{std::chrono::hours(1)};
  // After RequestDrain, running trials get this long to finish.
  std::chrono::milliseconds drain_timeout{std::chrono::minutes(10)};
  // From SIGTERM to SIGKILL when a trial is killed.
  std::chrono::milliseconds kill_grace{std::chrono::seconds(5)};
  // LeaseTrial's long-poll wait_ms.
  std::chrono::milliseconds lease_wait{std::chrono::seconds(10)};
  // Deadline of every RPC (LeaseTrial: plus lease_wait).
  std::chrono::milliseconds rpc_timeout{std::chrono::seconds(10)};
  // At most one progress event per this is forwarded; eval events always are.
  std::chrono::milliseconds progress_interval{std::chrono::seconds(1)};
  // Retries of UNAVAILABLE / DEADLINE_EXCEEDED back off exponentially from
  // the initial to the maximum delay, with jitter.
  std::chrono::milliseconds retry_initial_backoff{std::chrono::milliseconds(200)};
  std::chrono::milliseconds retry_max_backoff{std::chrono::seconds(10)};
  // Told about every trial's start, output events and end (frontier-worker's
  // /metrics); null: no metrics.
  std::shared_ptr<WorkerMetrics> metrics;

  // Timing isolation: slot i's trials run on slot_cpus[i] (set in the child
  // before exec); empty: where the worker runs. `cpus_shared` says the split
  // gave two slots the same core (fewer cores than slots).
  std::vector<std::vector<int>> slot_cpus;
  bool cpus_shared = false;
  // Calibrated peaks: before registering, `frontier-trial --calibrate` runs
  // once on slot 0's device and cores with threads_per_trial threads, for
  // these dtypes (empty: fp32 and bf16, and fp16 on cuda), holding the host
  // lock exclusively. Its peaks go to RegisterWorker.peak_flops and to every
  // trial (FRONTIER_PEAK_FLOPS). A failed calibration is logged; trials then
  // measure their own peak.
  bool calibrate = false;
  std::vector<std::string> calibration_dtypes;
  std::chrono::milliseconds calibration_timeout{std::chrono::minutes(3)};
  // Host-wide lock file (placement.h HostLock, CpuClaim): calibrations hold it
  // exclusively, trials shared, and each trial claims its CPUs next to it, to
  // learn whether another trial on the host shared them. Empty: none.
  std::string host_lock;
  // A memory limit on each trial process in MiB (cgroup memory.max, else
  // RLIMIT_AS); 0: none. A trial that runs out of memory fails for good
  // (error_kind out_of_memory, the limit in its error).
  int64_t memory_limit_mb = 0;
  // How a trial with runtime.ranks > 1 starts its ranks (docs/distributed.md):
  // "local": one frontier-trial per rank on this host, each on its share of
  // the slot's cores (cuda: rank r on visible_devices[r]), meeting in a
  // FileStore in work_dir; "srun": one child `srun --nodes=M --ntasks=N ...
  // frontier-trial ...` inside a Slurm allocation, meeting at a TCPStore on
  // rendezvous_host (empty: HostName()).
  std::string rank_launcher = "local";
  std::string rendezvous_host;
};

// Runs trials for one coordinator. Run blocks; RequestDrain and RequestStop
// may be called from any thread (a signal-handling thread, a test) while it
// runs. One Agent runs once.
class Agent {
 public:
  // `stub` reaches the coordinator's WorkerService; `launcher` starts the
  // trial processes (ProcessTrialLauncher in production); `clock` times
  // heartbeats, trial timeouts, the drain deadline, progress throttling and
  // the long-poll check (null: a SteadyClock). Waits themselves (a process's
  // output, backoff) take real time, at most kSupervisePoll (100 ms) at once
  // while a trial runs, so a test that advances a fake clock sees the agent
  // act within that.
  Agent(AgentOptions options, std::unique_ptr<v1::WorkerService::StubInterface> stub,
        std::unique_ptr<TrialLauncher> launcher, std::shared_ptr<MonotonicClock> clock = nullptr);
  ~Agent();

  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Registers (retrying while the coordinator is unreachable), then runs
  // `slots` lease-run-report loops until max_trials trials have finished, a
  // drain completes or a stop is requested. Returns OK then; an error only
  // when the coordinator refuses the registration for good.
  grpc::Status Run();

  // Stops leasing; running trials may finish within drain_timeout, after
  // which they are killed and failed as retryable ("worker shutting down").
  void RequestDrain();

  // Kills running trials at once, fails them as retryable with one quick
  // attempt each, and makes Run return.
  void RequestStop();

  // The id the coordinator assigned; empty before registration.
  std::string worker_id() const;

 private:
  // How long a call keeps retrying.
  enum class Retry {
    kOnce,        // one attempt (heartbeats, progress: the next one is coming anyway)
    kUntilDrain,  // until a drain or stop is requested (registration, leasing)
    kUntilStop,   // until a stop, or a drain's deadline passes (results, failures)
  };

  struct Lease {
    std::string trial_id;
    int attempt = 0;
    std::string spec_json;
  };

  // How one trial runs: what to call it in messages, its stop file, its time limit.
  struct Launch {
    std::string what;       // "frontier-trial" or "the command `python3 train.py`"
    std::string stop_file;  // created when the trial is asked to stop
    std::chrono::milliseconds timeout;
    // A line that is not a JSON object fails the trial: a command trial's own
    // program, unless a profiler wrapper (which prints to stdout) runs it.
    bool strict_output = false;
  };

  // How a trial ended, as the coordinator is to hear it.
  struct Outcome {
    enum class Kind {
      kComplete,   // CompleteTrial(result_json): completed or diverged
      kFail,       // FailTrial(error, retryable, result_json)
      kLeaseLost,  // nothing: the coordinator already re-queued the trial
    };
    Kind kind = Kind::kFail;
    std::string error;
    bool retryable = true;
    std::string result_json;  // the result line exactly as frontier-trial printed it, if it did
  };

  // The longest a trial's supervisor (or the calibration's reader) goes
  // without checking for a stop, a drain or its timeout.
  static constexpr std::chrono::milliseconds kSupervisePoll{100};

  // One RPC as Call makes it: on `context`, for the worker id registered now.
  using Rpc = std::function<grpc::Status(grpc::ClientContext* context, const std::string& worker_id)>;

  // Calls `rpc(context, worker_id)` with a fresh context whose deadline is
  // `deadline` away. UNAVAILABLE and DEADLINE_EXCEEDED are retried with
  // jittered exponential backoff until `retry` gives up (one attempt is
  // always made); with `reregister`, NOT_FOUND or UNAUTHENTICATED (the
  // coordinator forgot this worker) registers again once and repeats the call.
  grpc::Status Call(const char* name, Retry retry, std::chrono::milliseconds deadline, const Rpc& rpc,
                    bool reregister = true);
  grpc::Status Register(Retry retry);
  // Registers again unless another slot already replaced `stale_worker_id`.
  void Reregister(const std::string& stale_worker_id);
  bool GivingUp(Retry retry) const;
  // Sleeps for `delay` or until a drain or stop ends `retry`'s patience;
  // false when it gave up.
  bool SleepUnless(Retry retry, std::chrono::milliseconds delay);

  void RunSlot(int slot);
  // Counts a lease against max_trials; false when no more trials may be leased.
  bool ReserveTrial();
  void ReleaseTrial();
  // Runs and reports one trial; *next is the slot's next trial when the
  // completion brought one (CompleteTrial.lease_next).
  void RunTrial(int slot, const Lease& lease, std::optional<Lease>* next);
  // Streams the trial's output until it exits, is killed or times out.
  Outcome Supervise(const Lease& lease, const Launch& launch, TrialProcess& process);
  // With `next`, a completion also asks for the slot's next trial when the
  // slot may take one (ReserveTrial, no drain, no calibration waiting).
  void Report(const Lease& lease, const Outcome& outcome, std::optional<Lease>* next = nullptr);
  // Sends the files of the trial's artifact folder (AgentOptions::upload_artifacts).
  void UploadArtifacts(const Lease& lease);
  // Runs frontier-trial --calibrate (see AgentOptions::calibrate) into calibration_.
  void Calibrate();
  // frontier-trial --calibrate with `dtypes` at `threads` (CPU; 0: its default) on `cpus`: its line,
  // or nullopt with *error.
  std::optional<nlohmann::json> MeasurePeaks(const std::vector<std::string>& dtypes, int threads,
                                             const std::vector<int>& cpus, std::string* error);
  // FRONTIER_PEAK_FLOPS for a trial of `precision` at `threads` (calibration.cc): peak_flops_env_,
  // or on a CPU at another thread count the peak measured at that count, once per count and
  // precision, on `cpus`; "" when the worker did not calibrate.
  std::string PeaksFor(const std::string& precision, int threads, const std::vector<int>& cpus);
  // A trial that ran out of memory fails for good, with error_kind
  // out_of_memory and the worker's limit in its error: its own result said
  // so, the cgroup's OOM killer killed it, or (RLIMIT_AS) it crashed on an
  // allocation failure. A deterministic OOM is not retried.
  void ClassifyOutOfMemory(const TrialProcess& process, Outcome* outcome) const;
  void Fail(const Lease& lease, const std::string& error, bool retryable, const std::string& result_json);
  std::chrono::milliseconds Now() const;  // clock_'s time
  // "2.5": a duration in seconds for messages.
  static std::string Seconds(std::chrono::milliseconds duration);

  const AgentOptions options_;
  const std::unique_ptr<v1::WorkerService::StubInterface> stub_;
  const std::unique_ptr<TrialLauncher> launcher_;
  const std::shared_ptr<MonotonicClock> clock_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;  // notified on drain and stop
  std::string worker_id_;
  std::chrono::milliseconds heartbeat_interval_{std::chrono::seconds(10)};
  bool draining_ = false;
  bool stopping_ = false;
  std::chrono::milliseconds drain_deadline_{0};    // clock_ time
  std::set<grpc::ClientContext*> pending_leases_;  // cancelled by a drain
  int trials_leased_ = 0;                          // counted against max_trials

  std::mutex registration_mutex_;  // one re-registration at a time
  // frontier-trial --calibrate's line; null: not calibrated. Written before the slots start.
  nlohmann::json calibration_;
  std::string peak_flops_env_;  // FRONTIER_PEAK_FLOPS for every trial; empty: none
  std::mutex peaks_mutex_;
  std::map<int, nlohmann::json> peaks_by_threads_;      // FRONTIER_PEAK_FLOPS by CPU thread count (PeaksFor)
  std::set<std::pair<int, std::string>> failed_peaks_;  // (threads, precision) that could not be measured
};

// A channel to the coordinator at `address` (HOST:PORT) that reconnects
// within `max_reconnect_backoff` after the coordinator comes back, with TLS
// and a bearer token as `security` says.
std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address,
                                                      std::chrono::milliseconds max_reconnect_backoff,
                                                      const ClientSecurity& security = {});

// "cpu: <model name from /proc/cpuinfo>" for cpu, the first GPU's name from
// nvidia-smi for cuda; the bare device when neither is available.
std::string DetectDeviceName(DeviceKind device);

}  // namespace frontier
