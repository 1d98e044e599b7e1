// The sandbox's processes below the caller (internal to worker/sandbox):
//
//   caller --fork--> supervisor --fork--> init (pid 1) --fork--> program
//                    (outside the           (our code:     (setup, then
//                    namespaces)            reaps, reports) exec)
//
// The supervisor leads its own process group, dies with the caller
// (PR_SET_PDEATHSIG) and enters new network, mount and pid namespaces
// (unshare: its children are in them). Its first child is pid 1 of the pid
// namespace: it mounts the namespace's own /proc (and, without Landlock, makes
// every mount read-only but the folder), forks the program and reaps until the
// program ends; then it reports the program's wait status and exits, and the
// kernel kills whatever else is left in the namespace. The program is not pid
// 1, so signals reach it as on any host (pid 1 ignores the signals it has no
// handler for, its own included). Without a pid namespace the program is the
// supervisor's child and the supervisor, a subreaper, kills and reaps every
// descendant once the program has ended.
//
// A kill request (a byte on, or the closing of, the control pipe) makes the
// supervisor SIGKILL its child: the namespace's init, or the program. The
// program's exec failure or its setup's failure, what was applied, and the
// wait status all travel to the caller as Messages on the report pipe, which
// is close-on-exec.
#pragma once

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "worker/sandbox/confine.h"

namespace frontier::sandbox::internal {

// One report from a child (each one write(), far below PIPE_BUF: atomic).
struct Message {
  enum Kind : int32_t { kFailed = 1, kApplied = 2, kEnded = 3 };
  int32_t kind = 0;
  int32_t stage = 0;             // kFailed: a Stage
  int32_t error = 0;             // kFailed: errno (0: see the stage)
  uint32_t applied = 0;          // kApplied: Applied bits
  int32_t abi = 0;               // kApplied: the Landlock ABI used
  int32_t status = 0;            // kEnded: the program's wait status
  int64_t cpu_microseconds = 0;  // kEnded: the program's user + system time with its reaped children
};

enum Stage : int32_t {
  kStageFork = 1,
  kStageMounts,
  kStageReadOnlyMounts,
  kStageUnconfinedFilesystem,
  kStageUnconfinedNetwork,
  kStageStandardStreams,
  kStageFolder,
  kStageNoNewPrivileges,
  kStageLandlock,
  kStageCapabilities,
  kStageSeccomp,
  kStageRlimits,
  kStageExec,
};

// For people: "entering its folder", "executing the program", ...
const char* StageText(int stage);

// Everything the children need, prepared by the caller before fork (the
// children may not allocate).
struct Plan {
  pid_t caller = 0;
  int stdin_fd = -1;  // the pipes' child ends
  int stdout_fd = -1;
  int stderr_fd = -1;
  int report_fd = -1;
  int control_fd = -1;
  bool namespaces = true;
  int landlock_abi = 0;  // 0: no Landlock (unavailable or not to be used)
  bool allow_unconfined_filesystem = false;
  bool probe = false;  // report what was applied, then exit 0 instead of exec
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* folder = nullptr;
  const LandlockPath* paths = nullptr;
  size_t path_count = 0;
  const char* const* mount_points = nullptr;  // for the read-only fallback
  size_t mount_count = 0;
  const sock_filter* seccomp = nullptr;
  size_t seccomp_count = 0;
  rlimit cpu{}, address_space{}, file_size{}, open_files{};
};

// The supervisor, run in the caller's child right after fork. Never returns.
[[noreturn]] void Supervise(const Plan& plan);

}  // namespace frontier::sandbox::internal
