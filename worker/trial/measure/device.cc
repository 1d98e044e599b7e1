#include "worker/trial/measure/device.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>

#include "worker/trial/measure/cpu_allocator.h"

#ifdef FRONTIER_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace frontier {
namespace {

using json = nlohmann::json;

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

}  // namespace

torch::ScalarType DtypeOf(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return torch::kBFloat16;
    case Precision::kFp16: return torch::kHalf;
    case Precision::kFp32: break;
  }
  return torch::kFloat;
}

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

int DefaultCpuThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void SetCpuThreads(int threads) {
  at::set_num_threads(threads);
  using SetThreads = void (*)(int);
  const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set != nullptr) set(threads);
}

void UseIeeeFp32OnCuda() {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
}

nlohmann::json Tf32Settings() {
  return {{"cublas", at::globalContext().allowTF32CuBLAS()}, {"cudnn", at::globalContext().allowTF32CuDNN()}};
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
    UseIeeeFp32OnCuda();
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

void CheckPrecision(Precision precision, const DeviceInfo& device) {
  if (precision == Precision::kFp32) return;
  if (!device.is_cuda()) {
    if (precision != Precision::kBf16) {
      throw UnsupportedPrecision("runtime.precision: " + NameOf(precision) +
                                 " autocast is not supported on the CPU (LibTorch CPU autocast runs bf16 only); "
                                 "use bf16 or fp32 here, or a CUDA device");
    }
    return;
  }
#ifdef FRONTIER_WITH_CUDA
  if (precision == Precision::kBf16 && at::cuda::getDeviceProperties(device.device.index())->major < 8) {
    throw UnsupportedPrecision("runtime.precision: bf16 needs a CUDA device of compute capability 8.0 or newer; " +
                               device.name + " is older");
  }
#endif
}

AutocastScope::AutocastScope(Precision precision, const DeviceInfo& device) {
  if (precision == Precision::kFp32) return;
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

double MeasureCopyBandwidth(const DeviceInfo& device) {
  const int64_t bytes = int64_t{256} << 20;
  const torch::Tensor src = torch::ones({bytes}, torch::dtype(torch::kUInt8).device(device.device));
  torch::Tensor dst = torch::empty_like(src);
  double best = 0;
  for (int r = 0; r < 5; ++r) {
    Synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    if (device.is_cuda()) {
      dst.copy_(src);
    } else {
      const uint8_t* from = src.data_ptr<uint8_t>();
      uint8_t* to = dst.data_ptr<uint8_t>();
      at::parallel_for(0, bytes, 1 << 20, [&](int64_t begin, int64_t end) {
        std::memcpy(to + begin, from + begin, static_cast<size_t>(end - begin));
      });
    }
    Synchronize(device);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 2.0 * static_cast<double>(bytes) / s);
  }
  return best;
}

std::optional<PeakFlops> TablePeakFlops(const std::string& name, Precision precision) {
  // Dense (no sparsity) datasheet peaks, by the exact name the driver gives
  // (cudaDeviceProp::name, nvidia-smi --query-gpu=name). A name not listed
  // (a variant such as "NVIDIA A10G" or "NVIDIA H100 NVL", a new board) gets
  // no table peak: the worker calibrates it. fp32 is the non-tensor-core rate
  // (LibTorch leaves TF32 matmul off by default).
  struct Entry {
    const char* name;
    const char* label;
    double bf16, fp16, fp32;
  };
  static const Entry kTable[] = {
      {"NVIDIA H200", "H200 SXM", 989.4e12, 989.4e12, 66.9e12},
      {"NVIDIA H100 80GB HBM3", "H100 SXM", 989.4e12, 989.4e12, 66.9e12},
      {"NVIDIA H100 PCIe", "H100 PCIe", 756.0e12, 756.0e12, 51.2e12},
      {"NVIDIA A100-SXM4-40GB", "A100 SXM", 312.0e12, 312.0e12, 19.5e12},
      {"NVIDIA A100-SXM4-80GB", "A100 SXM", 312.0e12, 312.0e12, 19.5e12},
      {"NVIDIA A100-PCIE-40GB", "A100 PCIe", 312.0e12, 312.0e12, 19.5e12},
      {"NVIDIA A100 80GB PCIe", "A100 PCIe", 312.0e12, 312.0e12, 19.5e12},
      {"NVIDIA L40S", "L40S", 362.1e12, 362.1e12, 91.6e12},
      {"NVIDIA A10", "A10", 125.0e12, 125.0e12, 31.2e12},
      {"Tesla V100-SXM2-16GB", "V100 SXM2", 0, 125.0e12, 15.7e12},
      {"Tesla V100-SXM2-32GB", "V100 SXM2", 0, 125.0e12, 15.7e12},
      {"Tesla V100-PCIE-16GB", "V100 PCIe", 0, 112.0e12, 14.0e12},
      {"Tesla V100-PCIE-32GB", "V100 PCIe", 0, 112.0e12, 14.0e12},
      {"Tesla T4", "T4", 0, 65.0e12, 8.1e12},
  };
  for (const Entry& e : kTable) {
    if (name != e.name) continue;
    const double peak = precision == Precision::kBf16 ? e.bf16 : precision == Precision::kFp16 ? e.fp16 : e.fp32;
    if (peak <= 0) return std::nullopt;
    PeakFlops p;
    p.flops_per_s = peak;
    p.dtype = precision;
    p.source = std::string("table:") + e.label;
    return p;
  }
  return std::nullopt;
}

json PeakFlops::ToJson() const {
  json j = {{"flops_per_s", flops_per_s}, {"dtype", dtype}, {"source", source}};
  if (!measured_at.empty()) j["measured_at"] = measured_at;
  if (threads > 0) j["threads"] = threads;
  if (!note.empty()) j["note"] = note;
  return j;
}

GivenPeaks ParseGivenPeaks(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) throw std::invalid_argument("peak FLOP/s: expected a JSON object, got '" + text.substr(0, 80) + "'");
  GivenPeaks given;
  for (const char* dtype : {"fp32", "bf16", "fp16"}) {
    const auto it = j.find(dtype);
    if (it == j.end()) continue;
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() <= 0) {
      throw std::invalid_argument(std::string("peak FLOP/s: ") + dtype + " must be a number > 0, got " + it->dump());
    }
    given.flops_per_s[dtype] = it->get<double>();
  }
  const auto text_of = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  given.source = text_of("source");
  if (given.source.empty()) given.source = "calibrated:worker";
  given.measured_at = text_of("measured_at");
  given.device = text_of("device");
  if (j.contains("threads") && j["threads"].is_number_integer()) given.threads = j["threads"].get<int>();
  return given;
}

PeakFlops MeasurePeakFlops(Precision precision, const DeviceInfo& device, const GemmBudget& budget) {
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().dtype(DtypeOf(precision)).device(device.device);
  // On CUDA one timed repetition is several GEMMs between synchronizations, so
  // launch latency does not count against small sizes.
  const int inner = device.is_cuda() ? 10 : 1;
  double best = 0;
  int64_t largest = 0;
  for (int64_t size = 512; size <= budget.max_size; size *= 2) {
    torch::Tensor a = torch::randn({size, size}, options), b = torch::randn({size, size}, options);
    torch::Tensor c = torch::mm(a, b);  // warm up kernels and thread pool
    Synchronize(device);
    double slowest = 0;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(budget.seconds_per_size);
    for (int reps = 0; reps < 3 || (std::chrono::steady_clock::now() < deadline && reps < 2000); ++reps) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < inner; ++i) torch::mm_out(c, a, b);
      Synchronize(device);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, inner * 2.0 * size * size * size / s);
      slowest = std::max(slowest, s);
    }
    largest = size;
    // The next size costs 8x: stop while the ladder still fits its budget.
    if (slowest * 8 > budget.seconds_per_size * 3) break;
  }
  PeakFlops peak;
  peak.gemm_size = largest;
  peak.flops_per_s = best;
  peak.dtype = precision;
  peak.source = device.is_cuda() ? "measured:cuda-gemm" : "measured:cpu-gemm";
  if (!device.is_cuda()) peak.threads = at::get_num_threads();
  return peak;
}

PeakFlops DevicePeakFlops(Precision precision, const DeviceInfo& device,
                          const std::optional<GivenPeaks>& given) {
  std::string note;
  if (given) {
    const auto it = given->flops_per_s.find(NameOf(precision));
    const std::string kind = device.is_cuda() ? "cuda" : "cpu";
    const int threads = device.is_cuda() ? 0 : at::get_num_threads();
    if (it == given->flops_per_s.end()) {
      note = "the worker calibrated no " + NameOf(precision) + " peak";
    } else if (!given->device.empty() && given->device != kind) {
      note = "the worker's calibrated peak is for " + given->device + ", this trial runs on " + kind;
    } else if (!device.is_cuda() && given->threads > 0 && given->threads != threads) {
      note = "the worker's calibrated peak is for " + std::to_string(given->threads) + " threads, this trial runs " +
             std::to_string(threads);
    } else {
      PeakFlops peak;
      peak.flops_per_s = it->second;
      peak.dtype = precision;
      peak.source = given->source;
      peak.measured_at = given->measured_at;
      peak.threads = given->threads;
      return peak;
    }
  }
  if (device.is_cuda()) {
    if (auto peak = TablePeakFlops(device.name, precision)) return *peak;
  }
  // The fallback: measured inside this trial, shorter than a calibration.
  PeakFlops peak = MeasurePeakFlops(precision, device, GemmBudget{0.2, 1024});
  peak.note = note;
  return peak;
}

json Calibrate(const DeviceInfo& device, const std::vector<Precision>& dtypes, int threads,
               const GemmBudget& budget) {
  const auto start = std::chrono::steady_clock::now();
  if (!device.is_cuda() && threads > 0) SetCpuThreads(threads);
  json peaks = json::object(), sources = json::object(), errors = json::object(), table = json::object(),
       largest = json::object();
  for (const Precision dtype : dtypes) {
    const std::string name = NameOf(dtype);
    if (device.is_cuda()) {
      if (auto known = TablePeakFlops(device.name, dtype)) {
        table[name] = known->source;  // the datasheet is the peak there
        continue;
      }
    }
    try {
      CheckPrecision(dtype, device);
      const PeakFlops measured = MeasurePeakFlops(dtype, device, budget);
      peaks[name] = measured.flops_per_s;
      largest[name] = measured.gemm_size;
      sources[name] = device.is_cuda() ? "calibrated:cuda-gemm" : "calibrated:cpu-gemm";
    } catch (const std::exception& e) {
      errors[name] = e.what();
    }
  }
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  json line = {{"event", "calibration"},
               {"device", device.is_cuda() ? "cuda" : "cpu"},
               {"device_name", device.name},
               {"threads", device.is_cuda() ? 0 : at::get_num_threads()},
               {"peaks", peaks},
               {"sources", sources},
               {"measured_at", when},
               {"gemm", {{"largest", largest}, {"seconds_per_size", budget.seconds_per_size}}},
               {"wall_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()}};
  if (!table.empty()) line["table"] = table;
  if (!errors.empty()) line["errors"] = errors;
  return line;
}

bool IsOutOfMemory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string what = e.what();
  return what.find("out of memory") != std::string::npos || what.find("can't allocate memory") != std::string::npos ||
         what.find("Cannot allocate memory") != std::string::npos;
}

int64_t MemoryTracker::ResidentBytes() { return StatusField("VmRSS"); }

bool MemoryTracker::ResetResidentPeak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";  // resets VmHWM to the current RSS
  clear.close();
  return !clear.fail();
}
int64_t MemoryTracker::PeakResidentBytes() { return StatusField("VmHWM"); }

void MemoryTracker::Start() {
  if (device_.is_cuda()) {
#ifdef FRONTIER_WITH_CUDA
    c10::cuda::CUDACachingAllocator::resetPeakStats(device_.device.index());
    baseline_ = 0;
#endif
    return;
  }
  counted_ = InstallCountingCpuAllocator();
  if (counted_) {
    baseline_ = ResetCpuAllocatedPeak();
    return;
  }
  peak_reset_ = ResetResidentPeak();
  baseline_ = ResidentBytes();
}

void MemoryTracker::Pause() { kept_peak_ = PeakBytes(); }

// The peak starts again from what is allocated now; the baseline stays.
void MemoryTracker::Resume() {
  if (device_.is_cuda()) {
#ifdef FRONTIER_WITH_CUDA
    c10::cuda::CUDACachingAllocator::resetPeakStats(device_.device.index());
#endif
  } else if (counted_) {
    ResetCpuAllocatedPeak();
  } else {
    ResetResidentPeak();
  }
}

int64_t MemoryTracker::PeakBytes() const { return std::max(kept_peak_, PeakSinceReset()); }

int64_t MemoryTracker::PeakSinceReset() const {
  if (device_.is_cuda()) {
#ifdef FRONTIER_WITH_CUDA
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.device.index());
    return stats.allocated_bytes[0].peak;  // index 0: the AGGREGATE pool
#else
    return 0;
#endif
  }
  if (counted_) return std::max<int64_t>(0, CountedCpuBytes().peak - baseline_);
  return std::max<int64_t>(0, PeakResidentBytes() - baseline_);
}

std::string MemoryTracker::kind() const {
  if (device_.is_cuda()) return "cuda-max-allocated";
  if (counted_) return "cpu-allocated-growth";
  return peak_reset_ ? "cpu-rss-growth" : "cpu-rss-growth(process-peak)";
}

}  // namespace frontier
