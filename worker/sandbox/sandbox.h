// Running one untrusted program in a sandboxed child process: the kernel
// lab's compiler and candidate runs (docs/sandbox.md). Torch-free and
// gRPC-free; Linux only.
//
// The program gets its own network namespace (no network) or, where
// namespaces are refused, Landlock TCP rules and a seccomp filter; Landlock
// (or a read-only mount namespace) lets it write only in its folder; a pid
// namespace (or a subreaper) ends everything it started when it ends; and
// rlimits plus a wall clock bound what it uses. Outcome::isolation says what
// was applied on this run.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace frontier::sandbox {

// What one run may use. Each process of the sandbox has the rlimits; the wall
// time and output bounds are for the sandbox as a whole.
struct Limits {
  double cpu_seconds =
      120;  // RLIMIT_CPU of the child (and each process it starts), rounded up to whole seconds
  double wall_seconds = 300;                // then the whole sandbox is killed (kTimedOut)
  int64_t memory_bytes = int64_t{4} << 30;  // RLIMIT_AS (address space, not resident memory) of each process
  // Standard output and standard error are each captured up to this many
  // bytes; a program that writes more is killed (kOutputLimit).
  int64_t output_bytes = int64_t{1} << 20;
  int64_t file_bytes = int64_t{512} << 20;  // RLIMIT_FSIZE: the largest file it may write (SIGXFSZ past it)
  int open_files = 256;                     // RLIMIT_NOFILE
};

struct Options {
  // The program and its arguments; argv[0] is an absolute path (there is no
  // PATH lookup). argv[0] itself is always readable and executable.
  std::vector<std::string> argv;
  // The private writable folder: it must exist. The child's working
  // directory, HOME and TMPDIR. (Where a mount namespace applies it also
  // writes its own /dev/shm, a 64 MiB tmpfs gone with the sandbox.)
  std::string folder;
  // Extra paths (files or folders) it may read and execute, besides the
  // system paths /usr /lib /lib64 /etc /bin /sbin /opt /proc /sys /dev/null
  // /dev/zero /dev/random /dev/urandom. Each must exist. Where Landlock
  // exists, every other path is unreadable.
  std::vector<std::string> read_only;
  // The child's whole environment besides PATH=/usr/bin:/bin, HOME and TMPDIR
  // (which entries here may replace): nothing of the caller's is inherited.
  std::vector<std::pair<std::string, std::string>> environment;
  std::string stdin_text;  // written to its standard input, which is then closed
  Limits limits;

  // Where the filesystem can be confined neither by Landlock nor by a
  // read-only mount namespace (which needs root), Run refuses to start
  // (kStartFailed) unless this is set; the program may then write anywhere
  // its user may.
  bool allow_unconfined_filesystem = false;
  // The mechanisms Run tries, all by default; turned off only to test the
  // fallbacks (as on a host that refuses them). use_namespaces: network, pid
  // and mount namespaces; use_landlock: Landlock.
  bool use_namespaces = true;
  bool use_landlock = true;
  // A socket of any family but AF_UNIX kills the program (SIGSYS) instead of
  // failing with EACCES: the caller learns that it tried the network (the
  // kernel lab's candidates). UNIX sockets and connect() still fail with
  // EACCES (glibc asks nscd's socket on its own).
  bool kill_on_network = false;
  // Keeps the program one process: making a process (fork, vfork, a clone
  // without CLONE_THREAD) or leaving its process group (setsid, setpgid)
  // fails with EPERM; threads are allowed. A caller that stops the program
  // (program.h) needs it: nothing the program started runs on while it is
  // stopped.
  bool single_process = false;
  // Called on Run's thread once the sandbox's processes exist, with their
  // process group (Program::Find, program.h), before the program has run.
  std::function<void(int process_group)> on_start;
};

enum class Ending {
  kExited,       // it exited by itself: exit_code
  kSignaled,     // a signal ended it: signal
  kTimedOut,     // it ran past limits.wall_seconds and was killed
  kCpuLimit,     // it used its limits.cpu_seconds (SIGXCPU, or SIGKILL at the hard limit)
  kOutputLimit,  // it wrote more than limits.output_bytes to one stream and was killed
  kStartFailed,  // the sandbox could not be set up or the program not executed: start_error
};

struct Outcome {
  Ending ending = Ending::kStartFailed;
  int exit_code = 0;  // kExited
  int signal = 0;     // kSignaled, kCpuLimit: the signal that ended it
  // Captured output, each at most limits.output_bytes long.
  std::string stdout_text;
  std::string stderr_text;
  double wall_seconds = 0;
  double cpu_seconds = 0;  // user + system time of the child and every process it started
  // What was applied, e.g. "network namespace", "pid namespace", "landlock
  // filesystem (abi 7)", "landlock tcp (abi 7)", "seccomp: socket families
  // other than AF_UNIX refused", "rlimits". Empty when nothing started.
  std::vector<std::string> isolation;
  Limits limits;          // the limits it ran under
  int output_stream = 0;  // kOutputLimit: 1 standard output, 2 standard error
  std::string
      start_error;  // kStartFailed: what could not be done, e.g. "executing /x: No such file or directory"

  // Exited with code 0.
  bool ok() const;
  // For people, one line: "exited with code 3", "killed by SIGSEGV
  // (Segmentation fault)", "timed out after 5.0 s of wall time (limit 5 s)",
  // "used its 2 s of CPU time", "wrote more than 1048576 bytes to standard
  // output", "could not start: ...".
  std::string Reason() const;
};

// What the sandbox applies on this host: the isolation of a run of nothing
// with the default Options, probed once (on the first call) and then kept.
std::vector<std::string> AvailableIsolation();

// Runs options.argv in the sandbox and returns how it ended. Never throws for
// anything the child does; blocks until the child and every process it
// started are gone. Thread-safe: several runs may go on at once. The calling
// thread blocks SIGPIPE while it runs (restored before returning).
Outcome Run(const Options& options);

}  // namespace frontier::sandbox
