#include "worker/agent/worker_command.h"

#include <sched.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "metrics/endpoint.h"
#include "worker/agent/agent.h"
#include "worker/agent/placement.h"
#include "worker/agent/trial_process.h"
#include "worker/agent/worker_metrics.h"
#include "worker/host.h"
#include "os/cpus.h"

namespace frontier {
namespace {

std::chrono::milliseconds Milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// The flags' values as AgentOptions; a usage problem otherwise.
std::optional<std::string> ToOptions(const WorkerFlags& f, AgentOptions* options, ClientSecurity* security,
                                     std::string* trial_binary) {
  const auto bad = [](const char* flag, const std::string& value, const char* expected) {
    return std::string(flag) + " does not take '" + value + "': " + expected;
  };
  if (f.coordinator.empty()) return "--coordinator is required";
  if (f.slots < 1) return bad("--slots", std::to_string(f.slots), "a whole number >= 1");
  if (!ParseName<DeviceKind>(f.device)) return bad("--device", f.device, "cpu or cuda");
  if (!(f.trial_timeout_s > 0))
    return bad("--trial-timeout", std::to_string(f.trial_timeout_s), "seconds > 0");
  if (f.threads_per_trial_given && f.threads_per_trial < 1) {
    return bad("--threads-per-trial", std::to_string(f.threads_per_trial), "a whole number >= 1");
  }
  if (f.progress_every < 0)
    return bad("--progress-every", std::to_string(f.progress_every), "a whole number >= 0");
  if (f.max_trials < 0) return bad("--max-trials", std::to_string(f.max_trials), "a whole number >= 0");
  if (!(f.drain_timeout_s > 0))
    return bad("--drain-timeout", std::to_string(f.drain_timeout_s), "seconds > 0");
  security->tls_ca_file = f.tls_ca;
  security->tls_cert_file = f.tls_cert;
  security->tls_key_file = f.tls_key;
  try {
    security->token = ReadToken(f.token_file, "FRONTIER_TOKEN");
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  *trial_binary = f.trial_binary.empty() ? DefaultTrialBinary() : f.trial_binary;
  if (FindOnPath(*trial_binary).empty()) {
    return "frontier-trial not found or not executable: '" + *trial_binary + "' (use --trial-binary)";
  }
  options->cpu_memory_library = CpuMemoryLibraryBeside(*trial_binary);
  options->slots = f.slots;
  options->device = *ParseName<DeviceKind>(f.device);
  options->trial_timeout = Milliseconds(f.trial_timeout_s);
  options->progress_every = f.progress_every;
  options->work_dir = f.work_dir;
  options->artifact_dir = f.artifact_dir;
  options->max_trials = f.max_trials;
  options->drain_timeout = Milliseconds(f.drain_timeout_s);
  options->host = f.name.empty() ? HostName() : f.name;
  if (f.memory_limit_mb < 0)
    return bad("--memory-limit-mb", std::to_string(f.memory_limit_mb), "a whole number of MiB >= 0");
  options->memory_limit_mb = f.memory_limit_mb;
  if (f.rank_launcher != "local" && f.rank_launcher != "srun")
    return bad("--rank-launcher", f.rank_launcher, "local or srun");
  if (f.rank_launcher == "srun" && FindOnPath("srun").empty())
    return bad("--rank-launcher", f.rank_launcher, "srun on the PATH (run the worker inside a Slurm allocation)");
  options->rank_launcher = f.rank_launcher;
  options->rendezvous_host = f.rendezvous_host;
  options->calibrate = f.calibrate;
  options->host_lock = f.host_lock;
  // Timing isolation: each slot on cores of its own, its threads following them.
  const std::vector<int> usable = UsableCpus();
  std::vector<int> cpus = usable;
  if (!f.cpus.empty()) {
    try {
      cpus = ParseCpuList(f.cpus);
    } catch (const std::invalid_argument& e) {
      return std::string("--cpus: ") + e.what();
    }
    for (int cpu : cpus) {
      if (std::find(usable.begin(), usable.end(), cpu) == usable.end()) {
        return "--cpus: CPU " + std::to_string(cpu) + " is not available to this process (usable: " +
               FormatCpuList(usable) + ")";
      }
    }
  }
  int slot_cores = std::max(1, static_cast<int>(cpus.size()) / f.slots);
  if (options->device == DeviceKind::kCpu || !f.cpus.empty()) {
    const SlotCpus split = SplitCpus(cpus, f.slots);
    options->slot_cpus = split.slots;
    options->cpus_shared = split.shared;
    slot_cores = static_cast<int>(split.slots.front().size());
  }
  options->threads_per_trial = f.threads_per_trial_given ? f.threads_per_trial : slot_cores;
  options->device_name = DetectDeviceName(options->device);
  // Slot i runs on the i-th GPU this worker was given, when it was given some.
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      visible && *visible && options->device == DeviceKind::kCuda) {
    std::stringstream list(visible);
    for (std::string gpu; std::getline(list, gpu, ',');) {
      if (!gpu.empty()) options->visible_devices.push_back(gpu);
    }
    if (static_cast<int>(options->visible_devices.size()) < options->slots) {
      return "--slots " + std::to_string(options->slots) + " but CUDA_VISIBLE_DEVICES='" + visible +
             "' gives " + std::to_string(options->visible_devices.size()) + " GPU(s)";
    }
  }
  return std::nullopt;
}

// Removes the temporary work folder (if the worker made one) when it goes.
struct WorkDir {
  std::optional<std::filesystem::path> temporary;
  ~WorkDir() {
    std::error_code ignored;
    if (temporary) std::filesystem::remove_all(*temporary, ignored);
  }
};

}  // namespace

std::string DefaultArtifactDir() {
  const char* state = getenv("XDG_STATE_HOME");
  if (state != nullptr && *state == '/') return std::string(state) + "/frontier/artifacts";
  const char* home = getenv("HOME");
  if (home != nullptr && *home == '/') return std::string(home) + "/.local/state/frontier/artifacts";
  return "artifacts";
}

namespace {

int WorkerUsage(const std::string& problem, const std::string& usage) {
  std::cerr << "frontier-worker: " << problem << "\n" << usage;
  return kWorkerExitUsage;
}

}  // namespace

int RunWorker(const WorkerFlags& flags, const std::string& usage) {
  // Signals are taken synchronously by one thread; block them before any
  // other thread (gRPC's and the /metrics server's included) exists so none of those receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  AgentOptions options;
  ClientSecurity security;
  std::string trial_binary;
  if (const auto problem = ToOptions(flags, &options, &security, &trial_binary)) {
    return WorkerUsage(*problem, usage);
  }

  WorkDir work_dir;
  if (options.work_dir.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "frontier-worker-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::cerr << "frontier-worker: cannot create a work folder: " << std::strerror(errno) << "\n";
      return kWorkerExitFailure;
    }
    options.work_dir = pattern;
    work_dir.temporary = pattern;
  } else {
    std::error_code error;
    std::filesystem::create_directories(options.work_dir, error);
    if (error) return WorkerUsage("--work-dir '" + options.work_dir + "': " + error.message(), usage);
  }

  if (options.artifact_dir.empty()) options.artifact_dir = DefaultArtifactDir();
  {
    std::error_code error;
    std::filesystem::create_directories(options.artifact_dir, error);
    if (!error) options.artifact_dir = std::filesystem::absolute(options.artifact_dir, error).string();
    if (error) {
      std::cerr << "frontier-worker: cannot create the artifact folder '" << options.artifact_dir
                << "': " << error.message() << " (use --artifact-dir)\n";
      return kWorkerExitFailure;
    }
  }

  spdlog::set_default_logger(spdlog::stderr_color_mt("frontier-worker"));

  std::unique_ptr<MetricsEndpoint> metrics_endpoint;
  if (!MetricsDisabled(flags.metrics_listen)) {
    options.metrics =
        std::make_shared<WorkerMetrics>(options.slots, NameOf(options.device), options.device_name, kWorkerVersion);
    try {
      metrics_endpoint = std::make_unique<MetricsEndpoint>(flags.metrics_listen, options.metrics->registry());
      spdlog::info("metrics at {}", metrics_endpoint->url());
    } catch (const std::exception& e) {
      if (flags.metrics_listen_given) {  // asked for explicitly: a failure is fatal
        std::cerr << "frontier-worker: " << e.what() << "\n";
        return kWorkerExitFailure;
      }
      spdlog::warn("{}; running without /metrics (choose an address with --metrics-listen)", e.what());
      options.metrics.reset();
    }
  }

  Agent agent(options,
              v1::WorkerService::NewStub(
                  MakeCoordinatorChannel(flags.coordinator, std::chrono::seconds(5), security)),
              std::make_unique<ProcessTrialLauncher>(trial_binary, /*warm_slots=*/!flags.cold_trials));
  std::atomic<bool> done{false};
  std::thread signal_thread([&] {
    int received = 0;
    const timespec poll_interval{0, 200'000'000L};
    while (!done) {
      const int signal = sigtimedwait(&signals, nullptr, &poll_interval);
      if (signal < 0) continue;
      spdlog::info("received SIG{}", sigabbrev_np(signal));
      if (++received == 1) {
        agent.RequestDrain();
      } else {
        agent.RequestStop();
      }
    }
  });

  spdlog::info("frontier-worker {}: coordinator {}, trial binary {}, work dir {}, artifacts {}:{}",
               kWorkerVersion, flags.coordinator, trial_binary, options.work_dir, HostName(),
               options.artifact_dir);
  for (size_t slot = 0; slot < options.slot_cpus.size(); ++slot) {
    spdlog::info("slot {}: CPUs {}, {} thread(s) per trial{}", slot, FormatCpuList(options.slot_cpus[slot]),
                 options.threads_per_trial, options.cpus_shared ? " (fewer cores than slots: slots share cores)" : "");
  }
  if (options.memory_limit_mb > 0) spdlog::info("memory limit {} MiB per trial", options.memory_limit_mb);
  const grpc::Status status = agent.Run();
  done = true;
  signal_thread.join();
  if (!status.ok()) {
    std::cerr << "frontier-worker: " << status.error_message() << "\n";
    return kWorkerExitFailure;
  }
  return kWorkerExitOk;
}

}  // namespace frontier
