// worker/trial/measure/device.h: the datasheet table matches names exactly,
// a calibrated peak given by the worker is the trial's peak, the CPU
// calibration measures, a trial's default thread count is its affinity
// mask's, allocation failures are recognised, and a CPU trial's peak memory
// counts its tensors.
#include "worker/trial/measure/device.h"

#include <sched.h>

#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "worker/trial/measure/cpu_allocator.h"

namespace frontier {
namespace {

TEST(TablePeakFlopsTest, KnownBoardsByTheirExactNames) {
  const struct {
    const char* name;
    const char* precision;
    double peak;
    const char* source;
  } cases[] = {
      {"NVIDIA H100 80GB HBM3", "bf16", 989.4e12, "table:H100 SXM"},
      {"NVIDIA H100 PCIe", "bf16", 756.0e12, "table:H100 PCIe"},
      {"NVIDIA H100 PCIe", "fp32", 51.2e12, "table:H100 PCIe"},
      {"NVIDIA H200", "fp16", 989.4e12, "table:H200 SXM"},
      {"NVIDIA A100-SXM4-80GB", "bf16", 312.0e12, "table:A100 SXM"},
      {"NVIDIA A10", "fp32", 31.2e12, "table:A10"},
      {"Tesla V100-PCIE-16GB", "fp16", 112.0e12, "table:V100 PCIe"},
      {"Tesla T4", "fp32", 8.1e12, "table:T4"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.name) + " " + c.precision);
    const auto peak = TablePeakFlops(c.name, *ParseName<Precision>(c.precision));
    ASSERT_TRUE(peak.has_value());
    EXPECT_EQ(peak->flops_per_s, c.peak);
    EXPECT_EQ(peak->source, c.source);
    EXPECT_EQ(NameOf(peak->dtype), c.precision);
  }
}

TEST(TablePeakFlopsTest, VariantsAndUnknownNamesGetNoTablePeak) {
  // Each of these once matched a neighbour by substring: an A10G is not an
  // A10, an H100 NVL (or a name without the form factor) is neither SXM nor PCIe.
  for (const char* name : {"NVIDIA A10G", "NVIDIA H100 NVL", "NVIDIA H100", "NVIDIA H200 NVL", "H100",
                           "NVIDIA A100", "NVIDIA L40", "NVIDIA GeForce RTX 4090", "cpu: AMD EPYC", ""}) {
    SCOPED_TRACE(name);
    EXPECT_FALSE(TablePeakFlops(name, Precision::kBf16).has_value());
    EXPECT_FALSE(TablePeakFlops(name, Precision::kFp32).has_value());
  }
  EXPECT_FALSE(TablePeakFlops("Tesla T4", Precision::kBf16).has_value()) << "T4 has no bf16";
}

TEST(GivenPeaksTest, ParsesTheWorkersCalibration) {
  const GivenPeaks given = ParseGivenPeaks(
      R"({"fp32": 1.5e11, "bf16": 2e10, "source": "calibrated:cpu-gemm", "measured_at": "2026-12-01T15:00:00Z",)"
      R"( "threads": 2, "device": "cpu", "device_name": "cpu: test"})");
  EXPECT_EQ(given.flops_per_s.at("fp32"), 1.5e11);
  EXPECT_EQ(given.flops_per_s.at("bf16"), 2e10);
  EXPECT_EQ(given.flops_per_s.count("fp16"), 0u);
  EXPECT_EQ(given.source, "calibrated:cpu-gemm");
  EXPECT_EQ(given.measured_at, "2026-12-01T15:00:00Z");
  EXPECT_EQ(given.threads, 2);
  EXPECT_EQ(given.device, "cpu");
}

TEST(GivenPeaksTest, BadInputNamesTheProblem) {
  for (const char* bad :
       {"", "[1]", "not json", R"({"fp32": -1})", R"({"fp32": "fast"})", R"({"bf16": 0})"}) {
    SCOPED_TRACE(bad);
    try {
      ParseGivenPeaks(bad);
      FAIL() << "accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("peak FLOP/s"), std::string::npos) << e.what();
    }
  }
}

// LibTorch's default lets cuDNN run fp32 convolutions on TF32 (allowTF32CuDNN
// is true); a CUDA trial turns both off, so its fp32 MFU is against the IEEE
// fp32 peak. The setting is LibTorch's process-wide context, the same on a CPU build.
TEST(DeviceTest, Fp32OnCudaIsIeeeFp32) {
  at::globalContext().setAllowTF32CuBLAS(true);
  at::globalContext().setAllowTF32CuDNN(true);
  EXPECT_EQ(Tf32Settings(), (nlohmann::json{{"cublas", true}, {"cudnn", true}}));
  UseIeeeFp32OnCuda();
  EXPECT_EQ(Tf32Settings(), (nlohmann::json{{"cublas", false}, {"cudnn", false}}));
  EXPECT_FALSE(at::globalContext().allowTF32CuDNN());
  EXPECT_FALSE(at::globalContext().allowTF32CuBLAS());
}

TEST(DevicePeakFlopsTest, TheWorkersCalibratedPeakIsTheTrialsPeak) {
  at::set_num_threads(1);
  const DeviceInfo cpu = SelectDevice("cpu");
  const GivenPeaks given = ParseGivenPeaks(
      R"({"fp32": 1.25e11, "source": "calibrated:cpu-gemm", "measured_at": "2026-12-01T15:00:00Z", "threads": 1,)"
      R"( "device": "cpu"})");
  const PeakFlops peak = DevicePeakFlops(Precision::kFp32, cpu, given);
  EXPECT_EQ(peak.flops_per_s, 1.25e11);
  EXPECT_EQ(peak.source, "calibrated:cpu-gemm");
  const nlohmann::json j = peak.ToJson();
  EXPECT_EQ(j["measured_at"], "2026-12-01T15:00:00Z");
  EXPECT_EQ(j["threads"], 1);
  EXPECT_FALSE(j.contains("note"));
}

TEST(DevicePeakFlopsTest, APeakForAnotherThreadCountOrDtypeIsNotUsedAndTheResultSaysWhy) {
  at::set_num_threads(1);
  const DeviceInfo cpu = SelectDevice("cpu");
  const GivenPeaks given = ParseGivenPeaks(R"({"fp32": 1e15, "threads": 4, "device": "cpu"})");
  const PeakFlops peak = DevicePeakFlops(Precision::kFp32, cpu, given);
  EXPECT_EQ(peak.source, "measured:cpu-gemm");
  EXPECT_LT(peak.flops_per_s, 1e15);
  EXPECT_GT(peak.flops_per_s, 0);
  EXPECT_EQ(peak.note, "the worker's calibrated peak is for 4 threads, this trial runs 1");

  const GivenPeaks fp32_only = ParseGivenPeaks(R"({"fp32": 1e11, "threads": 1, "device": "cpu"})");
  EXPECT_EQ(DevicePeakFlops(Precision::kBf16, cpu, fp32_only).note, "the worker calibrated no bf16 peak");
}

TEST(CalibrateTest, MeasuresEachDtypeOnTheCpuWithItsThreadCount) {
  const DeviceInfo cpu = SelectDevice("cpu");
  const nlohmann::json line = Calibrate(cpu, {Precision::kFp32, Precision::kFp16}, 1, GemmBudget{0.05, 1024});
  EXPECT_EQ(line["event"], "calibration");
  EXPECT_EQ(line["device"], "cpu");
  EXPECT_EQ(line["threads"], 1);
  ASSERT_TRUE(line["peaks"]["fp32"].is_number());
  EXPECT_GT(line["peaks"]["fp32"].get<double>(), 0);
  EXPECT_EQ(line["sources"]["fp32"], "calibrated:cpu-gemm");
  EXPECT_GE(line["gemm"]["largest"]["fp32"].get<int>(), 512);
  EXPECT_FALSE(line["peaks"].contains("fp16")) << "fp16 does not run on the CPU";
  EXPECT_NE(line["errors"]["fp16"].get<std::string>().find("not supported on the CPU"), std::string::npos);
  EXPECT_EQ(line["measured_at"].get<std::string>().size(), std::string("2026-12-01T15:00:00Z").size());
}

TEST(DefaultCpuThreadsTest, CountsTheCpusThisProcessMayRunOn) {
  cpu_set_t all;
  CPU_ZERO(&all);
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(DefaultCpuThreads(), CPU_COUNT(&all));
  int first = 0;
  while (!CPU_ISSET(first, &all)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);  // as `taskset -c N` or a one-core cpuset
  const int pinned = DefaultCpuThreads();
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  EXPECT_EQ(pinned, 1);
}

TEST(IsOutOfMemoryTest, RecognisesAllocationFailures) {
  EXPECT_TRUE(IsOutOfMemory(std::bad_alloc()));
  EXPECT_TRUE(IsOutOfMemory(std::runtime_error("CUDA out of memory. Tried to allocate 2.00 GiB")));
  EXPECT_TRUE(IsOutOfMemory(std::runtime_error(
      "[enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
      "allocate 4294967296 bytes. Error code 12 (Cannot allocate memory)")));
  EXPECT_FALSE(IsOutOfMemory(std::runtime_error("shape mismatch")));
  try {
    // Far more than any address space: LibTorch's CPU allocator refuses it.
    torch::empty({int64_t{1} << 60}, torch::kFloat);
    ADD_FAILURE() << "allocated 4 EiB";
  } catch (const std::exception& e) {
    EXPECT_TRUE(IsOutOfMemory(e)) << e.what();
  }
}

TEST(MemoryTrackerTest, OnTheCpuCountsTheTensorsAllocatedWhileItTracks) {
  const torch::Tensor before = torch::empty({1 << 20}, torch::kFloat);  // 4 MiB, held before Start
  MemoryTracker memory(DeviceInfo{});
  memory.Start();
  EXPECT_EQ(memory.kind(), "cpu-allocated-growth");
  { const torch::Tensor large = torch::empty({2 << 20}, torch::kFloat); }  // 8 MiB, freed at once
  const torch::Tensor small = torch::empty({512 << 10}, torch::kFloat);    // 2 MiB, still held
  EXPECT_EQ(memory.PeakBytes(), int64_t{8} << 20);
  EXPECT_EQ(CountedCpuBytes().current - CountedCpuBytes().peak, (int64_t{2} << 20) - (int64_t{8} << 20));

  MemoryTracker again(DeviceInfo{});
  again.Start();  // the peak restarts from what is held now
  EXPECT_EQ(again.PeakBytes(), 0);
  { const torch::Tensor larger = torch::empty({3 << 20}, torch::kFloat); }
  EXPECT_EQ(again.PeakBytes(), int64_t{12} << 20);
}

TEST(MemoryTrackerTest, TheSameTrainingStepHasTheSamePeakEveryTime) {
  torch::manual_seed(3);
  torch::nn::Sequential net(torch::nn::Linear(64, 256), torch::nn::ReLU(), torch::nn::Linear(256, 10));
  const torch::Tensor input = torch::randn({32, 64});
  std::vector<int64_t> peaks;
  for (int round = 0; round < 3; ++round) {
    MemoryTracker memory(DeviceInfo{});
    memory.Start();
    net->zero_grad();
    net->forward(input).pow(2).mean().backward();
    peaks.push_back(memory.PeakBytes());
  }
  EXPECT_GT(peaks[1], 32 * 256 * 4);  // at least the hidden activation
  EXPECT_EQ(peaks[1], peaks[2]);
  EXPECT_GE(peaks[0], peaks[1]);  // the first round may also allocate the gradients
}

// While a CpuBlockReuse lives, a freed block comes back for the next allocation of its size (the profiled
// steps: docs/profiling.md), and the counts stay the tensors'; after it, blocks are freed as before.
TEST(MemoryTrackerTest, BlocksAreReusedBySizeWhileAReuseLives) {
  MemoryTracker memory(DeviceInfo{});
  memory.Start();  // installs the counter
  const int64_t held = CountedCpuBytes().current;
  void* first = nullptr;
  {
    CpuBlockReuse reuse;
    {
      const torch::Tensor a = torch::empty({3 << 18}, torch::kFloat);  // 3 MiB
      first = a.data_ptr();
    }
    EXPECT_EQ(CountedCpuBytes().current, held) << "a kept block is not a tensor's";
    const torch::Tensor other_size = torch::empty({1 << 18}, torch::kFloat);
    EXPECT_NE(other_size.data_ptr(), first);
    const torch::Tensor same_size = torch::empty({3 << 18}, torch::kFloat);
    EXPECT_EQ(same_size.data_ptr(), first);
    EXPECT_EQ(CountedCpuBytes().current, held + (int64_t{4} << 20));
    EXPECT_EQ(CpuBlockReuse::KeptBytes(), 0);
    // Up to kMaxReusedBytes are kept: of two blocks of 600 MiB (never touched) freed together, one.
    {
      const torch::Tensor b = torch::empty({int64_t{600} << 20}, torch::kByte);
      const torch::Tensor c = torch::empty({int64_t{600} << 20}, torch::kByte);
    }
    EXPECT_EQ(CpuBlockReuse::KeptBytes(), int64_t{600} << 20);
  }
  EXPECT_EQ(CountedCpuBytes().current, held);
  EXPECT_EQ(CpuBlockReuse::KeptBytes(), 0) << "freed when the reuse ended";
}

}  // namespace
}  // namespace frontier
