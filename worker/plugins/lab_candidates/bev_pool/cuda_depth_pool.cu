// bev_pool candidate "lab_cuda_depth_pool" (.cu, for GPU machines; float32; compiled here, never run):
// depth-fused pooling without the frustum. Forward: a thread per (sample, cell interval, channel).
// Backward: a warp per (sample, in-grid point) for the depth gradient (warp-reduced dot product), a
// thread per (sample, feature-row interval, channel) for the feature gradient. No atomics.
#include <algorithm>

#include <cuda_runtime.h>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using frontier::bev::PoolPlan;

constexpr int kThreads = 256;

// Debian's LibTorch is a CPU build whose c10/cuda headers are incomplete, so the kernels run on
// the legacy default stream (LibTorch's current stream unless the caller has switched streams).
constexpr cudaStream_t kStream = 0;

void CheckLaunch() {
  const cudaError_t e = cudaGetLastError();
  TORCH_CHECK(e == cudaSuccess, "lab_cuda_depth_pool: kernel launch failed: ", cudaGetErrorString(e));
}

__global__ void ForwardKernel(const float* depth, const float* features, const int64_t* ranks,
                              const int64_t* rows, const int64_t* starts, const int64_t* lengths,
                              const int64_t* cells, int64_t batch, int64_t intervals, int64_t points,
                              int64_t feature_rows, int64_t grid_cells, int64_t C, float* out) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= batch * intervals * C) return;
  const int64_t c = idx % C, i = (idx / C) % intervals, b = idx / (C * intervals);
  const float* d = depth + b * points;
  const float* f = features + b * feature_rows * C + c;
  float acc = 0.f;
  for (int64_t k = starts[i], stop = starts[i] + lengths[i]; k < stop; ++k) acc += d[ranks[k]] * f[rows[k] * C];
  out[(b * grid_cells + cells[i]) * C + c] = acc;
}

// grad_depth[b, ranks[k]] = dot(grad[b, cell of k], features[b, row of k]): one warp per (b, k).
__global__ void DepthGradKernel(const float* grad, const float* features, const int64_t* ranks,
                                const int64_t* rows, const int64_t* point_cells, int64_t batch,
                                int64_t valid, int64_t points, int64_t feature_rows, int64_t grid_cells,
                                int64_t C, float* grad_depth) {
  const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= batch * valid) return;  // whole warps exit together
  const int64_t b = warp / valid, k = warp % valid;
  const float* g = grad + (b * grid_cells + point_cells[ranks[k]]) * C;
  const float* f = features + (b * feature_rows + rows[k]) * C;
  float dot = 0.f;
  for (int64_t c = lane; c < C; c += 32) dot += g[c] * f[c];
  for (int offset = 16; offset > 0; offset /= 2) dot += __shfl_down_sync(0xffffffffu, dot, offset);
  if (lane == 0) grad_depth[b * points + ranks[k]] = dot;
}

// grad_features[b, row, c] = sum over the row's points of depth * grad[b, their cell, c].
__global__ void FeatureGradKernel(const float* grad, const float* depth, const int64_t* fpoints,
                                  const int64_t* fcells, const int64_t* starts, const int64_t* lengths,
                                  const int64_t* row_of, int64_t batch, int64_t intervals, int64_t points,
                                  int64_t feature_rows, int64_t grid_cells, int64_t C, float* grad_features) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (idx >= batch * intervals * C) return;
  const int64_t c = idx % C, j = (idx / C) % intervals, b = idx / (C * intervals);
  const float* g = grad + b * grid_cells * C + c;
  float acc = 0.f;
  for (int64_t k = starts[j], stop = starts[j] + lengths[j]; k < stop; ++k) {
    acc += depth[b * points + fpoints[k]] * g[fcells[k] * C];
  }
  grad_features[(b * feature_rows + row_of[j]) * C + c] = acc;
}

unsigned Blocks(int64_t threads) { return static_cast<unsigned>((threads + kThreads - 1) / kThreads); }

class CudaDepthPool : public torch::autograd::Function<CudaDepthPool> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
    const Tensor d = depth.contiguous(), f = features.contiguous();
    const int64_t B = d.size(0), C = f.size(4), I = plan.interval_starts.numel();
    Tensor out = torch::zeros({B, plan.cells, C}, f.options());
    if (B * I * C > 0) {
      ForwardKernel<<<Blocks(B * I * C), kThreads, 0, kStream>>>(
          d.data_ptr<float>(), f.data_ptr<float>(), plan.ranks.data_ptr<int64_t>(),
          plan.feature_ranks.data_ptr<int64_t>(), plan.interval_starts.data_ptr<int64_t>(),
          plan.interval_lengths.data_ptr<int64_t>(), plan.interval_cells.data_ptr<int64_t>(), B, I, plan.points,
          plan.shape.feature_rows(), plan.cells, C, out.data_ptr<float>());
      CheckLaunch();
    }
    ctx->save_for_backward({d, f, plan.ranks, plan.feature_ranks, plan.point_cells, plan.feature_points,
                            plan.feature_point_cells, plan.feature_interval_starts, plan.feature_interval_lengths,
                            plan.feature_interval_rows});
    ctx->saved_data["cells"] = plan.cells;
    ctx->saved_data["rows"] = plan.shape.feature_rows();
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const Tensor &d = s[0], &f = s[1];
    const Tensor g = grads[0].to(torch::kFloat).contiguous();
    const int64_t B = d.size(0), C = f.size(4), P = d.numel() / std::max<int64_t>(B, 1), K = s[2].numel(),
                  J = s[7].numel(), cells = ctx->saved_data["cells"].toInt(), F = ctx->saved_data["rows"].toInt();
    Tensor grad_depth = torch::zeros_like(d), grad_features = torch::zeros_like(f);
    if (B * K > 0 && C > 0) {
      DepthGradKernel<<<Blocks(B * K * 32), kThreads, 0, kStream>>>(
          g.data_ptr<float>(), f.data_ptr<float>(), s[2].data_ptr<int64_t>(), s[3].data_ptr<int64_t>(),
          s[4].data_ptr<int64_t>(), B, K, P, F, cells, C, grad_depth.data_ptr<float>());
      CheckLaunch();
      FeatureGradKernel<<<Blocks(B * J * C), kThreads, 0, kStream>>>(
          g.data_ptr<float>(), d.data_ptr<float>(), s[5].data_ptr<int64_t>(), s[6].data_ptr<int64_t>(),
          s[7].data_ptr<int64_t>(), s[8].data_ptr<int64_t>(), s[9].data_ptr<int64_t>(), B, J, P, F, cells, C,
          grad_features.data_ptr<float>());
      CheckLaunch();
    }
    return {grad_depth, grad_features, Tensor()};
  }
};

Tensor CudaDepthPooling(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  TORCH_CHECK(depth.is_cuda() && plan.ranks.is_cuda(), "lab_cuda_depth_pool needs CUDA tensors and a CUDA plan");
  const auto dtype = at::promote_types(depth.scalar_type(), features.scalar_type());
  return CudaDepthPool::apply(depth.to(torch::kFloat), features.to(torch::kFloat), plan).to(dtype);
}

void Register() { frontier::plugin::RegisterBevPoolVariant("lab_cuda_depth_pool", CudaDepthPooling); }

}  // namespace

FRONTIER_PLUGIN(Register)
