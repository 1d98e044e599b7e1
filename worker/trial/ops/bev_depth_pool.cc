// depth_fused BEV pooling (bev_pool.h): BEVPoolv2's operator, which pools the
// lift's two factors without ever building the frustum.
#include <tuple>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include "worker/trial/ops/bev_pool.h"
#include "worker/trial/ops/bev_pool_internal.h"

#ifdef FRONTIER_WITH_CUDA_OPS
#include <c10/cuda/CUDAStream.h>

#include "worker/trial/ops/bev_pool_cuda.h"
#endif

namespace frontier::bev {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// out (B, cells, C), zeroed: one task per (sample, cell interval), which owns its cell.
template <typename scalar_t>
void ForwardCpu(const scalar_t* depth, const scalar_t* features, const PoolPlan& plan, int64_t batch,
                int64_t channels, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t points = plan.points, rows = plan.shape.feature_rows(), cells = plan.cells;
  const int64_t intervals = plan.interval_starts.numel();
  const int64_t* ranks = plan.ranks.data_ptr<int64_t>();
  const int64_t* feature_ranks = plan.feature_ranks.data_ptr<int64_t>();
  const int64_t* starts = plan.interval_starts.data_ptr<int64_t>();
  const int64_t* lengths = plan.interval_lengths.data_ptr<int64_t>();
  const int64_t* cell_of = plan.interval_cells.data_ptr<int64_t>();
  at::parallel_for(0, batch * intervals, kGrainIntervals, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(channels);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / intervals, i = task % intervals;
      const scalar_t* d = depth + b * points;
      const scalar_t* f = features + b * rows * channels;
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t k = starts[i], stop = starts[i] + lengths[i]; k < stop; ++k) {
        AddScaledRow(acc.data(), f + feature_ranks[k] * channels, static_cast<acc_t>(d[ranks[k]]), channels);
      }
      StoreRow(acc.data(), out + (b * cells + cell_of[i]) * channels, channels);
    }
  });
}

// grad_depth (B, P) and grad_features (B, F, C), zeroed: one task per (sample,
// feature interval), which owns its feature row and the depth entries of its
// points (each point has one row): both gradients in one pass over grad_out.
template <typename scalar_t>
void BackwardCpu(const scalar_t* grad_out, const scalar_t* depth, const scalar_t* features, const PoolPlan& plan,
                 int64_t batch, int64_t channels, scalar_t* grad_depth, scalar_t* grad_features) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t points = plan.points, rows = plan.shape.feature_rows(), cells = plan.cells;
  const int64_t intervals = plan.feature_interval_starts.numel();
  const int64_t* point_of = plan.feature_points.data_ptr<int64_t>();
  const int64_t* cell_of = plan.feature_point_cells.data_ptr<int64_t>();
  const int64_t* starts = plan.feature_interval_starts.data_ptr<int64_t>();
  const int64_t* lengths = plan.feature_interval_lengths.data_ptr<int64_t>();
  const int64_t* row_of = plan.feature_interval_rows.data_ptr<int64_t>();
  at::parallel_for(0, batch * intervals, kGrainIntervals, [&](int64_t begin, int64_t end) {
    std::vector<acc_t> acc(channels);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / intervals, j = task % intervals;
      const int64_t row = (b * rows + row_of[j]) * channels;
      const scalar_t* g = grad_out + b * cells * channels;
      std::fill(acc.begin(), acc.end(), acc_t(0));
      for (int64_t k = starts[j], stop = starts[j] + lengths[j]; k < stop; ++k) {
        const int64_t p = b * points + point_of[k];
        grad_depth[p] = static_cast<scalar_t>(DotAndAddScaled(acc.data(), g + cell_of[k] * channels, features + row,
                                                              static_cast<acc_t>(depth[p]), channels));
      }
      StoreRow(acc.data(), grad_features + row, channels);
    }
  });
}

#ifdef FRONTIER_WITH_CUDA_OPS
DepthPoolPlanView ViewOf(const PoolPlan& plan) {
  DepthPoolPlanView v;
  v.points = plan.points;
  v.feature_rows = plan.shape.feature_rows();
  v.cells = plan.cells;
  v.intervals = plan.interval_starts.numel();
  v.ranks = plan.ranks.data_ptr<int64_t>();
  v.feature_ranks = plan.feature_ranks.data_ptr<int64_t>();
  v.interval_starts = plan.interval_starts.data_ptr<int64_t>();
  v.interval_lengths = plan.interval_lengths.data_ptr<int64_t>();
  v.interval_cells = plan.interval_cells.data_ptr<int64_t>();
  v.feature_intervals = plan.feature_interval_starts.numel();
  v.feature_points = plan.feature_points.data_ptr<int64_t>();
  v.feature_point_cells = plan.feature_point_cells.data_ptr<int64_t>();
  v.feature_interval_starts = plan.feature_interval_starts.data_ptr<int64_t>();
  v.feature_interval_lengths = plan.feature_interval_lengths.data_ptr<int64_t>();
  v.feature_interval_rows = plan.feature_interval_rows.data_ptr<int64_t>();
  return v;
}
#endif

void CheckPlanDevice(const torch::Tensor& t, const PoolPlan& plan) {
  TORCH_CHECK(plan.ranks.device() == t.device(), "depth_fused BEV pooling: the plan is on ", plan.ranks.device(),
              ", the inputs on ", t.device(), " (PoolPlan::To moves it)");
#ifndef FRONTIER_WITH_CUDA_OPS
  TORCH_CHECK(!t.is_cuda(), "depth_fused BEV pooling on CUDA needs a build with -DFRONTIER_WITH_CUDA_OPS=ON");
#endif
}

// depth, features: contiguous, one dtype (float32 on CUDA).
torch::Tensor Forward(const torch::Tensor& depth, const torch::Tensor& features, const PoolPlan& plan) {
  CheckPlanDevice(depth, plan);
  const int64_t batch = depth.size(0), channels = features.size(4);
  torch::Tensor out = torch::zeros({batch, plan.cells, channels}, features.options());
#ifdef FRONTIER_WITH_CUDA_OPS
  if (depth.is_cuda()) {
    DepthPoolForwardCuda(depth.data_ptr<float>(), features.data_ptr<float>(), ViewOf(plan), batch, channels,
                         out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream());
    return out;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, depth.scalar_type(), "bev_depth_pool_forward", [&] {
    ForwardCpu(depth.data_ptr<scalar_t>(), features.data_ptr<scalar_t>(), plan, batch, channels,
               out.data_ptr<scalar_t>());
  });
  return out;
}

std::tuple<torch::Tensor, torch::Tensor> Backward(const torch::Tensor& grad_out, const torch::Tensor& depth,
                                                  const torch::Tensor& features, const PoolPlan& plan) {
  CheckPlanDevice(depth, plan);
  const int64_t batch = depth.size(0), channels = features.size(4);
  const torch::Tensor g = grad_out.to(features.scalar_type()).contiguous();
  torch::Tensor grad_depth = torch::zeros_like(depth), grad_features = torch::zeros_like(features);
#ifdef FRONTIER_WITH_CUDA_OPS
  if (depth.is_cuda()) {
    DepthPoolBackwardCuda(g.data_ptr<float>(), depth.data_ptr<float>(), features.data_ptr<float>(), ViewOf(plan),
                          batch, channels, grad_depth.data_ptr<float>(), grad_features.data_ptr<float>(),
                          c10::cuda::getCurrentCUDAStream().stream());
    return {grad_depth, grad_features};
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, depth.scalar_type(), "bev_depth_pool_backward", [&] {
    BackwardCpu(g.data_ptr<scalar_t>(), depth.data_ptr<scalar_t>(), features.data_ptr<scalar_t>(), plan, batch,
                channels, grad_depth.data_ptr<scalar_t>(), grad_features.data_ptr<scalar_t>());
  });
  return {grad_depth, grad_features};
}

class DepthPoolFunction : public torch::autograd::Function<DepthPoolFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& depth, const torch::Tensor& features,
                               const PoolPlan& plan) {
    const torch::Tensor d = depth.contiguous(), f = features.contiguous();
    ctx->save_for_backward({d, f});
    SavePlan(ctx, plan);
    return Forward(d, f, plan);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const tensor_list saved = ctx->get_saved_variables();
    // Backward is not recorded: double backward is not supported (not needed for training).
    auto [grad_depth, grad_features] = Backward(grads[0], saved[0], saved[1], SavedPlanOf<PoolPlan>(ctx));
    return {grad_depth, grad_features, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor DepthFusedPool(const torch::Tensor& depth, const torch::Tensor& features, const PoolPlan& plan) {
  CheckFactors(depth, features, plan);
  const torch::ScalarType dtype = at::promote_types(depth.scalar_type(), features.scalar_type());
  const torch::ScalarType compute = depth.is_cuda() ? torch::kFloat : dtype;  // the CUDA kernels are float32
  return DepthPoolFunction::apply(depth.to(compute), features.to(compute), plan).to(dtype);
}

}  // namespace frontier::bev
