#include "worker/trial/measure/device.h"

#include <ATen/autocast_mode.h>
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#ifdef FRONTIER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace frontier {
namespace {

int64_t StatusField(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      int64_t kb = 0;
      fields >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

torch::ScalarType DtypeOf(const std::string& precision) {
  if (precision == "bf16") return torch::kBFloat16;
  if (precision == "fp16") return torch::kHalf;
  return torch::kFloat;
}

}  // namespace

std::string CpuModelName() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(colon + 2);
    }
  }
  return "unknown";
}

DeviceInfo SelectDevice(const std::string& requested) {
  DeviceInfo info;
  const bool want_cuda = requested.rfind("cuda", 0) == 0;
  if (want_cuda || (requested == "auto" && torch::cuda::is_available())) {
    if (!torch::cuda::is_available()) {
      throw std::runtime_error("runtime.device: '" + requested +
                               "' requested but no CUDA device is available to this build");
    }
    info.device = torch::Device(requested == "auto" ? "cuda:0" : requested);
    if (!info.device.has_index()) info.device = torch::Device(torch::kCUDA, 0);
#ifdef FRONTIER_WITH_CUDA
    info.name = at::cuda::getDeviceProperties(info.device.index())->name;
#else
    info.name = "cuda";
#endif
    return info;
  }
  info.device = torch::kCPU;
  info.name = "cpu: " + CpuModelName();
  return info;
}

void CheckPrecision(const std::string& precision, const DeviceInfo& device) {
  if (precision == "fp32") return;
  if (!device.is_cuda()) {
    if (precision != "bf16") {
      throw UnsupportedPrecision("runtime.precision: " + precision +
                                 " autocast is not supported on the CPU (LibTorch CPU autocast runs bf16 only); "
                                 "use bf16 or fp32 here, or a CUDA device");
    }
    return;
  }
#ifdef FRONTIER_WITH_CUDA
  if (precision == "bf16" && at::cuda::getDeviceProperties(device.device.index())->major < 8) {
    throw UnsupportedPrecision("runtime.precision: bf16 needs a CUDA device of compute capability 8.0 or newer; " +
                               device.name + " is older");
  }
#endif
}

AutocastScope::AutocastScope(const std::string& precision, const DeviceInfo& device) {
  if (precision == "fp32") return;
  if (device.is_cuda()) {
    at::autocast::set_autocast_gpu_dtype(DtypeOf(precision));
    at::autocast::set_enabled(true);
    cuda_ = true;
  } else {
    at::autocast::set_autocast_cpu_dtype(DtypeOf(precision));
    at::autocast::set_cpu_enabled(true);
    cpu_ = true;
  }
}

AutocastScope::~AutocastScope() {
  if (cuda_) at::autocast::set_enabled(false);
  if (cpu_) at::autocast::set_cpu_enabled(false);
  if (cpu_ || cuda_) at::autocast::clear_cache();
}

void Synchronize(const DeviceInfo& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.device.index());
}

std::optional<PeakFlops> TablePeakFlops(const std::string& name, const std::string& precision) {
  // Dense (no sparsity) datasheet peaks. fp32 is the non-tensor-core rate
  // (LibTorch leaves TF32 matmul off by default).
  struct Entry {
    const char* match;
    const char* exclude;
    double bf16, fp16, fp32;
  };
  static const Entry kTable[] = {
      {"H200", nullptr, 989.4e12, 989.4e12, 66.9e12},
      {"H100", "PCIe", 989.4e12, 989.4e12, 66.9e12},  // SXM
      {"H100", nullptr, 756.0e12, 756.0e12, 51.2e12},  // PCIe
      {"A100", nullptr, 312.0e12, 312.0e12, 19.5e12},
      {"L40S", nullptr, 362.1e12, 362.1e12, 91.6e12},
      {"A10", nullptr, 125.0e12, 125.0e12, 31.2e12},
      {"V100", nullptr, 0, 125.0e12, 15.7e12},
      {"T4", nullptr, 0, 65.0e12, 8.1e12},
  };
  for (const Entry& e : kTable) {
    if (name.find(e.match) == std::string::npos) continue;
    if (e.exclude && name.find(e.exclude) != std::string::npos) continue;
    const double peak = precision == "bf16" ? e.bf16 : precision == "fp16" ? e.fp16 : e.fp32;
    if (peak <= 0) return std::nullopt;
    return PeakFlops{peak, precision, std::string("table:") + e.match + (e.exclude ? " SXM" : "")};
  }
  return std::nullopt;
}

PeakFlops DevicePeakFlops(const std::string& precision, const DeviceInfo& device) {
  if (device.is_cuda()) {
    if (auto peak = TablePeakFlops(device.name, precision)) return *peak;
  }
  // Measured: square GEMMs of the trial's dtype; best of several repetitions.
  torch::NoGradGuard no_grad;
  constexpr int64_t kSize = 1024;
  const auto options = torch::TensorOptions().dtype(DtypeOf(precision)).device(device.device);
  torch::Tensor a = torch::randn({kSize, kSize}, options), b = torch::randn({kSize, kSize}, options);
  torch::Tensor c = torch::mm(a, b);  // warm up kernels and thread pool
  Synchronize(device);
  double best = 0;
  int reps = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
  while (reps < 5 || (std::chrono::steady_clock::now() < deadline && reps < 200)) {
    const auto t0 = std::chrono::steady_clock::now();
    torch::mm_out(c, a, b);
    Synchronize(device);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * kSize * kSize * kSize / s);
    ++reps;
  }
  return PeakFlops{best, precision, device.is_cuda() ? "measured:cuda-gemm" : "measured:cpu-gemm"};
}

std::string ConfigureHostAllocator() {
  constexpr int kMmapThreshold = 64 << 20;  // larger blocks still get their own mapping
  constexpr int kTrimThreshold = 1 << 30;   // keep freed heap memory for the next step
  constexpr int kTopPad = 64 << 20;         // grow the heap in large steps
  const bool ok = mallopt(M_MMAP_THRESHOLD, kMmapThreshold) == 1 && mallopt(M_TRIM_THRESHOLD, kTrimThreshold) == 1 &&
                  mallopt(M_TOP_PAD, kTopPad) == 1;
  return ok ? "glibc mmap_threshold=64MiB trim_threshold=1GiB top_pad=64MiB" : "glibc defaults (mallopt failed)";
}

int64_t MemoryTracker::ResidentBytes() { return StatusField("VmRSS"); }
int64_t MemoryTracker::PeakResidentBytes() { return StatusField("VmHWM"); }

void MemoryTracker::Start() {
  if (device_.is_cuda()) {
#ifdef FRONTIER_WITH_CUDA
    c10::cuda::CUDACachingAllocator::resetPeakStats(device_.device.index());
    baseline_ = 0;
#endif
    return;
  }
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // resets VmHWM to the current RSS
  clear.close();
  peak_reset_ = !clear.fail();
  baseline_ = ResidentBytes();
}

int64_t MemoryTracker::PeakBytes() const {
  if (device_.is_cuda()) {
#ifdef FRONTIER_WITH_CUDA
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.device.index());
    return stats.allocated_bytes[0].peak;  // index 0: the AGGREGATE pool
#else
    return 0;
#endif
  }
  return std::max<int64_t>(0, PeakResidentBytes() - baseline_);
}

std::string MemoryTracker::kind() const {
  if (device_.is_cuda()) return "cuda-max-allocated";
  return peak_reset_ ? "cpu-rss-growth" : "cpu-rss-growth(process-peak)";
}

}  // namespace frontier
