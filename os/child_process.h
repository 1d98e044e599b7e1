// Starting a program as a child process: one launcher for the server and the
// worker (docs/architecture.md). The child is set up between fork and exec
// by ChildSetup (its own process group, a signal when its parent dies,
// default signal dispositions, its standard streams, its cgroup, CPUs,
// address-space limit and working folder), and a setup or exec failure comes
// back to the parent through a close-on-exec status pipe, so that the caller
// gets "cannot start PROGRAM: <stage><reason>" instead of a child that
// printed something and exited 127. The warm slot's server (worker/
// warm_slot.h) sets up the children it forks with the same ChildSetup.
#pragma once

#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace frontier {

// What a child that cannot be set up writes to its status pipe.
struct ChildFailure {
  int stage = 0;  // index into kChildStages
  int error = 0;  // errno
};
inline constexpr const char* kChildStages[] = {"",
                                               "joining its memory cgroup: ",
                                               "pinning it to its CPUs: ",
                                               "setting its memory limit (RLIMIT_AS): ",
                                               "entering its working directory: ",
                                               "being adopted by the worker: "};
inline constexpr int kAdoptionStage = 5;

// The setup of a child after fork: its own process group, the signal it gets
// when the thread that forked it exits, its parent checked against `parent`
// (it died in between), default signal dispositions and an empty mask,
// standard input /dev/null (or the given one), standard output and error the
// given descriptors, its cgroup joined, its CPUs, its address-space limit,
// its working folder.
struct ChildSetup {
  pid_t parent = 0;
  int stdin_fd = -1;   // -1: /dev/null
  int stdout_fd = -1;  // -1: the parent's
  int stderr_fd = -1;  // -1: the parent's
  int cgroup_procs_fd = -1;               // the cgroup's cgroup.procs to join; -1: none
  const cpu_set_t* cpus = nullptr;        // nullptr: the parent's CPUs
  const rlimit* address_space = nullptr;  // nullptr: no limit
  const char* workdir = nullptr;          // nullptr: the parent's
  // PR_SET_PDEATHSIG: a trial gets SIGKILL (it never outlives its worker), a
  // local worker SIGTERM (it drains). 0: none (the warm slot's server, which
  // ends at its socket's end of file instead, so that it outlives the slot
  // thread that started it).
  int parent_death_signal = SIGKILL;
};

// Applies `setup` in the child, with async-signal-safe calls only. Returns
// nullopt when done, else the failure (errno as it was).
std::optional<ChildFailure> SetUpChild(const ChildSetup& setup);
// A child that cannot be set up: writes `failure` to its status pipe and exits 127.
[[noreturn]] void FailChild(int status_fd, ChildFailure failure);
// The parent's side of the status pipe (its write end closed): the failure a
// child wrote, or nullopt at end of file (the child ran exec, or went on).
std::optional<ChildFailure> ReadChildFailure(int status_fd);
// What ChildSetup points at, made before fork: the CPU set of `cpus` and an
// address-space limit of `bytes` (both soft and hard).
cpu_set_t CpuSetOf(const std::vector<int>& cpus);
rlimit AddressSpaceLimit(int64_t bytes);

// Starts `argv` (argv[0] looked up on PATH) as a child set up by `setup`
// (its `parent` is set to this process), with `environment` as its whole
// environment (nullptr: this process's), and waits until it ran exec.
// Returns its pid, or -1 with *error = "cannot start ARGV0: <stage><reason>"
// when fork, the setup or exec failed; such a child has been reaped.
// `forked`, when given, is called in the parent right after fork with the
// child's pid (before the wait for exec): how a caller records the child
// before anyone else could reap it.
pid_t SpawnChild(const std::vector<std::string>& argv, const std::vector<std::string>* environment,
                 const ChildSetup& setup, std::string* error, const std::function<void(pid_t)>& forked = {});

}  // namespace frontier
