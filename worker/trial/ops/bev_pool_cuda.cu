#include "worker/trial/ops/bev_pool_cuda.h"

#include <cuda_runtime.h>

namespace frontier::bev {
namespace {

constexpr int kThreads = 256;

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

}  // namespace frontier::bev
