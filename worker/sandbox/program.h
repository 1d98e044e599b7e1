// A sandboxed program seen from its caller, on another thread while
// sandbox::Run waits for it: found by the sandbox's process group
// (Options::on_start), stopped and continued, its memory read and written
// while it is stopped. The kernel lab's judge clocks a runner's calls so
// (docs/kernel-lab.md#the-judges-clock). Linux only; torch-free.
#pragma once

#include <cstddef>
#include <cstdint>

namespace frontier::sandbox {

class Program {
 public:
  // The program of the sandbox whose processes are in `process_group`: the
  // group's one process that started no other of it (the supervisor starts
  // the pid namespace's init, which starts the program). Call it once the
  // program has run (it answered); with Options::single_process it cannot
  // have started a process of its own or left the group. Throws
  // std::runtime_error when the group has no such single process.
  static Program Find(int process_group);

  int pid() const { return pid_; }
  // SIGSTOP, then waits until every thread of it is stopped (or it is gone);
  // throws std::runtime_error when that takes longer than `timeout_seconds`.
  void Stop(double timeout_seconds) const;
  void Continue() const;  // SIGCONT
  // Its minor page faults so far (/proc/PID/stat, all its threads); -1 when it is gone.
  int64_t MinorFaults() const;
  // Its memory (process_vm_readv / process_vm_writev), meant for while it is
  // stopped. Throws std::runtime_error naming the address when the kernel
  // refuses: an address it does not map, a program that made itself
  // undumpable for a caller without CAP_SYS_PTRACE.
  void Read(uint64_t address, void* into, size_t bytes) const;
  void Write(uint64_t address, const void* from, size_t bytes) const;

 private:
  explicit Program(int pid) : pid_(pid) {}
  int pid_ = 0;
};

}  // namespace frontier::sandbox
