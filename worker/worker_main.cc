// frontier-worker: the long-running agent for one machine's devices. Parses
// flags into AgentOptions, wires the agent to the coordinator and to
// frontier-trial, and turns SIGTERM/SIGINT into a drain (the first) and a
// stop (the second). See docs/worker.md.
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "metrics/endpoint.h"
#include "worker/agent/worker_metrics.h"
#include "worker/agent/agent.h"
#include "worker/agent/trial_process.h"

namespace {

constexpr int kExitUsage = 64;
constexpr int kExitFailure = 1;

constexpr const char* kUsage =
    "usage: frontier-worker --coordinator HOST:PORT [flags]\n"
    "  --coordinator HOST:PORT   the coordinator's address (required)\n"
    "  --slots N                 trials run at once, one per device (default 1)\n"
    "  --device cpu|cuda         device kind (default cpu); on cuda slot i runs on GPU i\n"
    "  --trial-binary PATH       frontier-trial to run (default: next to this executable, else PATH)\n"
    "  --trial-timeout SECONDS   kill a trial running longer than this (default 3600)\n"
    "  --threads-per-trial N     runtime.threads for specs that leave it at 0 (default cores / slots)\n"
    "  --progress-every N        frontier-trial --progress-every (default 10)\n"
    "  --work-dir DIR            folder for spec files (default: a fresh temporary folder)\n"
    "  --artifact-dir DIR        profiles of trials go to DIR/<trial id>/ (default\n"
    "                            $XDG_STATE_HOME/frontier/artifacts, else "
    "~/.local/state/frontier/artifacts)\n"
    "  --max-trials N            exit after N trials (default 0: run until stopped)\n"
    "  --drain-timeout SECONDS   on SIGTERM/SIGINT, wait this long for running trials (default 600)\n"
    "  --name NAME               this worker's label for people (default: the host name)\n"
    "  --token-file FILE         worker token for a coordinator that requires one (else $FRONTIER_TOKEN)\n"
    "  --tls-ca FILE             connect with TLS, trusting this CA; --tls-cert/--tls-key FILE for mutual "
    "TLS\n"
    "  --metrics-listen HOST:PORT  serve Prometheus /metrics there (default 127.0.0.1:9465; port 0: any\n"
    "                            free port; 0 or empty: none)\n"
    "exit status: 0 done or drained, 1 registration refused, no work or artifact folder or no /metrics "
    "address,\n"
    "  64 usage error\n";

int Usage(const std::string& problem) {
  std::cerr << "frontier-worker: " << problem << "\n" << kUsage;
  return kExitUsage;
}

int UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::optional<long> ParseWhole(const std::string& text, long min) {
  try {
    size_t used = 0;
    const long value = std::stol(text, &used);
    if (used == text.size() && value >= min) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<std::chrono::milliseconds> ParseSeconds(const std::string& text) {
  try {
    size_t used = 0;
    const double seconds = std::stod(text, &used);
    if (used == text.size() && seconds > 0)
      return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// True when `binary` (a path, or a bare name for PATH) names an executable.
bool Executable(const std::string& binary) {
  if (binary.find('/') != std::string::npos) return access(binary.c_str(), X_OK) == 0;
  const char* path = getenv("PATH");
  std::string dirs = path ? path : "";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', begin), dirs.size());
    const std::string dir = dirs.substr(begin, end - begin);
    if (!dir.empty() && access((dir + "/" + binary).c_str(), X_OK) == 0) return true;
    begin = end + 1;
  }
  return false;
}

// $XDG_STATE_HOME/frontier/artifacts, else $HOME/.local/state/frontier/artifacts, else ./artifacts.
std::string DefaultArtifactDir() {
  const char* state = getenv("XDG_STATE_HOME");
  if (state != nullptr && *state == '/') return std::string(state) + "/frontier/artifacts";
  const char* home = getenv("HOME");
  if (home != nullptr && *home == '/') return std::string(home) + "/.local/state/frontier/artifacts";
  return "artifacts";
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  // Signals are taken synchronously by one thread; block them before any
  // other thread (gRPC's and the /metrics server's included) exists so none of those receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  frontier::AgentOptions options;
  std::string coordinator;
  std::string token_file;
  frontier::ClientSecurity security;
  std::string trial_binary;
  std::optional<long> threads_per_trial;
  std::string metrics_listen = "127.0.0.1:9465";
  bool metrics_listen_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::optional<std::string> value;
    if (const size_t equals = flag.find('='); flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      value = flag.substr(equals + 1);
      flag.resize(equals);
    }
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (!value) {
      if (i + 1 >= argc) return Usage("unknown or incomplete argument '" + flag + "'");
      value = argv[++i];
    }
    const std::string bad = flag + " does not take '" + *value + "'";
    if (flag == "--coordinator") {
      coordinator = *value;
    } else if (flag == "--slots") {
      const auto slots = ParseWhole(*value, 1);
      if (!slots) return Usage(bad + ": a whole number >= 1");
      options.slots = static_cast<int>(*slots);
    } else if (flag == "--device") {
      if (*value != "cpu" && *value != "cuda") return Usage(bad + ": cpu or cuda");
      options.device = *value;
    } else if (flag == "--trial-binary") {
      trial_binary = *value;
    } else if (flag == "--trial-timeout") {
      const auto timeout = ParseSeconds(*value);
      if (!timeout) return Usage(bad + ": seconds > 0");
      options.trial_timeout = *timeout;
    } else if (flag == "--threads-per-trial") {
      threads_per_trial = ParseWhole(*value, 1);
      if (!threads_per_trial) return Usage(bad + ": a whole number >= 1");
    } else if (flag == "--progress-every") {
      const auto every = ParseWhole(*value, 0);
      if (!every) return Usage(bad + ": a whole number >= 0");
      options.progress_every = static_cast<int>(*every);
    } else if (flag == "--work-dir") {
      options.work_dir = *value;
    } else if (flag == "--artifact-dir") {
      if (value->empty()) return Usage("--artifact-dir takes a folder");
      options.artifact_dir = *value;
    } else if (flag == "--max-trials") {
      const auto max_trials = ParseWhole(*value, 0);
      if (!max_trials) return Usage(bad + ": a whole number >= 0");
      options.max_trials = static_cast<int>(*max_trials);
    } else if (flag == "--drain-timeout") {
      const auto timeout = ParseSeconds(*value);
      if (!timeout) return Usage(bad + ": seconds > 0");
      options.drain_timeout = *timeout;
    } else if (flag == "--token-file") {
      token_file = *value;
    } else if (flag == "--tls-ca") {
      security.tls_ca_file = *value;
    } else if (flag == "--tls-cert") {
      security.tls_cert_file = *value;
    } else if (flag == "--tls-key") {
      security.tls_key_file = *value;
    } else if (flag == "--name") {
      options.host = *value;
    } else if (flag == "--metrics-listen") {
      metrics_listen = *value;
      metrics_listen_given = true;
    } else {
      return Usage("unknown argument '" + flag + "'");
    }
  }
  if (coordinator.empty()) return Usage("--coordinator is required");
  try {
    security.token = frontier::ReadToken(token_file, "FRONTIER_TOKEN");
  } catch (const std::exception& e) {
    return Usage(e.what());
  }
  if (trial_binary.empty()) trial_binary = frontier::DefaultTrialBinary();
  if (!Executable(trial_binary)) {
    return Usage("frontier-trial not found or not executable: '" + trial_binary + "' (use --trial-binary)");
  }
  if (options.host.empty()) options.host = HostName();
  options.threads_per_trial =
      static_cast<int>(threads_per_trial.value_or(std::max(1, UsableCores() / options.slots)));
  options.device_name = frontier::DetectDeviceName(options.device);
  // Slot i runs on the i-th GPU this worker was given, when it was given some.
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible && *visible && options.device == "cuda") {
    std::stringstream list(visible);
    for (std::string gpu; std::getline(list, gpu, ',');) {
      if (!gpu.empty()) options.visible_devices.push_back(gpu);
    }
    if (static_cast<int>(options.visible_devices.size()) < options.slots) {
      return Usage("--slots " + std::to_string(options.slots) + " but CUDA_VISIBLE_DEVICES='" + visible + "' gives " +
                   std::to_string(options.visible_devices.size()) + " GPU(s)");
    }
  }

  std::optional<std::filesystem::path> temporary_work_dir;
  if (options.work_dir.empty()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "frontier-worker-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      std::cerr << "frontier-worker: cannot create a work folder: " << std::strerror(errno) << "\n";
      return kExitFailure;
    }
    options.work_dir = pattern;
    temporary_work_dir = pattern;
  } else {
    std::error_code error;
    std::filesystem::create_directories(options.work_dir, error);
    if (error) return Usage("--work-dir '" + options.work_dir + "': " + error.message());
  }

  if (options.artifact_dir.empty()) options.artifact_dir = DefaultArtifactDir();
  {
    std::error_code error;
    std::filesystem::create_directories(options.artifact_dir, error);
    if (!error) options.artifact_dir = std::filesystem::absolute(options.artifact_dir, error).string();
    if (error) {
      std::cerr << "frontier-worker: cannot create the artifact folder '" << options.artifact_dir
                << "': " << error.message() << " (use --artifact-dir)\n";
      if (temporary_work_dir) std::filesystem::remove_all(*temporary_work_dir);
      return kExitFailure;
    }
  }

  spdlog::set_default_logger(spdlog::stderr_color_mt("frontier-worker"));

  std::unique_ptr<frontier::MetricsEndpoint> metrics_endpoint;
  if (!frontier::MetricsDisabled(metrics_listen)) {
    options.metrics = std::make_shared<frontier::WorkerMetrics>(
        options.slots, options.device, options.device_name, frontier::kWorkerVersion);
    try {
      metrics_endpoint =
          std::make_unique<frontier::MetricsEndpoint>(metrics_listen, options.metrics->registry());
      spdlog::info("metrics at {}", metrics_endpoint->url());
    } catch (const std::exception& e) {
      if (metrics_listen_given) {  // asked for explicitly: a failure is fatal
        std::cerr << "frontier-worker: " << e.what() << "\n";
        if (temporary_work_dir) std::filesystem::remove_all(*temporary_work_dir);
        return kExitFailure;
      }
      spdlog::warn("{}; running without /metrics (choose an address with --metrics-listen)", e.what());
      options.metrics.reset();
    }
  }

  frontier::Agent agent(options,
                        frontier::v1::WorkerService::NewStub(
                            frontier::MakeCoordinatorChannel(coordinator, std::chrono::seconds(5), security)),
                        std::make_unique<frontier::ProcessTrialLauncher>(trial_binary));
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
               frontier::kWorkerVersion, coordinator, trial_binary, options.work_dir, HostName(),
               options.artifact_dir);
  const grpc::Status status = agent.Run();
  done = true;
  signal_thread.join();
  if (temporary_work_dir) {
    std::error_code ignored;
    std::filesystem::remove_all(*temporary_work_dir, ignored);
  }
  if (!status.ok()) {
    std::cerr << "frontier-worker: " << status.error_message() << "\n";
    return kExitFailure;
  }
  return 0;
}
