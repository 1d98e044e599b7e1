#include "worker/sandbox/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

// Everything here runs in processes forked from the caller, which may have
// other threads: only system calls, no allocation, no locks (see spawn.h).
namespace frontier::sandbox::internal {
namespace {

void WriteMessage(int fd, const Message& message) {
  ssize_t written;
  do {
    written = write(fd, &message, sizeof message);
  } while (written < 0 && errno == EINTR);
}

[[noreturn]] void Fail(const Plan& plan, Stage stage, int error) {
  Message message;
  message.kind = Message::kFailed;
  message.stage = stage;
  message.error = error;
  WriteMessage(plan.report_fd, message);
  _exit(127);
}

// Default dispositions and an empty signal mask, whatever the caller had.
void ResetSignals() {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  for (int signal = 1; signal < NSIG; ++signal) {
    if (signal != SIGKILL && signal != SIGSTOP)
      sigaction(signal, &action, nullptr);  // the C library's own refuse: fine
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

void CloseRange(unsigned first, unsigned last) {
  if (first > last || syscall(SYS_close_range, first, last, 0) == 0) return;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  const unsigned top = limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 65536 ? 65536 : limit.rlim_cur;
  for (unsigned fd = first; fd <= last && fd < top; ++fd) close(static_cast<int>(fd));
}

// Closes every descriptor but `keep` (the caller's other descriptors, another
// run's pipes among them, must not stay open in the sandbox).
void CloseAllBut(int* keep, int count) {
  for (int i = 1; i < count; ++i) {  // insertion sort: a handful of descriptors
    for (int j = i; j > 0 && keep[j - 1] > keep[j]; --j) {
      const int t = keep[j];
      keep[j] = keep[j - 1];
      keep[j - 1] = t;
    }
  }
  unsigned next = 0;
  for (int i = 0; i < count; ++i) {
    if (keep[i] < 0 || static_cast<unsigned>(keep[i]) < next) continue;
    if (keep[i] > 0) CloseRange(next, static_cast<unsigned>(keep[i]) - 1);
    next = static_cast<unsigned>(keep[i]) + 1;
  }
  CloseRange(next, ~0U);
}

// Every descriptor from 3 up closes at exec (the report pipe stays usable until then).
void CloseOnExecFrom3() {
  if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0) return;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  const int top = limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur > 65536 ? 65536 : limit.rlim_cur;
  for (int fd = 3; fd < top; ++fd) fcntl(fd, F_SETFD, FD_CLOEXEC);
}

Message Ended(int status, const rusage& usage) {
  Message message;
  message.kind = Message::kEnded;
  message.status = status;
  message.cpu_microseconds = (int64_t{usage.ru_utime.tv_sec} + usage.ru_stime.tv_sec) * 1000000 +
                             usage.ru_utime.tv_usec + usage.ru_stime.tv_usec;
  return message;
}

// In a mount namespace of its own: private mounts, the pid namespace's own
// /proc, without Landlock every mount read-only but the folder, and a
// private /dev/shm.
void SetUpMounts(const Plan& plan, uint32_t* applied) {
  if (!(*applied & kMountNamespace)) return;
  if (const int error = MakeMountsPrivate()) Fail(plan, kStageMounts, error);
  if ((*applied & kPidNamespace) && MountOwnProc() == 0) *applied |= kOwnProc;
  if (plan.landlock_abi == 0) {
    if (const int error = MakeMountsReadOnly(plan.mount_points, plan.mount_count, plan.folder)) {
      Fail(plan, kStageReadOnlyMounts, error);
    }
    *applied |= kReadOnlyMounts;
  }
  if (MountOwnShm() == 0) *applied |= kOwnShm;  // after the read-only pass: writable
}

bool SetLimit(int resource, const rlimit& limit) { return setrlimit(resource, &limit) == 0; }

// The program's process: its setup, then exec. `parent`: the pid its parent
// must have (the supervisor, or 1: the namespace's init).
[[noreturn]] void RunProgram(const Plan& plan, uint32_t applied, pid_t parent) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);  // the parent died before the line above
  if (!(applied & kPidNamespace)) SetUpMounts(plan, &applied);

  const int in = fcntl(plan.stdin_fd, F_DUPFD, 3);
  const int out = fcntl(plan.stdout_fd, F_DUPFD, 3);
  const int err = fcntl(plan.stderr_fd, F_DUPFD, 3);
  if (in < 0 || out < 0 || err < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
      dup2(err, STDERR_FILENO) < 0) {
    Fail(plan, kStageStandardStreams, errno);
  }
  CloseOnExecFrom3();
  if (chdir(plan.folder) != 0) Fail(plan, kStageFolder, errno);

  if (plan.landlock_abi == 0 && !(applied & kReadOnlyMounts) && !plan.allow_unconfined_filesystem) {
    Fail(plan, kStageUnconfinedFilesystem, 0);
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) Fail(plan, kStageNoNewPrivileges, errno);
  if (plan.landlock_abi > 0) {
    if (const int error = ApplyLandlock(plan.landlock_abi, plan.paths, plan.path_count, &applied)) {
      Fail(plan, kStageLandlock, error);
    }
  }
  bool complete = false;
  if (const int error = DropCapabilities(&complete)) Fail(plan, kStageCapabilities, error);
  if (complete) applied |= kNoCapabilities;
  if (plan.seccomp_count > 0) {
    const int error = InstallSeccomp(plan.seccomp, plan.seccomp_count);
    if (error == 0) {
      applied |= kSeccomp;
    } else if (error != EINVAL) {  // EINVAL: a kernel without seccomp filters
      Fail(plan, kStageSeccomp, error);
    }
  }
  if (!(applied & (kNetworkNamespace | kSeccomp))) Fail(plan, kStageUnconfinedNetwork, 0);

  // RLIMIT_CORE 1, not 0: 1 also stops a core_pattern pipe helper (for which
  // the kernel ignores the limit otherwise), and no core file is that small.
  const rlimit core{1, 1};
  if (!SetLimit(RLIMIT_CPU, plan.cpu) || !SetLimit(RLIMIT_AS, plan.address_space) ||
      !SetLimit(RLIMIT_FSIZE, plan.file_size) || !SetLimit(RLIMIT_NOFILE, plan.open_files) ||
      (!SetLimit(RLIMIT_CORE, core) && errno != EPERM)) {
    Fail(plan, kStageRlimits, errno);
  }
  applied |= kRlimits;

  Message message;
  message.kind = Message::kApplied;
  message.applied = applied;
  message.abi = plan.landlock_abi;
  WriteMessage(plan.report_fd, message);
  if (plan.probe) _exit(0);
  execve(plan.program, plan.argv, plan.envp);
  Fail(plan, kStageExec, errno);
}

// Pid 1 of the pid namespace: forks the program, reaps every process that
// ends up its child until the program ends, reports, exits (and the kernel
// then kills the rest of the namespace).
[[noreturn]] void RunInit(const Plan& plan, uint32_t applied) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  SetUpMounts(plan, &applied);
  const pid_t program = fork();
  if (program < 0) Fail(plan, kStageFork, errno);
  if (program == 0) RunProgram(plan, applied, 1);
  for (int fd : {plan.stdin_fd, plan.stdout_fd, plan.stderr_fd, plan.control_fd}) close(fd);
  int status = 0;
  rusage usage{};
  for (;;) {
    int reaped_status = 0;
    rusage reaped_usage{};
    const pid_t reaped = wait4(-1, &reaped_status, 0, &reaped_usage);
    if (reaped == program) {
      status = reaped_status;
      usage = reaped_usage;
      break;
    }
    if (reaped < 0 && errno != EINTR) _exit(127);  // ECHILD: cannot be while the program lives
  }
  WriteMessage(plan.report_fd, Ended(status, usage));
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// Until `child` has exited (it stays a zombie): a kill request on the control
// pipe SIGKILLs it.
void WaitKillingOnRequest(const Plan& plan, pid_t child) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, child, 0));
  bool killed = false;
  for (;;) {
    pollfd fds[2];
    int count = 0;
    if (!killed) fds[count++] = pollfd{plan.control_fd, POLLIN, 0};
    if (pidfd >= 0) fds[count++] = pollfd{pidfd, POLLIN, 0};
    const int ready = poll(fds, count, pidfd >= 0 ? -1 : 20);
    if (ready > 0 && !killed && fds[0].revents != 0) {
      kill(child, SIGKILL);  // not yet reaped: the pid is still the child's
      killed = true;
    }
    if (pidfd >= 0) {
      if (ready > 0 && fds[count - 1].revents != 0) break;
    } else {
      siginfo_t info{};
      if (waitid(P_PID, child, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == child) break;
    }
  }
  if (pidfd >= 0) close(pidfd);
}

// Without a pid namespace, as a subreaper: SIGKILLs and reaps every
// descendant left (each orphan becomes this process's child when its parent
// dies), until none is left.
void KillDescendants() {
  for (int idle = 0; idle < 100;) {
    const int fd = open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buffer[4096];
      const ssize_t n = read(fd, buffer, sizeof buffer - 1);
      close(fd);
      pid_t pid = 0;
      for (ssize_t i = 0; i < n; ++i) {
        if (buffer[i] >= '0' && buffer[i] <= '9') {
          pid = pid * 10 + (buffer[i] - '0');
        } else {
          if (pid > 0) kill(pid, SIGKILL);
          pid = 0;
        }
      }
      if (pid > 0) kill(pid, SIGKILL);
    }
    // With the list of children: block, everything listed is dying. Without
    // it (no /proc): poll for a second at most.
    const pid_t reaped = waitpid(-1, nullptr, fd >= 0 ? 0 : WNOHANG);
    if (reaped < 0 && errno == EINTR) continue;
    if (reaped < 0) return;  // ECHILD: none left
    if (reaped == 0) {
      ++idle;
      usleep(10000);
    }
  }
}

// Ends this process as `status` says: the same exit code, or the same signal
// (this process is not dumpable: no core).
[[noreturn]] void ForwardStatus(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const int signal = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigaction(signal, &action, nullptr);
  kill(getpid(), signal);
  _exit(128 + signal);
}

}  // namespace

const char* StageText(int stage) {
  switch (stage) {
    case kStageFork:
      return "forking";
    case kStageMounts:
      return "making its mounts private";
    case kStageReadOnlyMounts:
      return "making the mounts read-only";
    case kStageUnconfinedFilesystem:
      return "confining its files: Landlock is unavailable and no mount namespace could be made (that needs "
             "root); set allow_unconfined_filesystem to run it unconfined";
    case kStageUnconfinedNetwork:
      return "confining its network: neither a network namespace nor a seccomp filter could be applied";
    case kStageStandardStreams:
      return "redirecting its standard streams";
    case kStageFolder:
      return "entering its folder";
    case kStageNoNewPrivileges:
      return "setting no_new_privs";
    case kStageLandlock:
      return "applying Landlock";
    case kStageCapabilities:
      return "dropping its capabilities";
    case kStageSeccomp:
      return "installing its seccomp filter";
    case kStageRlimits:
      return "setting its rlimits";
    case kStageExec:
      return "executing the program";
  }
  return "setting up the sandbox";
}

[[noreturn]] void Supervise(const Plan& plan) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != plan.caller) _exit(127);  // the caller died before the line above
  prctl(PR_SET_DUMPABLE, 0);
  ResetSignals();
  int keep[] = {plan.stdin_fd, plan.stdout_fd, plan.stderr_fd, plan.report_fd, plan.control_fd};
  CloseAllBut(keep, 5);

  uint32_t applied = 0;
  if (plan.namespaces) {
    if (unshare(CLONE_NEWNET) == 0) applied |= kNetworkNamespace;
    if (unshare(CLONE_NEWNS) == 0) applied |= kMountNamespace;
    if (unshare(CLONE_NEWPID) == 0) applied |= kPidNamespace;
  }
  const bool pid_namespace = (applied & kPidNamespace) != 0;
  if (!pid_namespace && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0) applied |= kSubreaper;
  const pid_t self = getpid();
  const pid_t child = fork();
  if (child < 0) Fail(plan, kStageFork, errno);
  if (child == 0) {
    if (pid_namespace) RunInit(plan, applied);
    RunProgram(plan, applied, self);
  }
  for (int fd : {plan.stdin_fd, plan.stdout_fd, plan.stderr_fd}) close(fd);

  WaitKillingOnRequest(plan, child);
  int status = 0;
  rusage usage{};
  while (wait4(child, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  if (!pid_namespace) {
    KillDescendants();
    WriteMessage(plan.report_fd, Ended(status, usage));
  }
  ForwardStatus(status);
}

}  // namespace frontier::sandbox::internal
