// The BEV pooling variants (bev_pool.h: naive = materialize the frustum +
// index_add, fused = materialize + interval sums, depth_fused = BEVPoolv2,
// no frustum) side by side on the frustum of a real rig: forward and
// forward+backward time from the lift's two factors, the peak memory of a
// step, and how close depth_fused comes to the machine's memory bandwidth.
//
//   bev_pool_bench [--threads 2] [--rounds 5] [--reps 3] [--preset small|nuscenes|all]
//                  [--dtype float|bf16]
//
// Rounds interleave the variants (the order rotates each round), so a load
// change on a shared machine hits all of them; the speed-ups are per-round
// ratios (median, min, max). Memory: the peak of the tensor bytes LibTorch's
// CPU allocator holds during one forward+backward above those held before
// (MemoryTracker, the trial runner's CPU measure), the inputs allocated before. Bandwidth: the best of
// several parallel copies of a 256 MiB buffer (read + write counted).
//
// Presets:
//   small     the bev-synthetic default: 6 cameras, 24 depth bins, 8x22
//             feature map, 32 channels, 48x48 grid, batch 8
//   nuscenes  LSS at nuScenes scale: 6 cameras, 41 bins, 16x44 feature map,
//             64 channels, 200x200 grid at 0.5 m, batch 4 (173k points/sample)
// Prints one JSON line per preset.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "tests/bench/bench_main.h"
#include "worker/trial/data/bev_scene.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/ops/bev_pool.h"
#include "worker/trial/tasks/bev_model.h"

namespace {

using Clock = std::chrono::steady_clock;
const std::vector<std::string> kVariants = {"naive", "fused", "depth_fused"};

struct Preset {
  std::string name;
  int cameras, depth_bins, fh, fw, channels, grid;
  double resolution;
  int batch;
  double depth_min, depth_max;
};

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Sample {
  double forward_ms, total_ms, peak_bytes;
};

Sample Step(const std::string& variant, const torch::Tensor& depth0, const torch::Tensor& features0,
            const torch::Tensor& upstream, const frontier::bev::PoolPlan& plan, torch::Tensor* out) {
  torch::Tensor depth = depth0.detach().requires_grad_(true), features = features0.detach().requires_grad_(true);
  malloc_trim(0);
  frontier::MemoryTracker memory(frontier::DeviceInfo{});
  memory.Start();
  const auto t0 = Clock::now();
  torch::Tensor y = frontier::bev::Pool(variant, depth, features, plan);
  const auto t1 = Clock::now();
  y.backward(upstream);
  const auto t2 = Clock::now();
  const double peak = static_cast<double>(memory.PeakBytes());
  if (out) *out = y.detach();
  return {Ms(t0, t1), Ms(t0, t2), peak};
}

nlohmann::json Run(const Preset& p, int rounds, int reps, torch::ScalarType dtype, double copy_bytes_per_s) {
  frontier::BevTaskSpec task;
  task.cameras = p.cameras;
  task.height = p.fh * 8;
  task.width = p.fw * 8;
  task.grid = p.grid;
  task.resolution = p.resolution;
  const frontier::bev::Rig rig = frontier::bev::MakeRig(task);
  frontier::BevArchSpec arch;
  arch.depth_bins = p.depth_bins;
  arch.depth_min = p.depth_min;
  arch.depth_max = p.depth_max;
  const auto plan_start = Clock::now();
  const frontier::bev::PoolPlan& plan = *frontier::model::LssPoolPlan(rig, p.fh, p.fw, arch);
  const double plan_ms = Ms(plan_start, Clock::now());

  torch::manual_seed(0);
  const auto& s = plan.shape;
  const torch::Tensor depth = torch::softmax(torch::randn({p.batch, s.cameras, s.depth_bins, s.height, s.width}), 2)
                                  .to(dtype);
  const torch::Tensor features = torch::randn({p.batch, s.cameras, s.height, s.width, p.channels}).to(dtype);
  const torch::Tensor upstream = torch::randn({p.batch, plan.cells, p.channels}).to(dtype);
  const int64_t element = torch::elementSize(dtype);
  const double frustum_bytes = static_cast<double>(p.batch) * plan.points * p.channels * element;
  nlohmann::json out = {{"preset", p.name},
                        {"dtype", c10::toString(dtype)},
                        {"batch", p.batch},
                        {"points_per_sample", plan.points},
                        {"points_in_grid", plan.valid_points.numel()},
                        {"intervals", plan.interval_cells.numel()},
                        {"feature_intervals", plan.feature_interval_rows.numel()},
                        {"channels", p.channels},
                        {"cells", plan.cells},
                        {"plan_ms", plan_ms},
                        {"threads", at::get_num_threads()},
                        {"rounds", rounds},
                        {"reps_per_round", reps},
                        {"frustum_tensor_mb", frustum_bytes / (1 << 20)}};

  std::map<std::string, std::vector<double>> fwd, total, peak;  // per round: the round's median
  std::map<std::string, torch::Tensor> outputs;
  for (const std::string& v : kVariants) Step(v, depth, features, upstream, plan, &outputs[v]);  // warm-up
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < kVariants.size(); ++i) {
      const std::string& v = kVariants[(i + r) % kVariants.size()];
      std::vector<double> f, t, m;
      for (int k = 0; k < reps; ++k) {
        const Sample sample = Step(v, depth, features, upstream, plan, nullptr);
        f.push_back(sample.forward_ms);
        t.push_back(sample.total_ms);
        m.push_back(sample.peak_bytes);
      }
      fwd[v].push_back(Median(f));
      total[v].push_back(Median(t));
      peak[v].push_back(Median(m));
    }
  }
  for (const std::string& v : kVariants) {
    out[v] = {{"forward_ms", Median(fwd[v])},
              {"forward_backward_ms", Median(total[v])},
              {"forward_backward_ms_per_round", total[v]},
              {"peak_step_memory_mb", Median(peak[v]) / (1 << 20)},
              {"max_abs_diff_vs_naive",
               (outputs[v].to(torch::kDouble) - outputs["naive"].to(torch::kDouble)).abs().max().item<double>()}};
    if (v == "naive") continue;
    std::vector<double> forward_ratio, total_ratio;
    for (int r = 0; r < rounds; ++r) {
      forward_ratio.push_back(fwd["naive"][r] / fwd[v][r]);
      total_ratio.push_back(total["naive"][r] / total[v][r]);
    }
    out[v]["speedup_forward"] = Median(forward_ratio);
    out[v]["speedup_forward_backward"] = Median(total_ratio);
    out[v]["speedup_forward_backward_min_max"] = {*std::min_element(total_ratio.begin(), total_ratio.end()),
                                                 *std::max_element(total_ratio.begin(), total_ratio.end())};
    out[v]["peak_memory_saved_mb"] = (Median(peak["naive"]) - Median(peak[v])) / (1 << 20);
  }
  // depth_fused's compulsory traffic: every input read once, every output
  // written once (forward: depth, features -> out; backward: grad_out, depth,
  // features -> grad_depth, grad_features), plus the zero fill of out and of
  // the two gradients.
  const double depth_bytes = static_cast<double>(depth.numel()) * element,
               feature_bytes = static_cast<double>(features.numel()) * element,
               grid_bytes = static_cast<double>(upstream.numel()) * element;
  const double bytes = (depth_bytes + feature_bytes + 2 * grid_bytes) +
                       (grid_bytes + 3 * depth_bytes + 3 * feature_bytes);
  const double seconds = Median(total["depth_fused"]) / 1e3;
  out["stream_copy_gb_s"] = copy_bytes_per_s / 1e9;
  out["depth_fused"]["compulsory_mb"] = bytes / (1 << 20);
  out["depth_fused"]["achieved_gb_s"] = bytes / seconds / 1e9;
  out["depth_fused"]["fraction_of_stream_copy"] = bytes / seconds / copy_bytes_per_s;
  return out;
}

}  // namespace

namespace {
int Main(int argc, char** argv) {
  int threads = 2, rounds = 5, reps = 3;
  std::string preset = "all", dtype_name = "float";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads") {
      threads = static_cast<int>(frontier::bench::IntFlag(flag, argv[i + 1]));
    } else if (flag == "--rounds") {
      rounds = static_cast<int>(frontier::bench::IntFlag(flag, argv[i + 1]));
    } else if (flag == "--reps") {
      reps = static_cast<int>(frontier::bench::IntFlag(flag, argv[i + 1]));
    } else if (flag == "--preset") {
      preset = argv[i + 1];
    } else if (flag == "--dtype") {
      dtype_name = argv[i + 1];
    } else {
      std::cerr << "usage: bev_pool_bench [--threads N] [--rounds N] [--reps N] [--preset small|nuscenes|all] "
                   "[--dtype float|bf16]\n";
      return 64;
    }
  }
  if ((argc - 1) % 2 != 0 || (dtype_name != "float" && dtype_name != "bf16") || rounds < 1 || reps < 1) {
    std::cerr << "bev_pool_bench: flags take one value each; --dtype is float or bf16; rounds and reps >= 1\n";
    return 64;
  }
  at::set_num_threads(threads);
  const torch::ScalarType dtype = dtype_name == "bf16" ? torch::kBFloat16 : torch::kFloat;
  const double copy = frontier::MeasureCopyBandwidth(frontier::DeviceInfo{});
  const std::vector<Preset> presets = {{"small", 6, 24, 8, 22, 32, 48, 1.0, 8, 2.0, 38.0},
                                       {"nuscenes", 6, 41, 16, 44, 64, 200, 0.5, 4, 4.0, 45.0}};
  for (const Preset& p : presets) {
    if (preset != "all" && preset != p.name) continue;
    std::cout << Run(p, rounds, reps, dtype, copy).dump() << std::endl;
  }
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  return frontier::bench::GuardedMain("bev_pool_bench", [&] { return Main(argc, argv); });
}
