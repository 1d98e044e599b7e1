#include "worker/sandbox/sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "worker/sandbox/confine.h"
#include "worker/sandbox/spawn.h"
#include "os/monotonic.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace frontier::sandbox {
namespace {

using internal::Message;

constexpr size_t kReadChunk = size_t{64} * 1024;
// After a kill request, how long the supervisor has to end everything before
// its whole process group is SIGKILLed; after that, or once the supervisor
// has exited, how long stray holders of the pipes get before reading stops.
constexpr std::chrono::seconds kKillGrace{5};
constexpr std::chrono::seconds kDrainGrace{2};
// The system paths every program may read and execute.
constexpr const char* kSystemPaths[] = {"/usr",  "/lib", "/lib64", "/etc", "/bin",
                                        "/sbin", "/opt", "/proc",  "/sys"};

// A descriptor closed when it goes out of scope (or by Close, once).
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  void Reset(int fd) {
    Close();
    fd_ = fd;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// A pipe with both ends close-on-exec; false when none could be made.
bool MakePipe(Fd* read_end, Fd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  read_end->Reset(fds[0]);
  write_end->Reset(fds[1]);
  return true;
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Blocks SIGPIPE in this thread while it lives, so a write to a pipe whose
// reader is gone fails with EPIPE instead of killing the caller; a SIGPIPE
// that such a write left pending is taken back before the mask is restored.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlock() {
    if (!was_pending_) {
      const timespec zero{};
      while (sigtimedwait(&pipe_, nullptr, &zero) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

// `limit` within what this process may set (a non-root caller cannot raise a hard limit).
rlimit Bounded(int resource, rlim_t soft, rlim_t hard) {
  rlimit own{};
  getrlimit(resource, &own);
  if (own.rlim_max != RLIM_INFINITY) {
    soft = std::min(soft, own.rlim_max);
    hard = std::min(hard, own.rlim_max);
  }
  return rlimit{soft, hard};
}

std::vector<char*> NullTerminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

std::string SignalName(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  const char* description = strsignal(signal);
  return (abbreviation ? "SIG" + std::string(abbreviation) : "signal " + std::to_string(signal)) +
         (description ? " (" + std::string(description) + ")" : "");
}

std::string Seconds(double seconds, const char* format) {
  char text[64];
  std::snprintf(text, sizeof text, format, seconds);
  return text;
}

std::vector<std::string> Describe(uint32_t applied, int abi) {
  using namespace internal;
  const std::string version = " (abi " + std::to_string(abi) + ")";
  std::vector<std::string> isolation;
  const std::pair<uint32_t, std::string> names[] = {
      {kNetworkNamespace, "network namespace"},
      {kPidNamespace, "pid namespace"},
      {kMountNamespace, "mount namespace"},
      {kOwnProc, "own /proc"},
      {kOwnShm, "own /dev/shm (64 MiB tmpfs)"},
      {kSubreaper, "subreaper (no pid namespace)"},
      {kReadOnlyMounts, "read-only mounts except the folder"},
      {kLandlockFilesystem, "landlock filesystem" + version},
      {kLandlockTcp, "landlock tcp" + version},
      {kLandlockScope, "landlock scope: signals, abstract unix sockets" + version},
      {kSeccomp, "seccomp: socket families other than AF_UNIX refused"},
      {kSeccomp, "seccomp: connect, io_uring, new namespaces, mount, bpf, userfaultfd, keyrings refused"},
      {kNoCapabilities, "no capabilities"},
      {kRlimits, "rlimits"},
  };
  for (const auto& [bit, name] : names) {
    if (applied & bit) isolation.push_back(name);
  }
  return isolation;
}

Outcome StartFailed(Outcome outcome, std::string why) {
  outcome.ending = Ending::kStartFailed;
  outcome.start_error = std::move(why);
  return outcome;
}

// The problem with `options`, or empty.
std::string Problem(const Options& options, std::string* folder) {
  if (options.argv.empty()) return "no program: argv is empty";
  if (options.argv[0].empty() || options.argv[0][0] != '/') {
    return "argv[0] is not an absolute path: \"" + options.argv[0] + "\"";
  }
  for (const std::string& arg : options.argv) {
    if (arg.find('\0') != std::string::npos) return "an argument holds a NUL byte";
  }
  for (const auto& [name, value] : options.environment) {
    if (name.empty() || name.find_first_of("=") != std::string::npos ||
        name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      return "invalid environment variable \"" + name + "\"";
    }
  }
  const Limits& l = options.limits;
  if (!(l.cpu_seconds > 0) || !(l.wall_seconds > 0) || l.memory_bytes <= 0 || l.output_bytes < 0 ||
      l.file_bytes < 0 || l.open_files <= 0) {
    return "invalid limits: cpu, wall, memory and open files must be positive, output and file bytes not "
           "negative";
  }
  char resolved[PATH_MAX];
  struct stat st {};
  if (options.folder.empty()) return "no folder";
  if (realpath(options.folder.c_str(), resolved) == nullptr || stat(resolved, &st) != 0) {
    return "its folder " + options.folder + ": " + std::strerror(errno);
  }
  if (!S_ISDIR(st.st_mode)) return "its folder " + options.folder + " is not a folder";
  *folder = resolved;
  for (const std::string& path : options.read_only) {
    if (path.empty() || path[0] != '/') return "read_only path is not absolute: \"" + path + "\"";
    if (stat(path.c_str(), &st) != 0) return "read_only path " + path + ": " + std::strerror(errno);
  }
  return "";
}

Outcome RunSandbox(const Options& options, bool probe) {
  const Monotonic::time_point start = Monotonic::now();
  Outcome outcome;
  outcome.limits = options.limits;
  std::string folder;
  if (std::string problem = Problem(options, &folder); !problem.empty()) {
    return StartFailed(std::move(outcome), std::move(problem));
  }
  const Limits& limits = options.limits;

  // Everything the children use, made here: they may only make system calls.
  std::vector<std::string> args = options.argv;
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "HOME=" + folder, "TMPDIR=" + folder};
  for (const auto& [name, value] : options.environment) {
    const std::string prefix = name + "=";
    env.erase(
        std::remove_if(env.begin(), env.end(), [&](const std::string& e) { return e.rfind(prefix, 0) == 0; }),
        env.end());
    env.push_back(prefix + value);
  }
  std::vector<char*> argv = NullTerminated(args);
  std::vector<char*> envp = NullTerminated(env);
  using internal::Access;
  std::vector<internal::LandlockPath> paths;
  for (const char* system : kSystemPaths) paths.push_back({system, Access::kRead, true});
  for (const std::string& path : options.read_only) paths.push_back({path.c_str(), Access::kRead, false});
  paths.push_back({args[0].c_str(), Access::kRead, true});
  paths.push_back({"/dev/null", Access::kDeviceReadWrite, true});
  for (const char* device : {"/dev/zero", "/dev/random", "/dev/urandom"}) {
    paths.push_back({device, Access::kDevice, true});
  }
  paths.push_back({folder.c_str(), Access::kReadWrite, false});
  paths.push_back({"/dev/shm", Access::kReadWrite, true, internal::kOwnShm});  // only its own
  const int landlock_abi = options.use_landlock ? internal::LandlockAbi() : 0;
  std::vector<std::string> mounts;
  if (landlock_abi == 0 && options.use_namespaces) mounts = internal::MountPoints();
  std::vector<const char*> mount_points;
  for (const std::string& m : mounts) mount_points.push_back(m.c_str());
  const std::vector<sock_filter> seccomp =
      internal::SeccompFilter(options.kill_on_network, options.single_process);

  const auto cpu = static_cast<rlim_t>(std::max(1.0, std::ceil(limits.cpu_seconds)));
  internal::Plan plan;
  plan.caller = getpid();
  plan.namespaces = options.use_namespaces;
  plan.landlock_abi = landlock_abi;
  plan.allow_unconfined_filesystem = options.allow_unconfined_filesystem;
  plan.probe = probe;
  plan.program = args[0].c_str();
  plan.argv = argv.data();
  plan.envp = envp.data();
  plan.folder = folder.c_str();
  plan.paths = paths.data();
  plan.path_count = paths.size();
  plan.mount_points = mount_points.data();
  plan.mount_count = mount_points.size();
  plan.seccomp = seccomp.data();
  plan.seccomp_count = seccomp.size();
  plan.cpu = Bounded(RLIMIT_CPU, cpu, cpu + 1);  // SIGXCPU at the limit, SIGKILL a second later
  plan.address_space = Bounded(RLIMIT_AS, limits.memory_bytes, limits.memory_bytes);
  plan.file_size = Bounded(RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes);
  plan.open_files = Bounded(RLIMIT_NOFILE, limits.open_files, limits.open_files);

  Fd stdin_read, stdin_write, stdout_read, stdout_write, stderr_read, stderr_write;
  Fd report_read, report_write, control_read, control_write;
  if (!MakePipe(&stdin_read, &stdin_write) || !MakePipe(&stdout_read, &stdout_write) ||
      !MakePipe(&stderr_read, &stderr_write) || !MakePipe(&report_read, &report_write) ||
      !MakePipe(&control_read, &control_write)) {
    return StartFailed(std::move(outcome), std::string("creating a pipe: ") + std::strerror(errno));
  }
  plan.stdin_fd = stdin_read.get();
  plan.stdout_fd = stdout_write.get();
  plan.stderr_fd = stderr_write.get();
  plan.report_fd = report_write.get();
  plan.control_fd = control_read.get();

  SigpipeBlock sigpipe_block;
  const pid_t supervisor = fork();
  if (supervisor == 0) internal::Supervise(plan);
  if (supervisor < 0) return StartFailed(std::move(outcome), std::string("forking: ") + std::strerror(errno));
  setpgid(supervisor, supervisor);  // also here, so a kill right away reaches the group
  if (options.on_start) options.on_start(supervisor);
  for (Fd* child_end : {&stdin_read, &stdout_write, &stderr_write, &report_write, &control_read})
    child_end->Close();
  for (const Fd* fd : {&stdin_write, &stdout_read, &stderr_read, &report_read}) SetNonBlocking(fd->get());
  // The supervisor is this process's child and is reaped only below: its
  // pidfd, pid and process group stay its own until then.
  Fd supervisor_pidfd(static_cast<int>(syscall(SYS_pidfd_open, supervisor, 0)));

  if (options.stdin_text.empty()) stdin_write.Close();
  size_t stdin_offset = 0;
  std::string report;
  bool timed_out = false;
  std::optional<Monotonic::time_point> kill_requested, group_killed, supervisor_ended;
  const Monotonic::time_point deadline =
      start + std::chrono::duration_cast<Monotonic::duration>(std::chrono::duration<double>(limits.wall_seconds));
  const auto request_kill = [&] {
    if (kill_requested) return;
    kill_requested = Monotonic::now();
    const char byte = 'k';
    ssize_t ignored = write(control_write.get(), &byte, 1);
    (void)ignored;
    control_write.Close();
  };
  const auto program_ended = [&] {
    for (size_t at = 0; at + sizeof(Message) <= report.size(); at += sizeof(Message)) {
      Message m;
      std::memcpy(&m, report.data() + at, sizeof m);
      if (m.kind == Message::kEnded || m.kind == Message::kFailed) return true;
    }
    return false;
  };
  // Reads what `fd` has into *sink, up to the output limit; past it the sandbox is killed.
  const auto read_output = [&](Fd* fd, std::string* sink, int stream) {
    char buffer[kReadChunk];
    const ssize_t n = read(fd->get(), buffer, sizeof buffer);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) fd->Close();
    if (n <= 0) return;
    const size_t room =
        static_cast<size_t>(limits.output_bytes) - std::min(sink->size(), size_t(limits.output_bytes));
    sink->append(buffer, std::min(room, static_cast<size_t>(n)));
    if (static_cast<size_t>(n) > room && !kill_requested) {
      outcome.output_stream = stream;
      request_kill();
    }
  };

  while (stdout_read.get() >= 0 || stderr_read.get() >= 0 || report_read.get() >= 0) {
    const Monotonic::time_point now = Monotonic::now();
    if (!kill_requested && now >= deadline && !program_ended()) {
      timed_out = true;
      request_kill();
    }
    if (kill_requested && !group_killed && now >= *kill_requested + kKillGrace) {
      kill(-supervisor, SIGKILL);  // the supervisor did not end it: the whole group
      group_killed = now;
    }
    if ((group_killed && now >= *group_killed + kDrainGrace) ||
        (supervisor_ended && now >= *supervisor_ended + kDrainGrace)) {
      break;  // something outside the sandbox's reach holds a pipe: stop reading
    }
    Monotonic::time_point wake = kill_requested ? *kill_requested + kKillGrace : deadline;
    if (group_killed) wake = *group_killed + kDrainGrace;
    if (supervisor_ended) wake = std::min(wake, *supervisor_ended + kDrainGrace);
    const auto wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1;

    pollfd fds[5];
    int count = 0;
    for (const Fd* fd : {&stdout_read, &stderr_read, &report_read}) {
      if (fd->get() >= 0) fds[count++] = pollfd{fd->get(), POLLIN, 0};
    }
    if (stdin_write.get() >= 0) fds[count++] = pollfd{stdin_write.get(), POLLOUT, 0};
    if (supervisor_pidfd.get() >= 0 && !supervisor_ended)
      fds[count++] = pollfd{supervisor_pidfd.get(), POLLIN, 0};
    const int ready = poll(fds, count, static_cast<int>(std::clamp<int64_t>(wait_ms, 1, 1000)));
    if (ready <= 0) continue;
    for (int i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = fds[i].fd;
      if (fd == stdout_read.get()) {
        read_output(&stdout_read, &outcome.stdout_text, 1);
      } else if (fd == stderr_read.get()) {
        read_output(&stderr_read, &outcome.stderr_text, 2);
      } else if (fd == report_read.get()) {
        char buffer[4096];
        const ssize_t n = read(fd, buffer, sizeof buffer);
        if (n > 0) report.append(buffer, static_cast<size_t>(n));
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) report_read.Close();
      } else if (fd == stdin_write.get()) {
        const size_t left = options.stdin_text.size() - stdin_offset;
        const ssize_t n = write(fd, options.stdin_text.data() + stdin_offset, std::min(left, kReadChunk));
        if (n > 0) stdin_offset += static_cast<size_t>(n);
        if (stdin_offset == options.stdin_text.size() || (n < 0 && errno != EINTR && errno != EAGAIN)) {
          stdin_write.Close();  // all written, or its reader is gone (EPIPE)
        }
      } else if (fd == supervisor_pidfd.get()) {
        supervisor_ended = Monotonic::now();
      }
    }
  }
  for (Fd* fd : {&stdin_write, &stdout_read, &stderr_read, &report_read}) fd->Close();
  control_write.Close();  // if the supervisor still runs, this is a kill request

  // The supervisor has exited or is about to (it ends everything once the
  // program has ended, and the control pipe is closed); past the grace its
  // group is killed. Reaped in every case.
  int status = 0;
  rusage usage{};
  const Monotonic::time_point reap_deadline = Monotonic::now() + kKillGrace;
  for (;;) {
    const pid_t reaped = wait4(supervisor, &status, WNOHANG, &usage);
    if (reaped == supervisor || (reaped < 0 && errno != EINTR)) break;
    if (reaped == 0 && Monotonic::now() >= reap_deadline) {
      kill(-supervisor, SIGKILL);
      while (wait4(supervisor, &status, 0, &usage) < 0 && errno == EINTR) {
      }
      break;
    }
    if (reaped == 0) usleep(10000);
  }
  outcome.wall_seconds = std::chrono::duration<double>(Monotonic::now() - start).count();
  outcome.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                        static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;

  std::optional<Message> failed, ended;
  for (size_t at = 0; at + sizeof(Message) <= report.size(); at += sizeof(Message)) {
    Message m;
    std::memcpy(&m, report.data() + at, sizeof m);
    if (m.kind == Message::kApplied) outcome.isolation = Describe(m.applied, m.abi);
    if (m.kind == Message::kFailed && !failed) failed = m;
    if (m.kind == Message::kEnded) ended = m;
  }
  if (failed) {
    const std::string step =
        failed->stage == internal::kStageExec ? "executing " + args[0] : internal::StageText(failed->stage);
    return StartFailed(std::move(outcome),
                       failed->error != 0 ? step + ": " + std::strerror(failed->error) : step);
  }
  if (timed_out) {
    outcome.ending = Ending::kTimedOut;
  } else if (outcome.output_stream != 0) {
    outcome.ending = Ending::kOutputLimit;
  } else if (ended || WIFEXITED(status) || WIFSIGNALED(status)) {
    // The program's own status; without its report (the supervisor was
    // killed), the supervisor's, which forwards the program's.
    const int program_status = ended ? ended->status : status;
    const double program_cpu =
        ended ? static_cast<double>(ended->cpu_microseconds) / 1e6 : outcome.cpu_seconds;
    if (WIFEXITED(program_status)) {
      outcome.ending = Ending::kExited;
      outcome.exit_code = WEXITSTATUS(program_status);
    } else {
      outcome.signal = WTERMSIG(program_status);
      // SIGKILL comes at the hard limit, a second past SIGXCPU. The kernel
      // counts RLIMIT_CPU in scheduler ticks and rusage in precise run time;
      // under load the ticks run ahead (seen here: SIGXCPU at 0.63 s of run
      // time for a 1 s limit), hence the margin.
      const bool cpu_limit = outcome.signal == SIGXCPU ||
                             (outcome.signal == SIGKILL && program_cpu >= 0.5 * static_cast<double>(cpu));
      outcome.ending = cpu_limit ? Ending::kCpuLimit : Ending::kSignaled;
    }
  }
  return outcome;
}

}  // namespace

bool Outcome::ok() const { return ending == Ending::kExited && exit_code == 0; }

std::string Outcome::Reason() const {
  switch (ending) {
    case Ending::kExited:
      return "exited with code " + std::to_string(exit_code);
    case Ending::kSignaled:
      return "killed by " + SignalName(signal);
    case Ending::kTimedOut:
      return "timed out after " + Seconds(wall_seconds, "%.1f") + " s of wall time (limit " +
             Seconds(limits.wall_seconds, "%g") + " s)";
    case Ending::kCpuLimit:
      return "used its " + Seconds(std::max(1.0, std::ceil(limits.cpu_seconds)), "%g") + " s of CPU time";
    case Ending::kOutputLimit:
      return "wrote more than " + std::to_string(limits.output_bytes) + " bytes to standard " +
             (output_stream == 2 ? "error" : "output");
    case Ending::kStartFailed:
      return "could not start: " + start_error;
  }
  return "ended";
}

std::vector<std::string> AvailableIsolation() {
  static const std::vector<std::string> isolation = [] {
    Options options;
    options.argv = {"/bin/true"};
    options.folder = "/";  // nothing runs: it is never written
    options.limits.wall_seconds = 30;
    options.allow_unconfined_filesystem = true;  // list what there is even where Run would refuse
    return RunSandbox(options, /*probe=*/true).isolation;
  }();
  return isolation;
}

Outcome Run(const Options& options) { return RunSandbox(options, /*probe=*/false); }

}  // namespace frontier::sandbox
