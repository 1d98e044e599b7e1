// The device a trial runs on: selection, precision (autocast) support,
// synchronization, peak FLOP/s for MFU, and peak memory.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/runtime_kinds.h"

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

// The intra-op thread count of a trial whose spec leaves it at 0: the CPUs
// this process may run on (its affinity mask: taskset, a cpuset, the
// worker's --cpus), not every CPU of the machine: more threads than cores
// take turns on them, and OpenMP's barriers then wait a time slice each
// (a bf16 trial pinned to one core ran 10x slower at 2 threads).
int DefaultCpuThreads();

// Sets the CPU thread count of LibTorch's intra-op pool and of OpenBLAS's
// own pool (which otherwise sizes itself from the affinity mask when it is
// loaded, whatever LibTorch's count): the GEMM of a 1-thread trial then runs
// on 1 thread too.
void SetCpuThreads(int threads);

// "auto" picks CUDA device 0 when available, else the CPU. "cuda" without a
// CUDA build or device is an error.
// On CUDA it also turns TF32 off for cuBLAS and cuDNN (UseIeeeFp32OnCuda): fp32
// is IEEE fp32 there, whose peak (TablePeakFlops, the calibration) is the one
// MFU divides by; LibTorch's default lets cuDNN run fp32 convolutions on TF32
// tensor cores, which would put an fp32 trial's MFU against the wrong peak.
DeviceInfo SelectDevice(const std::string& requested);
// TF32 off for cuBLAS and cuDNN (a process-wide setting of LibTorch's
// context; on the CPU it changes nothing).
void UseIeeeFp32OnCuda();
// What that setting is now: {"cublas": bool, "cudnn": bool}, the result's `tf32` on CUDA.
nlohmann::json Tf32Settings();

// The LibTorch dtype of a precision.
torch::ScalarType DtypeOf(Precision precision);

// Throws UnsupportedPrecision when `precision` cannot be
// autocast on the device: CPU autocast in LibTorch supports bf16 only, and
// bf16 on CUDA needs compute capability 8.0 or newer.
void CheckPrecision(Precision precision, const DeviceInfo& device);

// Enables autocast to the precision's dtype on the device for its lifetime
// (nothing for fp32), and clears the autocast weight-cast cache on exit so
// that casts of updated weights are never reused across steps.
class AutocastScope {
 public:
  AutocastScope(Precision precision, const DeviceInfo& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool cpu_ = false, cuda_ = false;
};

// Waits for all work queued on the device (no-op on CPU, where ops are synchronous).
void Synchronize(const DeviceInfo& device);

// The device's memory bandwidth by a stream copy: bytes read + written per
// second copying a 256 MiB buffer, best of 5 (on the CPU over the intra-op
// threads; on CUDA one device-to-device copy).
double MeasureCopyBandwidth(const DeviceInfo& device);

struct PeakFlops {
  double flops_per_s = 0;
  Precision dtype = Precision::kFp32;
  // "calibrated:<method>" (measured by the worker at its start, given to the
  // trial), "table:<entry>" (GPU datasheet) or "measured:cpu-gemm" /
  // "measured:cuda-gemm" (measured inside this trial: the fallback).
  std::string source;
  std::string measured_at;  // when a calibrated peak was measured (UTC, ISO 8601); empty otherwise
  int threads = 0;          // the intra-op thread count a CPU peak was measured with; 0: n/a
  std::string note;         // why a calibrated peak given to the trial was not used, if one was not
  int64_t gemm_size = 0;    // measured: the largest square GEMM timed

  // The result's "peak_flops": {flops_per_s, dtype, source, [measured_at], [threads], [note]}.
  nlohmann::json ToJson() const;
};

// The peaks a worker calibrated, as it passes them to a trial (the
// environment's FRONTIER_PEAK_FLOPS, docs/trial-protocol.md):
// {"fp32": F, "bf16": F, ..., "source": "calibrated:...", "measured_at": "...",
//  "threads": N, "device": "cpu"}. Throws std::invalid_argument naming the
// problem when `text` is not such an object.
struct GivenPeaks {
  std::map<std::string, double> flops_per_s;  // by dtype
  std::string source, measured_at, device;
  int threads = 0;
};
GivenPeaks ParseGivenPeaks(const std::string& text);

// Dense peak of the device for the precision: the worker's calibrated peak
// when `given` has one for this dtype, device kind and thread count; else
// the datasheet table for known GPUs; else (CPU, unknown GPUs) measured in
// this process by MeasurePeakFlops (the fallback).
PeakFlops DevicePeakFlops(Precision precision, const DeviceInfo& device,
                          const std::optional<GivenPeaks>& given = std::nullopt);

// The datasheet table alone (exposed for tests); nullopt for devices whose
// name is not exactly one of the table's (e.g. "NVIDIA A10G" is not an A10,
// "NVIDIA H100 NVL" neither an SXM nor a PCIe H100).
std::optional<PeakFlops> TablePeakFlops(const std::string& device_name, Precision precision);

// How long MeasurePeakFlops measures.
struct GemmBudget {
  double seconds_per_size = 0.4;  // per square size, at least 3 repetitions each
  int64_t max_size = 2048;        // sizes 512, 1024, ... up to this; a size whose one GEMM takes
                                  // longer than seconds_per_size ends the ladder
};
// The best rate of timed square GEMMs of the dtype on the current intra-op
// thread count: source "measured:cpu-gemm" or "measured:cuda-gemm".
PeakFlops MeasurePeakFlops(Precision precision, const DeviceInfo& device, const GemmBudget& budget);

// The calibration line frontier-trial --calibrate prints (one JSON object):
// {"event": "calibration", "device": "cpu", "device_name": ..., "threads": N,
//  "peaks": {"fp32": F, ...}, "sources": {"fp32": "calibrated:cpu-gemm", ...},
//  "measured_at": ..., "gemm": {"largest": {"fp32": 2048, ...}, "seconds_per_size": S},
//  "wall_s": W}. On CUDA, dtypes the datasheet table has are left out (the
// table is the peak there).
nlohmann::json Calibrate(const DeviceInfo& device, const std::vector<Precision>& dtypes, int threads,
                         const GemmBudget& budget);

// True for an allocation failure: std::bad_alloc, c10::OutOfMemoryError,
// LibTorch's CPU allocator ("can't allocate memory") and CUDA's ("CUDA out of
// memory").
bool IsOutOfMemory(const std::exception& e);

// Peak memory of the training loop. CUDA: max allocated bytes since Start().
// CPU: the peak of the bytes LibTorch's CPU allocator holds, above those it
// held at Start() (cpu_allocator.h); where the allocator cannot be counted,
// growth of the resident set's high-water mark above the RSS at Start() (the
// kernel's peak is reset through /proc/self/clear_refs).
class MemoryTracker {
 public:
  explicit MemoryTracker(const DeviceInfo& device) : device_(device) {}
  void Start();
  // What is allocated from Pause() to Resume() is left out of PeakBytes (a
  // spot-checked step's copies and its float64 reference).
  void Pause();
  void Resume();
  int64_t PeakBytes() const;
  std::string kind() const;  // "cuda-max-allocated" | "cpu-allocated-growth" | "cpu-rss-growth"

  static int64_t ResidentBytes();      // VmRSS
  static int64_t PeakResidentBytes();  // VmHWM

 private:
  static bool ResetResidentPeak();  // VmHWM to VmRSS; false where refused
  int64_t PeakSinceReset() const;
  DeviceInfo device_;
  int64_t baseline_ = 0;
  bool counted_ = false;
  bool peak_reset_ = false;
  int64_t kept_peak_ = 0;  // the peak before the last Pause
};

std::string CpuModelName();

}  // namespace frontier
