// Fused vs naive BEV pooling, forward + backward, on the frustum of a real
// rig (worker/trial/data/bev_scene.h): the same plan, the same features,
// side by side.
//
//   bev_pool_bench [--threads 2] [--reps 10] [--preset small|nuscenes|all]
//
// Presets:
//   small     the bev-synthetic default: 6 cameras, 24 depth bins, 8x22
//             feature map, 32 channels, 48x48 grid, batch 8
//   nuscenes  LSS at nuScenes scale: 6 cameras, 41 bins, 16x44 feature map,
//             64 channels, 200x200 grid at 0.5 m, batch 4 (173k points/sample)
// Prints one JSON line per preset and implementation, then the speed-up.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "worker/trial/data/bev_scene.h"
#include "worker/trial/ops/bev_pool.h"
#include "worker/trial/tasks/bev_model.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Preset {
  std::string name;
  int cameras, depth_bins, fh, fw, channels, grid;
  double resolution;
  int batch;
  double depth_min, depth_max;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

nlohmann::json Run(const Preset& p, int reps) {
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
  const frontier::bev::PoolPlan plan = frontier::bev::MakePoolPlan(
      frontier::model::FrustumCells(rig, p.fh, p.fw, arch), int64_t{p.grid} * p.grid);
  const double plan_ms = std::chrono::duration<double, std::milli>(Clock::now() - plan_start).count();

  torch::manual_seed(0);
  const torch::Tensor x0 = torch::randn({p.batch, plan.points, p.channels});
  const torch::Tensor upstream = torch::randn({p.batch, plan.cells, p.channels});
  nlohmann::json out = {{"preset", p.name},
                        {"batch", p.batch},
                        {"points_per_sample", plan.points},
                        {"points_in_grid", plan.valid_points.numel()},
                        {"intervals", plan.interval_cells.numel()},
                        {"channels", p.channels},
                        {"cells", plan.cells},
                        {"plan_ms", plan_ms},
                        {"threads", at::get_num_threads()}};
  torch::Tensor reference;
  for (const std::string impl : {"naive", "fused"}) {
    std::vector<double> fwd, total;
    for (int r = 0; r < reps + 2; ++r) {  // 2 warm-up repetitions
      torch::Tensor x = x0.clone().requires_grad_(true);
      const auto t0 = Clock::now();
      torch::Tensor y = frontier::bev::Pool(impl, x, plan);
      const auto t1 = Clock::now();
      y.backward(upstream);
      const auto t2 = Clock::now();
      if (r >= 2) {
        fwd.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        total.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
      }
      if (r == 0) {
        if (!reference.defined()) {
          reference = y.detach();
        } else {
          out["max_abs_diff"] = (y.detach() - reference).abs().max().item<double>();
        }
      }
    }
    out[impl] = {{"forward_ms", Median(fwd)},
                 {"forward_backward_ms", Median(total)},
                 {"backward_ms", Median(total) - Median(fwd)}};
  }
  out["speedup_forward"] =
      out["naive"]["forward_ms"].get<double>() / out["fused"]["forward_ms"].get<double>();
  out["speedup_forward_backward"] =
      out["naive"]["forward_backward_ms"].get<double>() / out["fused"]["forward_backward_ms"].get<double>();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, reps = 10;
  std::string preset = "all";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads")
      threads = std::stoi(argv[i + 1]);
    else if (flag == "--reps")
      reps = std::stoi(argv[i + 1]);
    else if (flag == "--preset")
      preset = argv[i + 1];
    else {
      std::cerr << "usage: bev_pool_bench [--threads N] [--reps N] [--preset small|nuscenes|all]\n";
      return 64;
    }
  }
  at::set_num_threads(threads);
  const std::vector<Preset> presets = {{"small", 6, 24, 8, 22, 32, 48, 1.0, 8, 2.0, 38.0},
                                       {"nuscenes", 6, 41, 16, 44, 64, 200, 0.5, 4, 4.0, 45.0}};
  for (const Preset& p : presets) {
    if (preset != "all" && preset != p.name) continue;
    std::cout << Run(p, reps).dump() << std::endl;
  }
  return 0;
}
