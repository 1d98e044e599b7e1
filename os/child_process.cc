#include "os/child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace frontier {
namespace {

// Signals a child starts with at their default disposition, whatever its parent did with them.
constexpr int kDefaultSignals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGPIPE, SIGTERM,
                                   SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM};

std::vector<char*> NullTerminated(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

std::optional<ChildFailure> SetUpChild(const ChildSetup& setup) {
  setpgid(0, 0);
  if (setup.parent_death_signal != 0) prctl(PR_SET_PDEATHSIG, setup.parent_death_signal);
  if (getppid() != setup.parent) return ChildFailure{kAdoptionStage, ESRCH};
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int signal : kDefaultSignals) sigaction(signal, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  const int input = setup.stdin_fd >= 0 ? setup.stdin_fd : open("/dev/null", O_RDONLY);
  if (input < 0 || dup2(input, STDIN_FILENO) < 0 ||
      (setup.stdout_fd >= 0 && dup2(setup.stdout_fd, STDOUT_FILENO) < 0) ||
      (setup.stderr_fd >= 0 && dup2(setup.stderr_fd, STDERR_FILENO) < 0)) {
    return ChildFailure{0, errno};
  }
  if (input != setup.stdin_fd && input > STDERR_FILENO) close(input);
  if (setup.cgroup_procs_fd >= 0 && write(setup.cgroup_procs_fd, "0", 1) != 1) return ChildFailure{1, errno};
  if (setup.cpus != nullptr && sched_setaffinity(0, sizeof *setup.cpus, setup.cpus) != 0) {
    return ChildFailure{2, errno};
  }
  if (setup.address_space != nullptr && setrlimit(RLIMIT_AS, setup.address_space) != 0) return ChildFailure{3, errno};
  if (setup.workdir != nullptr && chdir(setup.workdir) != 0) return ChildFailure{4, errno};
  return std::nullopt;
}

void FailChild(int status_fd, ChildFailure failure) {
  ssize_t ignored = write(status_fd, &failure, sizeof failure);
  (void)ignored;
  _exit(127);
}

std::optional<ChildFailure> ReadChildFailure(int status_fd) {
  ChildFailure failure;
  ssize_t n = 0;
  do {
    n = read(status_fd, &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof failure)) return failure;
  return std::nullopt;
}

cpu_set_t CpuSetOf(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  return set;
}

rlimit AddressSpaceLimit(int64_t bytes) {
  rlimit limit{};
  limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(bytes);
  return limit;
}

pid_t SpawnChild(const std::vector<std::string>& argv, const std::vector<std::string>* environment,
                 const ChildSetup& setup, std::string* error, const std::function<void(pid_t)>& forked) {
  if (argv.empty()) {
    *error = "cannot start a child: no program given";
    return -1;
  }
  const std::string& program = argv.front();
  int status[2];  // the child's setup or exec failure, if any; closed by a successful exec
  if (pipe2(status, O_CLOEXEC) != 0) {
    *error = "cannot start " + program + ": cannot create a pipe: " + std::strerror(errno);
    return -1;
  }
  // Everything the child needs is prepared here: between fork and exec it may only make system calls.
  std::vector<char*> args = NullTerminated(argv);
  std::vector<char*> envp = environment ? NullTerminated(*environment) : std::vector<char*>{};
  ChildSetup child_setup = setup;
  child_setup.parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    if (const std::optional<ChildFailure> failure = SetUpChild(child_setup)) FailChild(status[1], *failure);
    if (environment) {
      execvpe(args[0], args.data(), envp.data());
    } else {
      execvp(args[0], args.data());
    }
    FailChild(status[1], ChildFailure{0, errno});
  }
  const int fork_error = errno;
  if (pid > 0 && forked) forked(pid);
  if (pid > 0) setpgid(pid, pid);  // also here, so that a kill right away reaches the group (EACCES once it ran exec)
  close(status[1]);
  const std::optional<ChildFailure> failure = pid > 0 ? ReadChildFailure(status[0]) : std::nullopt;
  close(status[0]);
  if (pid < 0) {
    *error = "cannot start " + program + ": fork failed: " + std::strerror(fork_error);
    return -1;
  }
  if (failure) {
    int ignored = 0;
    waitpid(pid, &ignored, 0);
    *error = "cannot start " + program + ": " + kChildStages[failure->stage] + std::strerror(failure->error);
    return -1;
  }
  return pid;
}

}  // namespace frontier
