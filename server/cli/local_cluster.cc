#include "server/cli/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "os/child_process.h"
#include "os/cpus.h"

namespace frontier {
namespace fs = std::filesystem;

namespace {

// frontier-worker --cpus: "0,1,2" (the worker sorts and splits it).
std::string CpuList(const std::vector<int>& cpus) {
  std::string text;
  for (int cpu : cpus) text += (text.empty() ? "" : ",") + std::to_string(cpu);
  return text;
}

}  // namespace

std::string SiblingBinary(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const fs::path& candidate :
         {self.parent_path() / name, self.parent_path().parent_path() / "worker" / name}) {
      if (fs::exists(candidate)) return candidate.string();
    }
  }
  return name;  // from PATH
}


LocalWorkers::~LocalWorkers() { Stop(std::chrono::seconds(5)); }

void LocalWorkers::Start(const LocalWorkerOptions& options, const std::string& coordinator,
                         const fs::path& log_dir, const std::string& metrics_listen) {
  const std::string binary = SiblingBinary("frontier-worker");
  const int count = options.count;
  // Timing isolation: every slot of every worker on cores of its own.
  const std::vector<int> usable = UsableCpus();
  const int per_slot = std::max(1, static_cast<int>(usable.size()) / (count * options.slots));
  const std::string threads = std::to_string(per_slot);
  const std::string slots = std::to_string(options.slots);
  const std::string memory_limit = std::to_string(options.memory_limit_mb);
  const std::string device = NameOf(options.device);
  fs::create_directories(log_dir);
  const std::string artifacts = fs::absolute(log_dir / "artifacts").string();  // profiles (docs/profiling.md)
  for (int i = 0; i < count; ++i) {
    const std::string log = (log_dir / ("worker-" + std::to_string(i) + ".log")).string();
    const std::string name = "local-" + std::to_string(i);
    std::vector<int> mine;
    for (int k = 0; k < per_slot * options.slots; ++k) {
      mine.push_back(usable[(static_cast<size_t>(i) * per_slot * options.slots + k) % usable.size()]);
    }
    const std::string cpus = CpuList(mine);
    const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) throw std::runtime_error("cannot start a worker: cannot open " + log + ": " + std::strerror(errno));
    ChildSetup setup;
    setup.stdout_fd = setup.stderr_fd = log_fd;
    // A CLI that dies without stopping them (SIGKILL, the OOM killer) still stops them: SIGTERM drains.
    // Each in its own process group: Ctrl-C reaches the CLI, which stops the workers itself.
    setup.parent_death_signal = SIGTERM;
    std::string error;
    const pid_t pid = SpawnChild({binary, "--coordinator", coordinator, "--slots", slots, "--device", device,
                                  "--threads-per-trial", threads, "--name", name, "--metrics-listen", metrics_listen,
                                  "--artifact-dir", artifacts, "--cpus", cpus, "--memory-limit-mb", memory_limit},
                                 nullptr, setup, &error);
    close(log_fd);
    if (pid < 0) throw std::runtime_error("cannot start a worker: " + error);
    pids_.push_back(pid);
  }
}

int LocalWorkers::Exited() {
  int n = 0;
  for (pid_t& pid : pids_) {
    int status = 0;
    if (pid > 0 && waitpid(pid, &status, WNOHANG) == pid) {
      pid = -1;
    }
    if (pid < 0) ++n;
  }
  return n;
}

void LocalWorkers::Stop(std::chrono::seconds grace) {
  for (pid_t pid : pids_) {
    if (pid > 0) kill(pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (pid_t& pid : pids_) {
    while (pid > 0) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
      } else if (std::chrono::steady_clock::now() > deadline) {
        kill(-pid, SIGKILL);  // the worker's process group: its trial too
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        pid = -1;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  pids_.clear();
}

}  // namespace frontier
