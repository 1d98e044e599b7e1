// The bare LibTorch training loop that frontier-trial is compared against:
// the same model (built from the same spec), optimizer, batch size, threads
// and host allocator policy; one fixed pre-normalized batch of the task's data
// (no data pipeline), no events, no evaluation, no learning-rate schedule.
// Prints one JSON line: median step time and peak resident memory.
#include <chrono>
#include <iostream>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "worker/host.h"
#include "worker/trial/data/dataset.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/step_stats.h"
#include "tests/bench/bench_main.h"
#include "worker/trial/model/model.h"

namespace {
int Main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: bare_loop SPEC.json\n";
    return 64;
  }
  const frontier::TrialSpec spec = frontier::LoadTrialSpecFile(argv[1]);
  const frontier::TaskSpec& task = spec.task;
  at::set_num_threads(spec.runtime.threads > 0 ? spec.runtime.threads
                                               : static_cast<int>(std::thread::hardware_concurrency()));
  frontier::ConfigureHostAllocator();  // the runner's allocator policy, so only the loops differ
  torch::manual_seed(spec.seed);
  const frontier::ResolvedArch arch = frontier::ResolveArch(spec.arch, frontier::InputShapeOf(task));
  frontier::model::Classifier net(arch);
  const bool channels_last = spec.runtime.memory_format == frontier::MemoryFormat::kChannelsLast;
  if (channels_last) frontier::model::SetMemoryFormat(*net, at::MemoryFormat::ChannelsLast);
  // The first training batch of the task's data, normalized once.
  torch::Tensor x, y;
  {
    const frontier::Dataset data = frontier::LoadTaskDataset(task, static_cast<uint64_t>(spec.seed));
    x = frontier::Normalize(data, data.train.images.slice(0, 0, task.batch_size), torch::kCPU,
                            at::MemoryFormat::Contiguous);
    y = data.train.labels.slice(0, 0, task.batch_size).clone();
  }
  if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
  const frontier::OptimizerSpec& o = task.optimizer;
  torch::optim::SGD optimizer(
      net->parameters(),
      torch::optim::SGDOptions(o.lr).momentum(o.momentum).nesterov(o.nesterov).weight_decay(o.weight_decay));
  const bool bf16 = spec.runtime.precision == frontier::Precision::kBf16;
  std::vector<double> times;
  for (int step = 0; step < task.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    if (bf16) {
      at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
      at::autocast::set_cpu_enabled(true);
    }
    torch::Tensor loss = torch::nn::functional::cross_entropy(net(x).to(torch::kFloat), y);
    if (bf16) {
      at::autocast::set_cpu_enabled(false);
      at::autocast::clear_cache();
    }
    loss.backward();
    optimizer.step();
    const auto t1 = std::chrono::steady_clock::now();
    if (step >= task.warmup_steps) times.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  const frontier::SeriesStats s = frontier::Summarize(times);
  std::cout << "{\"median_step_time_ms\": " << s.median * 1e3 << ", \"steps_measured\": " << s.n
            << ", \"params\": " << frontier::model::CountParameters(*net)
            << ", \"peak_rss_mb\": " << frontier::MemoryTracker::PeakResidentBytes() / 1048576.0 << "}"
            << std::endl;
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return frontier::bench::GuardedMain("bare_loop", [&] { return Main(argc, argv); });
}
