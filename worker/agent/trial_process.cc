#include "worker/agent/trial_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

extern char** environ;

namespace frontier {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr size_t kStderrTailBytes = size_t{8} * 1024;
constexpr int kStderrTailLines = 8;
constexpr size_t kReadChunk = size_t{64} * 1024;
// How often Wait checks whether the child has exited.
constexpr milliseconds kExitPoll{10};
// Signals a trial starts with at their default disposition, whatever the worker did with them.
constexpr int kDefaultSignals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGPIPE, SIGTERM,
                                   SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM};

// More than kMaxOutputLineNesting brackets open at once outside JSON strings.
bool NestedTooDeep(std::string_view line) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      if (c == '\\') ++i;
      if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if ((c == '[' || c == '{') && ++depth > kMaxOutputLineNesting) {
      return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

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

milliseconds Remaining(Clock::time_point deadline) {
  return std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

class ChildProcess final : public TrialProcess {
 public:
  ChildProcess(pid_t pid, int stdout_fd, int stderr_fd)
      : pid_(pid), stdout_fd_(stdout_fd), stderr_fd_(stderr_fd) {}

  ~ChildProcess() override {
    if (!exit_) {
      kill(-pid_, SIGKILL);
      ReapBlocking();
    }
    CloseFd(&stdout_fd_);
    CloseFd(&stderr_fd_);
  }

  ReadStatus ReadLine(milliseconds timeout, std::string* line) override {
    const Clock::time_point deadline = Clock::now() + timeout;
    for (;;) {
      if (TakeLine(line)) return ReadStatus::kLine;
      if (stdout_fd_ < 0) return ReadStatus::kEnd;
      const milliseconds remaining = Remaining(deadline);
      Pump(remaining);
      if (remaining.count() == 0) {
        if (TakeLine(line)) return ReadStatus::kLine;
        return stdout_fd_ < 0 ? ReadStatus::kEnd : ReadStatus::kTimeout;
      }
    }
  }

  std::optional<ProcessExit> Wait(milliseconds timeout) override {
    const Clock::time_point deadline = Clock::now() + timeout;
    for (;;) {
      if (exit_) return exit_;
      siginfo_t info{};
      // WNOWAIT keeps the exited child a zombie, so its process group id
      // cannot be reused before the group is killed below.
      if (waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) {
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
      if (end > begin) lines.push_back(text.substr(begin, end - begin));
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


  // Waits up to `timeout` for either pipe to be readable and reads what is there.
  void Pump(milliseconds timeout) {
    pollfd fds[2];
    int count = 0;
    for (int fd : {stdout_fd_, stderr_fd_}) {
      if (fd >= 0) fds[count++] = pollfd{fd, POLLIN, 0};
    }
    if (count == 0) {
      std::this_thread::sleep_for(timeout);
      return;
    }
    if (poll(fds, count, static_cast<int>(timeout.count())) <= 0) return;
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
  }

  const pid_t pid_;
  int stdout_fd_;
  int stderr_fd_;
  OutputLines stdout_lines_;
  std::string stderr_tail_;
  std::optional<ProcessExit> exit_;
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

std::vector<char*> NullTerminated(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
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
  if (NestedTooDeep(taken)) {
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

ProcessTrialLauncher::ProcessTrialLauncher(std::string trial_binary)
    : trial_binary_(std::move(trial_binary)) {}

std::unique_ptr<TrialProcess> ProcessTrialLauncher::Start(const TrialCommand& command, std::string* error) {
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

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);

  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attributes, 0);
  sigset_t signals;
  sigemptyset(&signals);
  posix_spawnattr_setsigmask(&attributes, &signals);
  for (int signal : kDefaultSignals) sigaddset(&signals, signal);
  posix_spawnattr_setsigdefault(&attributes, &signals);

  std::vector<std::string> args = command.wrapper;
  if (!command.program.empty()) {
    args.insert(args.end(), command.program.begin(), command.program.end());
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
  if (!command.workdir.empty()) posix_spawn_file_actions_addchdir_np(&actions, command.workdir.c_str());
  const std::string& program = args.front();
  std::vector<std::string> env = ChildEnvironment(command.environment);
  std::vector<char*> argv = NullTerminated(args);
  std::vector<char*> envp = NullTerminated(env);

  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, program.c_str(), &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    *error = "cannot start " + program + ": " + std::strerror(rc);
    return nullptr;
  }
  return std::make_unique<ChildProcess>(pid, out[0], err[0]);
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

}  // namespace frontier
