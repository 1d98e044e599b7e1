// Running frontier-trial as a child process: the seam between the worker
// agent and the operating system. The agent talks to TrialLauncher and
// TrialProcess only, so its tests can swap in fake trial binaries (or a fake
// launcher) and need no LibTorch.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "worker/warm_slot.h"

namespace frontier {

// What to run: `[wrapper...] <trial binary> --spec <spec_path> --progress-every
// <progress_every> [--artifact-dir <artifact_dir>]`, or for a command trial
// (docs/trial-protocol.md) `[wrapper...] <program...>` in `workdir`.
struct TrialCommand {
  std::string spec_path;    // trial spec file (docs/trial-spec.md)
  int progress_every = 10;  // a progress event every this many steps; 0: none
  // Variables set in the child's environment on top of the worker's own
  // (e.g. CUDA_VISIBLE_DEVICES for the slot's GPU).
  std::vector<std::pair<std::string, std::string>> environment;
  std::string artifact_dir;  // frontier-trial --artifact-dir; empty: the trial's default
  // A program the trial runs under, with its arguments, e.g. {"/usr/bin/nsys",
  // "profile", "-o", "..."}; empty: the trial binary runs directly. The
  // wrapper must run the command that follows its own arguments.
  std::vector<std::string> wrapper;
  // A command trial's argv, run as given instead of the trial binary and its
  // flags (the spec reaches it through FRONTIER_TRIAL_SPEC); empty: frontier-trial.
  std::vector<std::string> program;
  std::string workdir;  // the child's working directory; empty: the worker's
  // frontier-trial's arguments instead of `--spec ...` (e.g. {"--serve"});
  // empty: a trial as above.
  std::vector<std::string> trial_arguments;
  // The CPUs the child runs on, set in the child before exec
  // (sched_setaffinity); empty: the worker's own.
  std::vector<int> cpus;
  // A memory limit on the child in MiB (0: none): cgroup v2 memory.max in a
  // cgroup of its own where the worker's cgroup (or its parent) delegates
  // the memory controller, else RLIMIT_AS set in the child before exec.
  int64_t memory_limit_mb = 0;
  // Whether RLIMIT_AS stands in where no cgroup can be made: not for CUDA
  // trials, whose runtime reserves far more address space than memory.
  bool address_space_limit = true;
  // The child's standard input (a descriptor the worker keeps); -1: /dev/null.
  // Only a cold start (the warm slot's own server gets its socket so).
  int stdin_fd = -1;
  // The child ends at its standard input's end of file, not when the thread
  // that started it exits (no PR_SET_PDEATHSIG): the warm slot's server, which
  // serves every slot for the worker's life (docs/worker.md#warm-slots).
  bool ends_with_stdin = false;
  // Start with exec even from a launcher with warm slots: a data-parallel
  // trial's ranks (their FRONTIER_RANK... in /proc/PID/environ, where tools
  // and e2e.ranks_run find a rank; a warm child's environment is set after fork).
  bool exec = false;
  // A peak calibration instead of a trial (`--calibrate ...`), which a warm
  // slot runs too; nullopt: a trial as above.
  std::optional<CalibrationRequest> calibration;
};

// How a child process ended.
struct ProcessExit {
  bool signaled = false;  // true: killed by `signal`; false: exited with `exit_code`
  int exit_code = 0;
  int signal = 0;

  // For people: "exit code 2" or "signal SIGSEGV (Segmentation fault)".
  std::string Describe() const;
};

// The bounds on one line of a trial's standard output (docs/hardening.md): a
// longer line, or one nested deeper, ends the trial (see ReadLine).
inline constexpr size_t kMaxOutputLineBytes = size_t{1} << 20;
inline constexpr int kMaxOutputLineNesting = 64;

// The lines of a child's standard output, within the bounds: what ReadLine
// reads through. Data goes in as it arrives; complete lines come out.
class OutputLines {
 public:
  enum class Next {
    kNone,         // no complete line yet
    kLine,         // *line holds the next line, without its newline
    kOutOfBounds,  // *line holds the problem, e.g. "line 3 of its output is longer than 1048576 bytes"
  };

  explicit OutputLines(size_t max_line_bytes = kMaxOutputLineBytes) : max_line_bytes_(max_line_bytes) {}

  void Append(std::string_view data) { buffer_.append(data.data(), data.size()); }
  // The next line; with `closed` (no more data comes) the unterminated rest
  // is a line too. After kOutOfBounds the buffer is empty.
  Next Take(bool closed, std::string* line);

 private:
  const size_t max_line_bytes_;
  std::string buffer_;
  size_t begin_ = 0;  // where the next line starts in buffer_
  int lines_ = 0;     // lines taken so far
};

// One running frontier-trial. Not thread-safe: one thread supervises it.
// The destructor kills the process (its whole process group) if it has not
// been reaped yet, so a TrialProcess never leaks a child.
class TrialProcess {
 public:
  enum class ReadStatus {
    kLine,     // *line holds the next line of standard output, without its newline
    kTimeout,  // no complete line within the timeout
    kEnd,      // standard output is closed and every line has been read
  };

  virtual ~TrialProcess() = default;

  // Waits up to `timeout` for the next line of the child's standard output.
  // Standard error is collected meanwhile (see StderrTail). A line longer
  // than kMaxOutputLineBytes or nested deeper than kMaxOutputLineNesting
  // (brackets outside JSON strings) kills the child and stops the reading: that
  // line reads as a failed result, {"event": "result", "status": "failed",
  // "error_kind": "output", "error": "the worker stopped the trial: line N of
  // its output is longer than ..."}, and the next read is kEnd.
  virtual ReadStatus ReadLine(std::chrono::milliseconds timeout, std::string* line) = 0;

  // Waits up to `timeout` for the child to exit and reaps it; nullopt if it
  // is still running. Anything left in the child's process group is killed.
  virtual std::optional<ProcessExit> Wait(std::chrono::milliseconds timeout) = 0;

  // Sends SIGTERM to the child's process group, waits up to `grace` for the
  // child to exit, then sends SIGKILL to the group; reaps the child.
  virtual ProcessExit Terminate(std::chrono::milliseconds grace) = 0;

  // The last lines the child wrote to standard error (at most a few KiB),
  // joined with " | ".
  virtual std::string StderrTail() const = 0;

  // How TrialCommand::memory_limit_mb was applied: "cgroup memory.max" or
  // "RLIMIT_AS"; empty without a limit.
  virtual std::string MemoryLimitKind() const { return ""; }
  // After the child ended: the kernel's OOM killer killed a process of the
  // trial's cgroup (memory.events oom_kill). Always false under RLIMIT_AS.
  virtual bool OomKilled() const { return false; }
};

// Starts trial processes. Thread-safe: every slot of the agent starts its
// trials through the same launcher.
class TrialLauncher {
 public:
  virtual ~TrialLauncher() = default;

  // Starts `command`; on failure returns nullptr and sets *error.
  virtual std::unique_ptr<TrialProcess> Start(const TrialCommand& command, std::string* error) = 0;
};

// Runs the real binary with fork and exec: standard output and error are
// pipes to the worker, standard input is /dev/null, the child leads its own
// process group (so a kill reaches everything it started) and starts with no
// blocked signals and default signal dispositions, on the command's CPUs and
// under its memory limit (SetUpChild, os/child_process.h).
//
// With `warm_slots`, frontier-trial's own trials (no wrapper, program or
// other flags) start in a warm slot instead (docs/worker.md#warm-slots): one
// `frontier-trial --serve`, started on the first such trial, forks each of
// them from a process that loaded LibTorch once; the child is set up the same
// way and adopted by this process (a child subreaper), so the TrialProcess is
// the same. A slot that does not start or answer (a fake trial binary, a
// crashed server) is logged and the trial starts cold; after 3 failed server
// starts every trial does.
class ProcessTrialLauncher final : public TrialLauncher {
 public:
  // `trial_binary` is a path, or a bare name looked up in PATH.
  explicit ProcessTrialLauncher(std::string trial_binary, bool warm_slots = false);
  ~ProcessTrialLauncher() override;

  std::unique_ptr<TrialProcess> Start(const TrialCommand& command, std::string* error) override;

 private:
  class WarmSlot;
  std::unique_ptr<TrialProcess> StartCold(const TrialCommand& command, std::string* error);
  std::unique_ptr<TrialProcess> StartChild(const TrialCommand& command, bool warm, std::string* error);
  // A warm slot's child on the given descriptors: its pid once adopted and set up; -1 with *start_cold
  // when the warm slot could not start it (the caller starts it cold), else -1 with *error.
  pid_t StartWarm(const TrialCommand& command, const std::string& program, int stdout_fd, int stderr_fd,
                  int procs_fd, int64_t address_space_bytes, bool* start_cold, std::string* error);

  const std::string trial_binary_;
  const std::unique_ptr<WarmSlot> warm_;
};

// frontier-trial next to the running executable (/proc/self/exe) when it is
// there, else the bare name "frontier-trial" for a PATH lookup.
std::string DefaultTrialBinary();

// libfrontier_cpu_memory.so (the counting CPU allocator with a C interface,
// worker/trial/measure/cpu_memory_c.cc) beside `trial_binary` (a path or a
// name on PATH), as a build tree has it, or in ../lib/frontier/ from it, as an
// install does; empty when neither exists.
std::string CpuMemoryLibraryBeside(const std::string& trial_binary);

}  // namespace frontier
