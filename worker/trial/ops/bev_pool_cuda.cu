#include "worker/trial/ops/bev_pool_cuda.h"

#include <cuda_runtime.h>

namespace frontier::bev {
namespace {

constexpr int kThreads = 256;  // a multiple of kWarp
constexpr int kWarp = 32;

// One thread per (sample, interval, channel): sums the interval's points into
// its cell. Consecutive threads read consecutive channels of one point.
__global__ void ForwardKernel(const float* __restrict__ x, const int64_t* __restrict__ ranks,
                              const int64_t* __restrict__ starts, const int64_t* __restrict__ lengths,
                              const int64_t* __restrict__ cells_of, int64_t batch, int64_t points,
                              int64_t channels, int64_t intervals, int64_t cells, float* __restrict__ out) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= batch * intervals * channels) return;
  const int64_t c = idx % channels;
  const int64_t i = (idx / channels) % intervals;
  const int64_t b = idx / (channels * intervals);
  const float* xb = x + b * points * channels;
  float acc = 0;
  const int64_t end = starts[i] + lengths[i];
  for (int64_t k = starts[i]; k < end; ++k) acc += xb[ranks[k] * channels + c];
  out[(b * cells + cells_of[i]) * channels + c] = acc;
}

// The gather: every point of an interval receives its cell's gradient.
__global__ void BackwardKernel(const float* __restrict__ grad_out, const int64_t* __restrict__ ranks,
                               const int64_t* __restrict__ starts, const int64_t* __restrict__ lengths,
                               const int64_t* __restrict__ cells_of, int64_t batch, int64_t points,
                               int64_t channels, int64_t intervals, int64_t cells, float* __restrict__ grad_x) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= batch * intervals * channels) return;
  const int64_t c = idx % channels;
  const int64_t i = (idx / channels) % intervals;
  const int64_t b = idx / (channels * intervals);
  const float g = grad_out[(b * cells + cells_of[i]) * channels + c];
  float* gb = grad_x + b * points * channels;
  const int64_t end = starts[i] + lengths[i];
  for (int64_t k = starts[i]; k < end; ++k) gb[ranks[k] * channels + c] = g;
}

// depth_fused forward, one thread per (sample, interval, channel): BEVPoolv2's
// sum of depth[point] x features[row of the point] over the interval.
// Consecutive threads read consecutive channels of one feature row.
__global__ void DepthForwardKernel(const float* __restrict__ depth, const float* __restrict__ features,
                                   DepthPoolPlanView plan, int64_t batch, int64_t channels,
                                   float* __restrict__ out) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= batch * plan.intervals * channels) return;
  const int64_t c = idx % channels;
  const int64_t i = (idx / channels) % plan.intervals;
  const int64_t b = idx / (channels * plan.intervals);
  const float* d = depth + b * plan.points;
  const float* f = features + b * plan.feature_rows * channels;
  float acc = 0;
  const int64_t end = plan.interval_starts[i] + plan.interval_lengths[i];
  for (int64_t k = plan.interval_starts[i]; k < end; ++k) {
    acc += d[plan.ranks[k]] * f[plan.feature_ranks[k] * channels + c];
  }
  out[(b * plan.cells + plan.interval_cells[i]) * channels + c] = acc;
}

// depth_fused backward, one warp per (sample, feature interval). The warp
// index is the same for all lanes (blocks are whole warps), so a warp returns
// or stays as a whole and the full-mask shuffles below see all 32 lanes.
__global__ void DepthBackwardKernel(const float* __restrict__ grad_out, const float* __restrict__ depth,
                                    const float* __restrict__ features, DepthPoolPlanView plan, int64_t batch,
                                    int64_t channels, float* __restrict__ grad_depth,
                                    float* __restrict__ grad_features) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / kWarp;
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  if (warp >= batch * plan.feature_intervals) return;
  const int64_t b = warp / plan.feature_intervals, j = warp % plan.feature_intervals;
  const int64_t row = (b * plan.feature_rows + plan.feature_interval_rows[j]) * channels;
  const float* f = features + row;
  float* gf = grad_features + row;  // this warp's row; lane l owns channels l, l + 32, ...
  const int64_t end = plan.feature_interval_starts[j] + plan.feature_interval_lengths[j];
  for (int64_t k = plan.feature_interval_starts[j]; k < end; ++k) {
    const int64_t p = b * plan.points + plan.feature_points[k];
    const float* g = grad_out + (b * plan.cells + plan.feature_point_cells[k]) * channels;
    const float dp = depth[p];
    float partial = 0;
    for (int64_t c = lane; c < channels; c += kWarp) {
      const float gc = g[c];
      partial += gc * f[c];
      gf[c] += dp * gc;
    }
    for (int offset = kWarp / 2; offset > 0; offset /= 2) partial += __shfl_down_sync(0xffffffffu, partial, offset);
    if (lane == 0) grad_depth[p] = partial;
  }
}

int64_t Blocks(int64_t work) { return (work + kThreads - 1) / kThreads; }

}  // namespace

void BevPoolForwardCuda(const float* x, const int64_t* ranks, const int64_t* interval_starts,
                        const int64_t* interval_lengths, const int64_t* interval_cells, int64_t batch,
                        int64_t points, int64_t channels, int64_t intervals, int64_t cells, float* out,
                        void* stream) {
  const int64_t work = batch * intervals * channels;
  if (work == 0) return;
  ForwardKernel<<<Blocks(work), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x, ranks, interval_starts, interval_lengths, interval_cells, batch, points, channels, intervals, cells, out);
}

void BevPoolBackwardCuda(const float* grad_out, const int64_t* ranks, const int64_t* interval_starts,
                         const int64_t* interval_lengths, const int64_t* interval_cells, int64_t batch,
                         int64_t points, int64_t channels, int64_t intervals, int64_t cells, float* grad_x,
                         void* stream) {
  const int64_t work = batch * intervals * channels;
  if (work == 0) return;
  BackwardKernel<<<Blocks(work), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      grad_out, ranks, interval_starts, interval_lengths, interval_cells, batch, points, channels, intervals, cells,
      grad_x);
}

void DepthPoolForwardCuda(const float* depth, const float* features, const DepthPoolPlanView& plan,
                          int64_t batch, int64_t channels, float* out, void* stream) {
  const int64_t work = batch * plan.intervals * channels;
  if (work == 0) return;
  DepthForwardKernel<<<Blocks(work), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(depth, features, plan,
                                                                                       batch, channels, out);
}

void DepthPoolBackwardCuda(const float* grad_out, const float* depth, const float* features,
                           const DepthPoolPlanView& plan, int64_t batch, int64_t channels, float* grad_depth,
                           float* grad_features, void* stream) {
  const int64_t work = batch * plan.feature_intervals * kWarp;
  if (work == 0 || channels == 0) return;
  DepthBackwardKernel<<<Blocks(work), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      grad_out, depth, features, plan, batch, channels, grad_depth, grad_features);
}

}  // namespace frontier::bev
