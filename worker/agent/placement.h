// Where a worker's trials run on the host: the CPU sets of its slots
// (frontier-worker --cpus), the host-wide lock that keeps calibrations off
// a busy host, and the per-CPU claims that tell a trial whether another
// trial on this host shared its cores (docs/worker.md, Timing isolation).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace frontier {

// "0-3,6,8-9" into {0,1,2,3,6,8,9} (sorted, no duplicates); throws
// std::invalid_argument naming the bad part.
std::vector<int> ParseCpuList(const std::string& text);
// The inverse: {0,1,2,3,6} -> "0-3,6".
std::string FormatCpuList(const std::vector<int>& cpus);

struct SlotCpus {
  std::vector<std::vector<int>> slots;  // slot i runs on slots[i]
  bool shared = false;                  // fewer CPUs than slots: slots share cores
  std::vector<int> unused;              // CPUs left over by an uneven split
};
// `cpus` split into `slots` disjoint runs of equal size in order; with fewer
// CPUs than slots, slot i gets cpus[i % n] and `shared` is set.
SlotCpus SplitCpus(const std::vector<int>& cpus, int slots);

// A host-wide lock with two files, FILE and FILE.turn (flock). A calibration
// holds it exclusively: it waits until no trial runs on the host and keeps
// new trials from starting meanwhile. A trial holds it shared while it runs.
// An empty path, or a file that cannot be opened, locks nothing.
class HostLock {
 public:
  class Hold {
   public:
    virtual ~Hold() = default;
  };
  explicit HostLock(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // Waits until the lock is held; nullptr when `give_up` (asked every 50 ms)
  // says so first. `waiting` is called when the lock is not free at once.
  // An exclusive waiter is woken the moment the turnstile is free, ahead of
  // trials, which poll.
  std::unique_ptr<Hold> Exclusive(const std::function<bool()>& give_up, const std::function<void()>& waiting);
  std::unique_ptr<Hold> Shared(const std::function<bool()>& give_up);

 private:
  std::string path_;
};

// One trial's claim on its CPUs: lock files FILE.cpuN next to the host lock,
// one per CPU, held exclusively while the trial runs. A claim that finds a
// CPU already claimed marks the CPU's file (its mtime), so both the trial
// that came second (at once) and the one that came first (at its end) learn
// that they shared a core.
class CpuClaim {
 public:
  // Claims FILE<kind>N for each N of `devices` (kind ".cpu": cores, ".gpu": GPUs).
  CpuClaim(const std::string& host_lock_path, const std::vector<int>& devices, const std::string& kind = ".cpu");
  ~CpuClaim();
  CpuClaim(const CpuClaim&) = delete;
  CpuClaim& operator=(const CpuClaim&) = delete;
  // True when another trial on this host claimed one of these CPUs during this claim.
  bool Shared() const;

 private:
  struct File {
    int fd = -1;
    bool held = false;
  };
  std::vector<File> files_;
  bool contended_at_start_ = false;
};

}  // namespace frontier
