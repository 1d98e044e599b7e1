// The device a trial runs on: selection, precision (autocast) support,
// synchronization, peak FLOP/s for MFU, and peak memory.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

namespace frontier {

// The requested precision cannot run on this device. Never silently replaced.
class UnsupportedPrecision : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DeviceInfo {
  torch::Device device = torch::kCPU;
  std::string name;  // "cpu: <model name>" or the CUDA device name
  bool is_cuda() const { return device.is_cuda(); }
};

// "auto" picks CUDA device 0 when available, else the CPU. "cuda" without a
// CUDA build or device is an error.
DeviceInfo SelectDevice(const std::string& requested);

// Throws UnsupportedPrecision when `precision` (fp32 | bf16 | fp16) cannot be
// autocast on the device: CPU autocast in LibTorch supports bf16 only, and
// bf16 on CUDA needs compute capability 8.0 or newer.
void CheckPrecision(const std::string& precision, const DeviceInfo& device);

// Enables autocast to the precision's dtype on the device for its lifetime
// (nothing for fp32), and clears the autocast weight-cast cache on exit so
// that casts of updated weights are never reused across steps.
class AutocastScope {
 public:
  AutocastScope(const std::string& precision, const DeviceInfo& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool cpu_ = false, cuda_ = false;
};

// Waits for all work queued on the device (no-op on CPU, where ops are synchronous).
void Synchronize(const DeviceInfo& device);

struct PeakFlops {
  double flops_per_s = 0;
  std::string dtype;   // fp32 | bf16 | fp16
  std::string source;  // "table:<entry>" (GPU datasheet) or "measured:cpu-gemm" (in-process GEMM)
};

// Dense peak of the device for the precision: the datasheet table for known
// GPUs, otherwise (CPU) the best of several timed square GEMMs of that dtype
// on the current intra-op thread count.
PeakFlops DevicePeakFlops(const std::string& precision, const DeviceInfo& device);

// The datasheet table alone (exposed for tests); nullopt for unknown devices.
std::optional<PeakFlops> TablePeakFlops(const std::string& device_name, const std::string& precision);

// Peak memory of the training loop. CUDA: max allocated bytes since Start().
// CPU: growth of the resident set's high-water mark above the RSS at Start()
// (the kernel's peak is reset through /proc/self/clear_refs).
class MemoryTracker {
 public:
  explicit MemoryTracker(const DeviceInfo& device) : device_(device) {}
  void Start();
  int64_t PeakBytes() const;
  std::string kind() const;  // "cuda-max-allocated" | "cpu-rss-growth"

  static int64_t ResidentBytes();      // VmRSS
  static int64_t PeakResidentBytes();  // VmHWM

 private:
  DeviceInfo device_;
  int64_t baseline_ = 0;
  bool peak_reset_ = false;
};

std::string CpuModelName();

// Keeps glibc malloc from returning memory to the kernel between steps. A
// training step frees and reallocates the same multi-megabyte activation
// buffers every time; with glibc's defaults they go through mmap/munmap or
// heap trimming, and each step pays page faults whose cost depends on what the
// process did before (measured here: 36 vs 41-55 ms per step for the same
// loop). Called once at the start of a trial, and by the benchmarks' reference
// loops so that all are compared under one allocator policy. Returns the
// policy as text for the result.
std::string ConfigureHostAllocator();

}  // namespace frontier
