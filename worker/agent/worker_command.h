// frontier-worker's command: the flags as parsed (worker_main.cc parses them
// with CLI11) and the function that checks them, builds AgentOptions, wires
// the Agent to the coordinator, /metrics and frontier-trial, and runs it
// until it is done, drained or stopped (docs/worker.md).
#pragma once

#include <cstdint>
#include <string>

namespace frontier {

// Exit codes of frontier-worker.
inline constexpr int kWorkerExitOk = 0;  // done or drained
inline constexpr int kWorkerExitFailure =
    1;  // registration refused, no work or artifact folder, no /metrics address
inline constexpr int kWorkerExitUsage = 64;  // bad command line

// One field per flag; the defaults are frontier-worker's.
struct WorkerFlags {
  std::string coordinator;                // --coordinator HOST:PORT, required
  int slots = 1;                          // --slots N >= 1
  std::string device = "cpu";             // --device cpu|cuda
  std::string trial_binary;               // --trial-binary PATH; empty: next to this executable, else PATH
  double trial_timeout_s = 3600;          // --trial-timeout SECONDS > 0
  int threads_per_trial = 0;              // --threads-per-trial N >= 1
  bool threads_per_trial_given = false;   // else usable cores / slots
  int progress_every = 10;                // --progress-every N >= 0
  std::string work_dir;                   // --work-dir DIR; empty: a fresh temporary folder
  std::string artifact_dir;               // --artifact-dir DIR; empty: DefaultArtifactDir()
  int max_trials = 0;                     // --max-trials N >= 0; 0: until stopped
  double drain_timeout_s = 600;           // --drain-timeout SECONDS > 0
  std::string name;                       // --name NAME; empty: the host name
  std::string token_file;                 // --token-file FILE; empty: $FRONTIER_TOKEN
  std::string tls_ca, tls_cert, tls_key;  // --tls-ca/--tls-cert/--tls-key FILE
  std::string metrics_listen = "127.0.0.1:9465";  // --metrics-listen HOST:PORT; "0" or "": none
  bool metrics_listen_given = false;  // --metrics-listen was on the command line: failing to serve is fatal
  std::string cpus;                   // --cpus LIST (e.g. 0-3 or 0,1); empty: every usable core
  int64_t memory_limit_mb = 0;        // --memory-limit-mb N >= 0; 0: none
  std::string rank_launcher = "local";  // --rank-launcher local|srun
  std::string rendezvous_host;          // --rendezvous-host
  bool calibrate = true;              // --no-calibrate turns it off
  bool cold_trials = false;           // --cold-trials: every trial execs frontier-trial (no warm slot)
  std::string host_lock = "/tmp/frontier-host.lock";  // --host-lock FILE; "": none
};

// The help text of each flag, as frontier-worker --help prints it.
namespace worker_help {
inline constexpr const char* kCoordinator = "the coordinator's address (required)";
inline constexpr const char* kSlots = "trials run at once, one per device (default 1)";
inline constexpr const char* kDevice = "device kind (default cpu); on cuda slot i runs on GPU i";
inline constexpr const char* kTrialBinary =
    "frontier-trial to run (default: next to this executable, else PATH)";
inline constexpr const char* kTrialTimeout = "kill a trial running longer than this (default 3600)";
inline constexpr const char* kThreadsPerTrial =
    "runtime.threads for specs that leave it at 0 (default cores / slots)";
inline constexpr const char* kProgressEvery = "frontier-trial --progress-every (default 10)";
inline constexpr const char* kWorkDir = "folder for spec files (default: a fresh temporary folder)";
inline constexpr const char* kArtifactDir =
    "profiles of trials go to DIR/<trial id>/ (default $XDG_STATE_HOME/frontier/artifacts, else "
    "~/.local/state/frontier/artifacts)";
inline constexpr const char* kMaxTrials = "exit after N trials (default 0: run until stopped)";
inline constexpr const char* kDrainTimeout =
    "on SIGTERM/SIGINT, wait this long for running trials (default 600)";
inline constexpr const char* kName = "this worker's label for people (default: the host name)";
inline constexpr const char* kTokenFile =
    "worker token for a coordinator that requires one (else $FRONTIER_TOKEN)";
inline constexpr const char* kTlsCa =
    "connect with TLS, trusting this CA; --tls-cert/--tls-key FILE for mutual TLS";
inline constexpr const char* kTlsCert = "client certificate for mutual TLS";
inline constexpr const char* kTlsKey = "client key for mutual TLS";
inline constexpr const char* kMetricsListen =
    "serve Prometheus /metrics there (default 127.0.0.1:9465; port 0: any free port; 0 or empty: none)";
inline constexpr const char* kCpus =
    "the cores this worker's trials run on, shared out over the slots, each slot pinned to its own (e.g. 0-3 or "
    "0,2; default: every usable core on cpu, unpinned on cuda)";
inline constexpr const char* kMemoryLimitMb =
    "memory limit of each trial process in MiB (cgroup v2 memory.max where delegated, else RLIMIT_AS; default 0: "
    "none); a trial out of memory fails for good";
inline constexpr const char* kRankLauncher =
    "how a trial with runtime.ranks > 1 starts its ranks: local (default: one frontier-trial per rank on this "
    "host, each on its share of the slot's cores or its own GPU) or srun (one srun across this Slurm "
    "allocation's nodes; docs/distributed.md)";
inline constexpr const char* kRendezvousHost =
    "with --rank-launcher srun: the name or address the other nodes reach this host at for the ranks' "
    "rendezvous (default: the host name)";
inline constexpr const char* kColdTrials =
    "start every trial with its own exec of frontier-trial instead of forking it from a warm slot that loaded "
    "LibTorch once (docs/worker.md#warm-slots)";
inline constexpr const char* kNoCalibrate =
    "do not measure this device's peak FLOP/s at start (trials then measure their own)";
inline constexpr const char* kHostLock =
    "host-wide lock file: calibrations wait for running trials and trials claim their cores next to it (default "
    "/tmp/frontier-host.lock; empty: none)";
inline constexpr const char* kExitStatus =
    "exit status: 0 done or drained, 1 registration refused, no work or artifact folder or no /metrics "
    "address, "
    "64 usage error";
}  // namespace worker_help

// Runs frontier-worker with `flags`: blocks SIGTERM/SIGINT first (call it
// before any other thread exists) and turns the first into a drain and the
// second into a stop. Returns the exit code; a flag problem prints
// "frontier-worker: <problem>" and `usage` on standard error and returns
// kWorkerExitUsage.
int RunWorker(const WorkerFlags& flags, const std::string& usage);

// $XDG_STATE_HOME/frontier/artifacts, else $HOME/.local/state/frontier/artifacts, else ./artifacts.
std::string DefaultArtifactDir();

}  // namespace frontier
