// Launchers of the CUDA kernels of the fused and depth-fused BEV pooling
// operators (bev_pool.h). Raw pointers and a stream only, so the .cu file
// compiles with nvcc alone, without LibTorch's CUDA headers. Float32 data,
// int64 plan, every pointer on the device. Built only with
// -DFRONTIER_WITH_CUDA_OPS=ON.
#pragma once

#include <cstdint>

namespace frontier::bev {

// fused: out (B, cells, C) must be zeroed by the caller; intervals write their cell.
void BevPoolForwardCuda(const float* x, const int64_t* ranks, const int64_t* interval_starts,
                        const int64_t* interval_lengths, const int64_t* interval_cells, int64_t batch,
                        int64_t points, int64_t channels, int64_t intervals, int64_t cells, float* out,
                        void* stream);

// fused: grad_x (B, P, C) must be zeroed by the caller (points outside the grid keep 0).
void BevPoolBackwardCuda(const float* grad_out, const int64_t* ranks, const int64_t* interval_starts,
                         const int64_t* interval_lengths, const int64_t* interval_cells, int64_t batch,
                         int64_t points, int64_t channels, int64_t intervals, int64_t cells, float* grad_x,
                         void* stream);

// depth_fused: the device pointers of a PoolPlan built with a FrustumShape.
struct DepthPoolPlanView {
  int64_t points = 0;        // P: depth entries per sample
  int64_t feature_rows = 0;  // F: feature rows per sample (cameras x h x w)
  int64_t cells = 0;
  // By cell (forward): `intervals` runs over `ranks` / `feature_ranks`.
  int64_t intervals = 0;
  const int64_t* ranks = nullptr;
  const int64_t* feature_ranks = nullptr;
  const int64_t* interval_starts = nullptr;
  const int64_t* interval_lengths = nullptr;
  const int64_t* interval_cells = nullptr;
  // By feature row (backward): `feature_intervals` runs over `feature_points`.
  int64_t feature_intervals = 0;
  const int64_t* feature_points = nullptr;
  const int64_t* feature_point_cells = nullptr;
  const int64_t* feature_interval_starts = nullptr;
  const int64_t* feature_interval_lengths = nullptr;
  const int64_t* feature_interval_rows = nullptr;
};

// depth_fused forward: depth (B, P), features (B, F, C) -> out (B, cells, C),
// which the caller must zero (empty cells are not written). One thread per
// (sample, interval, channel).
void DepthPoolForwardCuda(const float* depth, const float* features, const DepthPoolPlanView& plan,
                          int64_t batch, int64_t channels, float* out, void* stream);

// depth_fused backward: grad_out (B, cells, C) -> grad_depth (B, P) and
// grad_features (B, F, C), both zeroed by the caller (points outside the grid
// and rows no in-grid point uses keep 0). One warp per (sample, feature
// interval), which owns its feature row and its points' depth entries: the
// depth gradient is a warp-reduced dot product over channels, the feature
// gradient accumulates depth x grad_out over the interval. No atomics.
void DepthPoolBackwardCuda(const float* grad_out, const float* depth, const float* features,
                           const DepthPoolPlanView& plan, int64_t batch, int64_t channels, float* grad_depth,
                           float* grad_features, void* stream);

}  // namespace frontier::bev
