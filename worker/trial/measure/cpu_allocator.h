#pragma once

// Counts the bytes LibTorch's CPU allocator holds, so that a CPU trial's peak
// memory is the peak of its tensors' memory, as CUDA's max-allocated is on a
// GPU (MemoryTracker), and the op benchmark's peak_mb the peak of one call's.
// libfrontier_cpu_memory.so gives the same counter to the Python SDK
// (cpu_memory_c.cc). The resident set's high-water mark, used before, also
// moves with what glibc already had resident from earlier work, so one trial
// measured 22, 27 and 60 MB in three runs.
//
// The counter wraps LibTorch's default CPU allocator: every allocation made
// after InstallCountingCpuAllocator() is recorded with its size until its
// deleter runs. Memory allocated before, and memory other libraries take
// outside LibTorch's allocator (oneDNN and OpenBLAS workspaces, glibc's own
// caches), is not counted.

#include <cstdint>

namespace frontier {

// Installs the counter as LibTorch's CPU allocator, once per process. False
// when the current CPU allocator is not LibTorch's default one (someone else
// replaced it): then nothing is counted.
bool InstallCountingCpuAllocator();

struct CpuAllocatedBytes {
  int64_t current = 0;  // held now by tensors allocated since the install
  int64_t peak = 0;     // the most held at once since the last ResetCpuAllocatedPeak()
};

CpuAllocatedBytes CountedCpuBytes();

// Sets the peak to the bytes held now; returns them.
int64_t ResetCpuAllocatedPeak();

// While one lives, a block a tensor frees through the counter is kept, by its
// size, and the next allocation of that size takes it back, as CUDA's caching
// allocator does (up to kMaxReusedBytes kept; the counts are the tensors', as
// without it). The profiled steps run under one (docs/profiling.md): a step
// allocates the sizes the step before it freed, so its tensors take memory
// that is already resident, while the profiler's own small allocations, kept
// for the whole window, would otherwise split the heap's free blocks and send
// each step's tensors to fresh pages. Its end frees the kept blocks. Nothing
// is kept when the counter is not installed.
class CpuBlockReuse {
 public:
  static constexpr int64_t kMaxReusedBytes = int64_t{1} << 30;  // the host allocator's trim threshold
  CpuBlockReuse();
  ~CpuBlockReuse();
  CpuBlockReuse(const CpuBlockReuse&) = delete;
  CpuBlockReuse& operator=(const CpuBlockReuse&) = delete;
  static int64_t KeptBytes();  // held in kept blocks now
};

}  // namespace frontier
