// The warm slot (docs/worker.md#warm-slots): a `frontier-trial --serve`
// process that has loaded LibTorch once and forks a fresh child for each
// trial, so a short trial does not pay for exec, the dynamic loader and
// LibTorch's start-up. What both sides of it share lives here: the request
// the worker sends over a Unix socket (with the child's standard output,
// standard error and status pipe, and its cgroup, as file descriptors), and
// the setup of a trial's child between fork and its work, which an exec'd
// trial and a warm slot's child go through alike. Plain C++ and POSIX.
//
// A warm slot's child is a child of the worker, not of the server: the
// server forks an intermediate process that forks the child and exits, and
// the worker, a child subreaper (PR_SET_CHILD_SUBREAPER), adopts it. The
// worker then supervises it exactly as an exec'd trial: its own process
// group, waitpid, kill, its memory cgroup; a crash ends that child only.
#pragma once

#include <sched.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "os/child_process.h"

namespace frontier {

// A peak calibration: what `frontier-trial --calibrate --device D --dtypes
// LIST [--threads N]` measures, exec'd or in a warm slot instead of a trial
// (docs/worker.md#calibrated-peaks).
struct CalibrationRequest {
  std::string device = "cpu";                       // cpu | cuda (CUDA device 0 of what is visible)
  int threads = 0;                                  // CPU intra-op threads; 0: every usable core
  std::vector<std::string> dtypes{"fp32", "bf16"};  // frontier-trial --calibrate's default
};

// What the worker asks a warm slot to run: frontier-trial's flags and the
// child's environment, CPUs and memory limit.
struct WarmTrialRequest {
  std::string spec_path;
  int progress_every = 10;
  std::string artifact_dir;  // empty: frontier-trial's default
  std::vector<std::pair<std::string, std::string>> environment;  // set in the child
  std::vector<int> cpus;                                         // empty: the server's
  int64_t address_space_bytes = 0;                               // RLIMIT_AS; 0: none
  pid_t reaper = 0;  // the worker: the child waits until it is the worker's, then runs
  std::optional<CalibrationRequest> calibration;  // set: the child calibrates instead of running spec_path
};

// The descriptors that travel with a request: the child's standard output and
// error, the write end of its status pipe (closed once it is set up; a
// ChildFailure written there when it cannot be), and its cgroup's
// cgroup.procs (-1: none).
struct WarmTrialFds {
  int stdout_fd = -1;
  int stderr_fd = -1;
  int status_fd = -1;
  int cgroup_procs_fd = -1;
};

// The setup of a trial's child between fork and its work (ChildSetup,
// SetUpChild, FailChild) is os/child_process.h's, for an exec'd trial and a
// warm slot's child alike.

// The worker's side: sends `request` with `fds` over `socket` (a
// SOCK_SEQPACKET socket). false with *error on failure.
bool SendWarmTrialRequest(int socket, const WarmTrialRequest& request, const WarmTrialFds& fds, std::string* error);

// The server's side: receives the next request. false at end of file (the
// worker closed its socket) or on a malformed message (*error says which;
// every descriptor that came with it is closed).
bool ReceiveWarmTrialRequest(int socket, WarmTrialRequest* request, WarmTrialFds* fds, std::string* error);

// The server's answer to one request, and the line it sends first when it is
// ready: {"ready": 1} / {"pid": N} / {"error": "..."}, one message each.
bool SendWarmReply(int socket, const std::string& json_text);
// Waits up to `timeout_ms` for a reply; nullopt on timeout, end of file or error.
std::optional<std::string> ReceiveWarmReply(int socket, int timeout_ms);

}  // namespace frontier
