// libfrontier_cpu_memory.so: the counting CPU allocator (cpu_allocator.h)
// behind a C interface, for processes that are not frontier-trial. The
// Python SDK (worker/python/frontier_trial/measure.py) loads it with ctypes
// into a process whose torch uses the same libc10, so that a command trial's
// peak memory is counted as frontier-trial counts it.
#include "worker/trial/measure/cpu_allocator.h"

extern "C" {

// 1 when LibTorch's CPU allocator is now counted, 0 when it cannot be.
__attribute__((visibility("default"))) int frontier_cpu_memory_install() {
  return frontier::InstallCountingCpuAllocator() ? 1 : 0;
}

// Bytes held now by tensors allocated since the install.
__attribute__((visibility("default"))) long long frontier_cpu_memory_current() {
  return frontier::CountedCpuBytes().current;
}

// The most bytes held at once since the last reset.
__attribute__((visibility("default"))) long long frontier_cpu_memory_peak() {
  return frontier::CountedCpuBytes().peak;
}

// Sets the peak to the bytes held now and returns them.
__attribute__((visibility("default"))) long long frontier_cpu_memory_reset_peak() {
  return frontier::ResetCpuAllocatedPeak();
}

}  // extern "C"
