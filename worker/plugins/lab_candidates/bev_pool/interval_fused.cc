// bev_pool candidate "lab_interval_fused" (correct, faster than naive): no frustum. Forward: a task per
// (sample, cell interval) sums depth[point] * features[its pixel row] into its cell. Backward: a task per
// sample walks the same intervals once: each point's depth gradient (a dot product with its cell's
// gradient) and its row's feature gradient, accumulated in the task's own buffer (no atomics).
#include <algorithm>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The plan's cell intervals and the sizes, as raw pointers (the tensors outlive the call).
struct View {
  const int64_t *ranks, *rows, *starts, *lengths, *cells;
  int64_t intervals, batch, points, feature_rows, grid_cells, channels;
};

template <typename T>
void Forward(const T* depth, const T* features, const View& v, T* out) {
  using A = at::opmath_type<T>;
  at::parallel_for(0, v.batch * v.intervals, 32, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(v.channels);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / v.intervals, i = task % v.intervals, C = v.channels;
      const T* d = depth + b * v.points;
      const T* f = features + b * v.feature_rows * C;
      std::fill(acc.begin(), acc.end(), A(0));
      A* __restrict a = acc.data();
      for (int64_t k = v.starts[i], stop = k + v.lengths[i]; k < stop; ++k) {
        const A w = static_cast<A>(d[v.ranks[k]]);
        const T* __restrict row = f + v.rows[k] * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) a[c] += w * static_cast<A>(row[c]);
      }
      T* o = out + (b * v.grid_cells + v.cells[i]) * C;
      for (int64_t c = 0; c < C; ++c) o[c] = static_cast<T>(a[c]);
    }
  });
}

template <typename T>
void Backward(const T* grad, const T* depth, const T* features, const View& v, T* grad_depth, T* grad_features) {
  using A = at::opmath_type<T>;
  const int64_t C = v.channels;
  at::parallel_for(0, v.batch, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(v.feature_rows * C);
    for (int64_t b = begin; b < end; ++b) {
      const T* g = grad + b * v.grid_cells * C;
      const T* d = depth + b * v.points;
      const T* f = features + b * v.feature_rows * C;
      T* gd = grad_depth + b * v.points;
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t i = 0; i < v.intervals; ++i) {
        const T* __restrict gc = g + v.cells[i] * C;
        for (int64_t k = v.starts[i], stop = k + v.lengths[i]; k < stop; ++k) {
          const T* __restrict row = f + v.rows[k] * C;
          A* __restrict a = acc.data() + v.rows[k] * C;
          const A w = static_cast<A>(d[v.ranks[k]]);
          A dot = 0;
#pragma omp simd reduction(+ : dot)
          for (int64_t c = 0; c < C; ++c) {
            const A gv = static_cast<A>(gc[c]);
            dot += gv * static_cast<A>(row[c]);
            a[c] += w * gv;
          }
          gd[v.ranks[k]] = static_cast<T>(dot);
        }
      }
      T* gf = grad_features + b * v.feature_rows * C;
      for (int64_t x = 0; x < v.feature_rows * C; ++x) gf[x] = static_cast<T>(acc[x]);
    }
  });
}

View ViewOf(const Tensor& ranks, const Tensor& rows, const Tensor& starts, const Tensor& lengths,
            const Tensor& cells, const Tensor& depth, const Tensor& features, int64_t grid_cells) {
  return {ranks.data_ptr<int64_t>(),  rows.data_ptr<int64_t>(), starts.data_ptr<int64_t>(),
          lengths.data_ptr<int64_t>(), cells.data_ptr<int64_t>(), starts.numel(),
          depth.size(0), depth.size(1) * depth.size(2) * depth.size(3) * depth.size(4),
          features.size(1) * features.size(2) * features.size(3), grid_cells, features.size(4)};
}

class IntervalFusedPool : public torch::autograd::Function<IntervalFusedPool> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& depth, const Tensor& features,
                        const frontier::bev::PoolPlan& plan) {
    const Tensor d = depth.contiguous(), f = features.contiguous();
    Tensor out = torch::zeros({d.size(0), plan.cells, f.size(4)}, f.options());
    const View v = ViewOf(plan.ranks, plan.feature_ranks, plan.interval_starts, plan.interval_lengths,
                          plan.interval_cells, d, f, plan.cells);
    if (out.numel() > 0) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, f.scalar_type(), "lab_interval_fused", [&] {
        Forward(d.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), v, out.data_ptr<scalar_t>());
      });
    }
    ctx->save_for_backward({d, f, plan.ranks, plan.feature_ranks, plan.interval_starts, plan.interval_lengths,
                            plan.interval_cells});
    ctx->saved_data["cells"] = plan.cells;
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const Tensor &d = s[0], &f = s[1];
    const Tensor g = grads[0].to(f.scalar_type()).contiguous();
    Tensor grad_depth = torch::zeros_like(d), grad_features = torch::zeros_like(f);
    const View v = ViewOf(s[2], s[3], s[4], s[5], s[6], d, f, ctx->saved_data["cells"].toInt());
    if (d.numel() > 0 && f.numel() > 0) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, f.scalar_type(), "lab_interval_fused_bwd", [&] {
        Backward(g.data_ptr<scalar_t>(), d.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), v,
                 grad_depth.data_ptr<scalar_t>(), grad_features.data_ptr<scalar_t>());
      });
    }
    return {grad_depth, grad_features, Tensor()};
  }
};

Tensor IntervalFused(const Tensor& depth, const Tensor& features, const frontier::bev::PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  TORCH_CHECK(depth.device().is_cpu(), "lab_interval_fused is a CPU kernel");
  const auto dtype = at::promote_types(depth.scalar_type(), features.scalar_type());
  return IntervalFusedPool::apply(depth.to(dtype), features.to(dtype), plan);
}

void Register() { frontier::plugin::RegisterBevPoolVariant("lab_interval_fused", IntervalFused); }

}  // namespace

FRONTIER_PLUGIN(Register)
