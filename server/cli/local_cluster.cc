#include "server/cli/local_cluster.h"
#include "os/cpus.h"

#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

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
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("cannot start a worker: fork failed");
    if (pid == 0) {
      FILE* f = std::fopen(log.c_str(), "a");
      if (f) {
        dup2(fileno(f), STDOUT_FILENO);
        dup2(fileno(f), STDERR_FILENO);
      }
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      setpgid(0, 0);  // Ctrl-C reaches the CLI, which stops the workers itself
      // A CLI that dies without stopping them (SIGKILL, the OOM killer) still stops them: SIGTERM drains.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(0);  // it died before the line above
      const char* argv[] = {binary.c_str(),  "--coordinator",     coordinator.c_str(),
                            "--slots",       slots.c_str(),       "--device",
                            device.c_str(),       "--threads-per-trial", threads.c_str(),
                            "--name",        name.c_str(),        "--metrics-listen",
                            metrics_listen.c_str(), "--artifact-dir", artifacts.c_str(),
                            "--cpus",        cpus.c_str(),        "--memory-limit-mb",
                            memory_limit.c_str(), nullptr};
      execv(binary.c_str(), const_cast<char* const*>(argv));
      execvp(binary.c_str(), const_cast<char* const*>(argv));
      std::fprintf(stderr, "cannot execute %s\n", binary.c_str());
      _exit(127);
    }
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
