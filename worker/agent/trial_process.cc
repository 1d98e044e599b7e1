#include "worker/agent/trial_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "search_spaces/input_bounds.h"
#include "worker/host.h"
#include "worker/warm_slot.h"
#include "os/child_process.h"
#include "os/monotonic.h"

extern char** environ;

namespace frontier {
namespace {

using std::chrono::milliseconds;

constexpr size_t kStderrTailBytes = size_t{8} * 1024;
constexpr int kStderrTailLines = 8;
constexpr size_t kReadChunk = size_t{64} * 1024;
// The most reads of each pipe after the child exited (Drain): 4 MiB, more than a pipe holds.
constexpr size_t kMaxDrainReads = 64;
// How often Wait checks whether the child has exited.
constexpr milliseconds kExitPoll{10};

ProcessExit DecodeWaitStatus(int status) {
  ProcessExit exit;
  if (WIFSIGNALED(status)) {
    exit.signaled = true;
    exit.signal = WTERMSIG(status);
  } else {
    exit.exit_code = WEXITSTATUS(status);
  }
  return exit;
}

milliseconds Remaining(Monotonic::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Monotonic::now()));
}

// The cgroup v2 folder whose children may get a memory limit: this process's
// cgroup or its parent, where memory is in cgroup.subtree_control and a child
// folder can be made (a delegated subtree). Empty: none (cgroup v1, no
// delegation, no permission).
std::string DelegatedMemoryCgroup() {
  std::ifstream mountinfo("/proc/self/mountinfo");
  std::string mount;
  for (std::string line; std::getline(mountinfo, line);) {
    const size_t dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line);
    std::string id, parent, device, root;
    fields >> id >> parent >> device >> root >> mount;
    break;
  }
  if (mount.empty()) return "";
  std::ifstream cgroup("/proc/self/cgroup");
  std::string path;
  for (std::string line; std::getline(cgroup, line);) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return "";
  std::string dir = mount + (path == "/" ? "" : path);
  for (int up = 0; up < 2; ++up) {
    std::ifstream control(dir + "/cgroup.subtree_control");
    std::string controllers;
    std::getline(control, controllers);
    if ((" " + controllers + " ").find(" memory ") != std::string::npos && access(dir.c_str(), W_OK) == 0) return dir;
    if (dir.size() <= mount.size()) break;
    dir = dir.substr(0, dir.rfind('/'));
  }
  return "";
}

// A child cgroup with memory.max for one trial; removed when the trial ends.
class TrialCgroup {
 public:
  // Empty path() when the cgroup cannot be made or limited.
  TrialCgroup(const std::string& parent, int64_t limit_bytes) {
    static std::atomic<int> counter{0};
    const std::string dir = parent + "/frontier-trial-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    if (mkdir(dir.c_str(), 0755) != 0) return;
    if (!(std::ofstream(dir + "/memory.max") << limit_bytes << std::flush)) {
      rmdir(dir.c_str());
      return;
    }
    std::ofstream(dir + "/memory.swap.max") << 0 << std::flush;  // where swap is accounted: the limit is real memory
    procs_fd_ = open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (procs_fd_ < 0) {
      rmdir(dir.c_str());
      return;
    }
    path_ = dir;
  }
  // Kills what is left in the cgroup (cgroup.kill, Linux 5.14: a descendant that left the trial's process
  // group too) and removes it once it is empty.
  ~TrialCgroup() {
    if (procs_fd_ >= 0) close(procs_fd_);
    if (path_.empty()) return;
    std::ofstream(path_ + "/cgroup.kill") << 1 << std::flush;
    for (int tries = 0; rmdir(path_.c_str()) != 0 && errno == EBUSY && tries < 100; ++tries) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  const std::string& path() const { return path_; }
  int procs_fd() const { return procs_fd_; }
  // memory.events: oom_kill > 0.
  bool OomKilled() const {
    std::ifstream events(path_ + "/memory.events");
    std::string key;
    int64_t value = 0;
    while (events >> key >> value) {
      if (key == "oom_kill" && value > 0) return true;
    }
    return false;
  }

 private:
  std::string path_;
  int procs_fd_ = -1;
};

// This process's own children (trials, the warm slot's server) by pid. Once it is a child subreaper
// (warm slots), it also gets orphans: a trial's descendants that outlived it (a daemon a wrapper or a
// command trial started). ReapOrphans reaps those and leaves these to their owner's waitpid; a child is
// owned from its fork (under the mutex) until it is reaped.
std::mutex& ChildrenMutex() {
  static std::mutex mutex;
  return mutex;
}
std::set<pid_t>& OwnedChildren() {
  static std::set<pid_t> owned;
  return owned;
}
void Disown(pid_t pid) {
  std::lock_guard<std::mutex> lock(ChildrenMutex());
  OwnedChildren().erase(pid);
}
// Reaps this process's exited children that no ChildProcess owns (/proc/self/task/*/children).
void ReapOrphans() {
  std::lock_guard<std::mutex> lock(ChildrenMutex());
  std::error_code ignored;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ignored)) {
    std::ifstream children(task.path() / "children");
    for (pid_t pid; children >> pid;) {
      if (OwnedChildren().count(pid) == 0) waitpid(pid, nullptr, WNOHANG);
    }
  }
}

class ChildProcess final : public TrialProcess {
 public:
  ChildProcess(pid_t pid, int stdout_fd, int stderr_fd, std::unique_ptr<TrialCgroup> cgroup, std::string limit_kind)
      : pid_(pid),
        stdout_fd_(stdout_fd),
        stderr_fd_(stderr_fd),
        cgroup_(std::move(cgroup)),
        limit_kind_(std::move(limit_kind)) {}

  ~ChildProcess() override {
    if (!exit_) {
      kill(-pid_, SIGKILL);
      ReapBlocking();
    }
    CloseFd(&stdout_fd_);
    CloseFd(&stderr_fd_);
  }

  std::string MemoryLimitKind() const override { return limit_kind_; }
  bool OomKilled() const override { return oom_killed_; }

  ReadStatus ReadLine(milliseconds timeout, std::string* line) override {
    const Monotonic::time_point deadline = Monotonic::now() + timeout;
    for (;;) {
      if (TakeLine(line)) return ReadStatus::kLine;
      if (stdout_fd_ < 0) return ReadStatus::kEnd;
      if (Exited()) {
        // What the child wrote is all in the pipe now. A descendant it left behind (`cmd &`, a logger)
        // may hold the pipe open, and must not make the trial's end wait for it: the end of its output.
        kill(-pid_, SIGKILL);
        Drain();
        CloseFd(&stdout_fd_);
        continue;
      }
      const milliseconds remaining = Remaining(deadline);
      Pump(remaining);
      if (remaining.count() == 0) {
        if (TakeLine(line)) return ReadStatus::kLine;
        return stdout_fd_ < 0 ? ReadStatus::kEnd : ReadStatus::kTimeout;
      }
    }
  }

  std::optional<ProcessExit> Wait(milliseconds timeout) override {
    const Monotonic::time_point deadline = Monotonic::now() + timeout;
    for (;;) {
      if (exit_) return exit_;
      if (Exited()) {  // still a zombie: its process group id cannot be reused before the kill
        kill(-pid_, SIGKILL);
        ReapBlocking();
        Pump(milliseconds(0));
        return exit_;
      }
      const milliseconds remaining = Remaining(deadline);
      if (remaining.count() == 0) return std::nullopt;
      Pump(std::min(remaining, kExitPoll));
    }
  }

  ProcessExit Terminate(milliseconds grace) override {
    if (exit_) return *exit_;
    kill(-pid_, SIGTERM);
    if (std::optional<ProcessExit> exit = Wait(grace)) return *exit;
    kill(-pid_, SIGKILL);
    ReapBlocking();
    return *exit_;
  }

  std::string StderrTail() const override {
    std::string text = stderr_tail_;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    std::vector<std::string> lines;
    size_t end = text.size();
    while (end > 0 && static_cast<int>(lines.size()) < kStderrTailLines) {
      const size_t newline = text.rfind('\n', end - 1);
      const size_t begin = newline == std::string::npos ? 0 : newline + 1;
      // Each line as valid UTF-8 on one line: the tail goes into JSON and protobuf strings, which refuse
      // other bytes, and the 8 KiB cut can start inside a character.
      if (end > begin) lines.push_back(Abbreviated(std::string_view(text).substr(begin, end - begin), end - begin));
      if (newline == std::string::npos) break;
      end = newline;
    }
    std::string joined;
    for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
      if (!joined.empty()) joined += " | ";
      joined += *it;
    }
    return joined;
  }

 private:
  static void CloseFd(int* fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }

  // Moves the next line (see OutputLines::Take) into *line; a line out of
  // bounds ends the trial instead (Refuse).
  bool TakeLine(std::string* line) {
    switch (stdout_lines_.Take(stdout_fd_ < 0, line)) {
      case OutputLines::Next::kNone:
        return false;
      case OutputLines::Next::kLine:
        return true;
      case OutputLines::Next::kOutOfBounds:
        break;
    }
    return Refuse(*line, line);
  }

  // Ends the trial over a line out of bounds: kills it, stops reading its
  // output and puts a failed result line naming the problem in *line.
  bool Refuse(const std::string& problem, std::string* line) {
    kill(-pid_, SIGKILL);
    CloseFd(&stdout_fd_);
    *line = nlohmann::json{{"event", "result"},
                           {"schema", 1},
                           {"status", "failed"},
                           {"error_kind", "output"},
                           {"error", "the worker stopped the trial: " + problem}}
                .dump();
    return true;
  }


  // Whether the child has exited, without reaping it (WNOWAIT: its process group id stays its own).
  bool Exited() const {
    if (exit_) return true;
    siginfo_t info{};
    return waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_;
  }

  // Reads what both pipes hold now, without waiting for more.
  void Drain() {
    for (size_t reads = 0; reads < kMaxDrainReads && Pump(milliseconds(0)); ++reads) {
    }
  }

  // Waits up to `timeout` for either pipe to be readable and reads what is there; false when neither was
  // (or both are closed).
  bool Pump(milliseconds timeout) {
    pollfd fds[2];
    int count = 0;
    for (int fd : {stdout_fd_, stderr_fd_}) {
      if (fd >= 0) fds[count++] = pollfd{fd, POLLIN, 0};
    }
    if (count == 0) {
      std::this_thread::sleep_for(timeout);
      return false;
    }
    if (poll(fds, count, static_cast<int>(timeout.count())) <= 0) return false;
    for (int i = 0; i < count; ++i) {
      if (fds[i].revents == 0) continue;
      if (fds[i].fd == stdout_fd_) {
        std::string data;
        ReadAvailable(&stdout_fd_, &data);
        stdout_lines_.Append(data);
      } else {
        ReadAvailable(&stderr_fd_, &stderr_tail_);
        if (stderr_tail_.size() > kStderrTailBytes) {
          stderr_tail_.erase(0, stderr_tail_.size() - kStderrTailBytes);
        }
      }
    }
    return true;
  }

  // Appends one read's worth of data to *sink; closes *fd at end of file.
  static void ReadAvailable(int* fd, std::string* sink) {
    char buffer[kReadChunk];
    const ssize_t n = read(*fd, buffer, sizeof buffer);
    if (n > 0) {
      sink->append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      CloseFd(fd);
    }
  }

  void ReapBlocking() {
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid_, &status, 0);
    } while (r < 0 && errno == EINTR);
    exit_ = r == pid_ ? DecodeWaitStatus(status) : ProcessExit{true, 0, SIGKILL};
    Disown(pid_);
    if (cgroup_) oom_killed_ = cgroup_->OomKilled();
  }

  const pid_t pid_;
  int stdout_fd_;
  int stderr_fd_;
  OutputLines stdout_lines_;
  std::string stderr_tail_;
  std::optional<ProcessExit> exit_;
  std::unique_ptr<TrialCgroup> cgroup_;  // removed after the child is reaped (members go in reverse order)
  std::string limit_kind_;
  bool oom_killed_ = false;
};

// The worker's environment with `overrides` replacing or adding variables.
std::vector<std::string> ChildEnvironment(const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string variable = *entry;
    const std::string name = variable.substr(0, variable.find('='));
    const bool overridden = std::any_of(overrides.begin(), overrides.end(),
                                        [&](const auto& override) { return override.first == name; });
    if (!overridden) env.push_back(variable);
  }
  for (const auto& [name, value] : overrides) env.push_back(name + "=" + value);
  return env;
}

}  // namespace

OutputLines::Next OutputLines::Take(bool closed, std::string* line) {
  const size_t newline = buffer_.find('\n', begin_);
  const size_t end = newline != std::string::npos ? newline : buffer_.size();
  const auto refuse = [&](const std::string& problem) {
    *line = "line " + std::to_string(lines_ + 1) + " of its output " + problem;
    buffer_.clear();
    begin_ = 0;
    return Next::kOutOfBounds;
  };
  if (end - begin_ > max_line_bytes_) {
    return refuse("is longer than " + std::to_string(max_line_bytes_) + " bytes");
  }
  if (newline == std::string::npos && (!closed || begin_ == buffer_.size())) return Next::kNone;
  const std::string_view taken = std::string_view(buffer_).substr(begin_, end - begin_);
  if (FindNestingFault(taken, kMaxOutputLineNesting, /*json_strings=*/true)) {
    return refuse("is nested deeper than " + std::to_string(kMaxOutputLineNesting) + " levels");
  }
  line->assign(taken);
  ++lines_;
  begin_ = newline != std::string::npos ? newline + 1 : end;
  if (begin_ * 2 > buffer_.size()) {  // drop what was read, seldom enough to stay linear
    buffer_.erase(0, begin_);
    begin_ = 0;
  }
  return Next::kLine;
}

std::string ProcessExit::Describe() const {
  if (!signaled) return "exit code " + std::to_string(exit_code);
  const char* abbreviation = sigabbrev_np(signal);
  const char* description = strsignal(signal);
  return "signal " + (abbreviation ? "SIG" + std::string(abbreviation) : std::to_string(signal)) +
         (description ? " (" + std::string(description) + ")" : "");
}

namespace {

// A reply of the warm slot's server: its "pid", or nullopt with *error.
std::optional<pid_t> WarmPid(const std::optional<std::string>& reply, std::string* error) {
  if (!reply) {
    *error = "the warm slot did not answer";
    return std::nullopt;
  }
  const nlohmann::json j = nlohmann::json::parse(*reply, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("pid") && j["pid"].is_number_integer() && j["pid"].get<int64_t>() > 0) {
    return static_cast<pid_t>(j["pid"].get<int64_t>());
  }
  *error = "the warm slot refused the trial: " + (j.is_object() && j.contains("error") ? j["error"].dump() : *reply);
  return std::nullopt;
}

}  // namespace

// The warm slot's server (warm_slot.h): one `frontier-trial --serve`, started
// on the first trial, its socket, and whether it has failed for good.
class ProcessTrialLauncher::WarmSlot {
 public:
  explicit WarmSlot(ProcessTrialLauncher& cold) : cold_(cold) {}
  ~WarmSlot() {
    if (socket_ >= 0) close(socket_);
  }

  // The child's pid, forked by the server and adopted by this process; nullopt with *error when the
  // slot cannot start it (the caller starts the trial cold).
  std::optional<pid_t> Fork(const WarmTrialRequest& request, const WarmTrialFds& fds, std::string* error) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!Ready(error)) return std::nullopt;
    std::optional<pid_t> pid;
    {
      std::lock_guard<std::mutex> owned(ChildrenMutex());  // owned before ReapOrphans can see it
      if (SendWarmTrialRequest(socket_, request, fds, error)) pid = WarmPid(ReceiveWarmReply(socket_, kReplyMs), error);
      if (pid) OwnedChildren().insert(*pid);
    }
    if (!pid) Stop();  // the next trial starts a new server
    return pid;
  }

 private:
  static constexpr int kReadyMs = 60000;  // loading LibTorch on a slow disk
  // The server reads a dataset before it forks the first trial that names it (KeepIdxFile: at most
  // 4 files of 256 MiB; Fashion-MNIST takes a fraction of a second).
  static constexpr int kReplyMs = 30000;
  static constexpr int kMaxStarts = 3;  // failed starts; then every trial starts cold

  bool Ready(std::string* error) {
    if (server_) return true;
    if (failed_starts_ >= kMaxStarts) {
      *error = "the warm slot failed to start " + std::to_string(kMaxStarts) + " times";
      return false;
    }
    // Orphans of this process's children become its children: a warm slot's trial is the worker's.
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
      failed_starts_ = kMaxStarts;
      *error = std::string("cannot become a child subreaper: ") + std::strerror(errno);
      return false;
    }
    int ends[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
      *error = std::string("cannot create the warm slot's socket: ") + std::strerror(errno);
      return false;
    }
    TrialCommand serve;
    serve.trial_arguments = {"--serve"};
    serve.stdin_fd = ends[1];
    serve.ends_with_stdin = true;  // the server reads its socket; a slot thread that stops early leaves it running
    server_ = cold_.StartCold(serve, error);
    close(ends[1]);
    socket_ = ends[0];
    const std::optional<std::string> reply = server_ ? ReceiveWarmReply(socket_, kReadyMs) : std::nullopt;
    if (!reply || reply->find("\"ready\"") == std::string::npos) {
      if (server_) {
        const ProcessExit exit = server_->Terminate(std::chrono::milliseconds(1000));
        *error = "the warm slot did not start (" + exit.Describe() + ": " + server_->StderrTail() + ")";
      }
      ++failed_starts_;
      Stop();
      return false;
    }
    return true;
  }

  void Stop() {
    if (server_) server_->Terminate(std::chrono::milliseconds(1000));
    server_.reset();
    if (socket_ >= 0) close(socket_);
    socket_ = -1;
  }

  ProcessTrialLauncher& cold_;
  std::mutex mutex_;
  std::unique_ptr<TrialProcess> server_;
  int socket_ = -1;
  int failed_starts_ = 0;  // a server that ran and died later does not count
};

ProcessTrialLauncher::ProcessTrialLauncher(std::string trial_binary, bool warm_slots)
    : trial_binary_(std::move(trial_binary)), warm_(warm_slots ? std::make_unique<WarmSlot>(*this) : nullptr) {}

ProcessTrialLauncher::~ProcessTrialLauncher() = default;

std::unique_ptr<TrialProcess> ProcessTrialLauncher::Start(const TrialCommand& command, std::string* error) {
  // Only frontier-trial's own trials and calibrations run in the warm slot: a wrapper, a program or other
  // flags need an exec.
  if (!warm_ || !command.wrapper.empty() || !command.program.empty() || !command.trial_arguments.empty() ||
      !command.workdir.empty() || command.stdin_fd >= 0 || command.exec) {
    return StartCold(command, error);
  }
  return StartChild(command, /*warm=*/true, error);
}

std::unique_ptr<TrialProcess> ProcessTrialLauncher::StartCold(const TrialCommand& command, std::string* error) {
  return StartChild(command, /*warm=*/false, error);
}

pid_t ProcessTrialLauncher::StartWarm(const TrialCommand& command, const std::string& program, int stdout_fd,
                                      int stderr_fd, int procs_fd, int64_t address_space_bytes, bool* start_cold,
                                      std::string* error) {
  int status[2];  // the child's setup failure, if any; its end of file: set up
  if (pipe2(status, O_CLOEXEC) != 0) {
    *error = std::string("cannot create a pipe: ") + std::strerror(errno);
    return -1;
  }
  ReapOrphans();
  const WarmTrialRequest request{command.spec_path, command.progress_every, command.artifact_dir,
                                 command.environment, command.cpus, address_space_bytes, getpid(),
                                 command.calibration};
  std::string warm_error;
  const std::optional<pid_t> adopted = warm_->Fork(request, {stdout_fd, stderr_fd, status[1], procs_fd}, &warm_error);
  close(status[1]);
  const std::optional<ChildFailure> failure = adopted ? ReadChildFailure(status[0]) : std::nullopt;
  close(status[0]);
  if (!adopted) {
    spdlog::warn("{}; the trial starts cold", warm_error);
    *start_cold = true;
    return -1;
  }
  if (failure) {
    int ignored = 0;
    waitpid(*adopted, &ignored, 0);
    Disown(*adopted);
    *error = "cannot start " + program + ": " + kChildStages[failure->stage] + std::strerror(failure->error);
    return -1;
  }
  return *adopted;
}

std::unique_ptr<TrialProcess> ProcessTrialLauncher::StartChild(const TrialCommand& command, bool warm,
                                                              std::string* error) {
  // O_CLOEXEC: trials started concurrently by other slots must not inherit
  // this trial's pipes, or its end of file would never come.
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    *error = std::string("cannot create a pipe: ") + std::strerror(errno);
    return nullptr;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    *error = std::string("cannot create a pipe: ") + std::strerror(errno);
    close(out[0]);
    close(out[1]);
    return nullptr;
  }

  std::vector<std::string> args = command.wrapper;
  if (!command.program.empty()) {
    args.insert(args.end(), command.program.begin(), command.program.end());
  } else if (!command.trial_arguments.empty()) {
    args.push_back(trial_binary_);
    args.insert(args.end(), command.trial_arguments.begin(), command.trial_arguments.end());
  } else if (const std::optional<CalibrationRequest>& c = command.calibration) {
    std::string dtypes;
    for (const std::string& dtype : c->dtypes) dtypes += (dtypes.empty() ? "" : ",") + dtype;
    args = {trial_binary_, "--calibrate", "--device", c->device, "--dtypes", dtypes};
    if (c->threads > 0) {
      args.push_back("--threads");
      args.push_back(std::to_string(c->threads));
    }
  } else {
    for (std::string arg : {trial_binary_, std::string("--spec"), command.spec_path,
                            std::string("--progress-every"), std::to_string(command.progress_every)}) {
      args.push_back(std::move(arg));
    }
    if (!command.artifact_dir.empty()) {
      args.push_back("--artifact-dir");
      args.push_back(command.artifact_dir);
    }
  }
  const std::vector<std::string> env = ChildEnvironment(command.environment);

  // What the child's setup points at, made before fork.
  const cpu_set_t cpus = CpuSetOf(command.cpus);
  std::unique_ptr<TrialCgroup> cgroup;
  std::string limit_kind;
  const int64_t bytes = command.memory_limit_mb * 1024 * 1024;
  const rlimit address_space = AddressSpaceLimit(bytes);
  if (command.memory_limit_mb > 0) {
    static const std::string delegated = DelegatedMemoryCgroup();
    if (!delegated.empty()) {
      cgroup = std::make_unique<TrialCgroup>(delegated, bytes);
      if (cgroup->path().empty()) cgroup.reset();
    }
    limit_kind = cgroup ? "cgroup memory.max" : command.address_space_limit ? "RLIMIT_AS" : "";
  }
  const int procs_fd = cgroup ? cgroup->procs_fd() : -1;
  const bool set_rlimit = command.memory_limit_mb > 0 && !cgroup && command.address_space_limit;
  pid_t pid = -1;
  if (warm) {
    bool start_cold = false;
    pid = StartWarm(command, args.front(), out[1], err[1], procs_fd, set_rlimit ? bytes : 0, &start_cold, error);
    if (start_cold) {
      // A server that failed after it forked may have started the trial on these pipes and cgroup: the
      // cold start gets new ones, and such a stray child dies at its first write (SIGPIPE).
      for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
      cgroup.reset();
      return StartChild(command, /*warm=*/false, error);
    }
  } else {
    ChildSetup setup;
    setup.stdin_fd = command.stdin_fd;
    setup.stdout_fd = out[1];
    setup.stderr_fd = err[1];
    setup.cgroup_procs_fd = procs_fd;
    setup.cpus = command.cpus.empty() ? nullptr : &cpus;
    setup.address_space = set_rlimit ? &address_space : nullptr;
    setup.workdir = command.workdir.empty() ? nullptr : command.workdir.c_str();
    setup.parent_death_signal = command.ends_with_stdin ? 0 : SIGKILL;
    std::unique_lock<std::mutex> owned(ChildrenMutex());  // owned before ReapOrphans can see it
    pid_t forked = -1;
    pid = SpawnChild(args, &env, setup, error, [&](pid_t child) {
      forked = child;
      OwnedChildren().insert(child);
      owned.unlock();
    });
    if (owned.owns_lock()) owned.unlock();
    if (pid < 0 && forked > 0) Disown(forked);  // SpawnChild reaped it
  }
  close(out[1]);
  close(err[1]);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    return nullptr;
  }
  return std::make_unique<ChildProcess>(pid, out[0], err[0], std::move(cgroup), limit_kind);
}

std::string DefaultTrialBinary() {
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string path(exe, static_cast<size_t>(n));
    std::string candidate = path.substr(0, path.rfind('/') + 1) + "frontier-trial";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "frontier-trial";
}

std::string CpuMemoryLibraryBeside(const std::string& trial_binary) {
  const std::string found = FindOnPath(trial_binary);
  if (found.empty()) return "";
  const std::filesystem::path dir = std::filesystem::path(found).parent_path();
  for (const std::filesystem::path& candidate :
       {dir / "libfrontier_cpu_memory.so", dir / ".." / "lib" / "frontier" / "libfrontier_cpu_memory.so"}) {
    if (access(candidate.c_str(), R_OK) == 0)
      return std::filesystem::absolute(candidate).lexically_normal().string();
  }
  return "";
}

}  // namespace frontier
