// bev_pool candidate "lab_pixel_scatter" (correct, faster than naive): no sorted plan, only each point's
// cell (plan.point_cells) in frustum order. Forward: a task per (sample, 16 channels) scatters depth x
// features into its own slice of the grid. Backward: a task per pixel (feature row) gathers its depth
// bins' cell gradients: the row's feature gradient and its points' depth gradients. No atomics.
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

constexpr int64_t kChannelBlock = 16;

struct Shape {
  int64_t batch, cameras, bins, pixels, channels, cells;
  int64_t points() const { return cameras * bins * pixels; }
  int64_t rows() const { return cameras * pixels; }
};

// Point p = (camera * bins + bin) * pixels + pixel reads feature row camera * pixels + pixel.
template <typename T>
void Forward(const T* depth, const T* features, const int64_t* cell_of, const Shape& s, T* out) {
  using A = at::opmath_type<T>;
  const int64_t blocks = (s.channels + kChannelBlock - 1) / kChannelBlock;
  at::parallel_for(0, s.batch * blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> grid(s.cells * kChannelBlock);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / blocks, c0 = (task % blocks) * kChannelBlock;
      const int64_t n = std::min(kChannelBlock, s.channels - c0);
      const T* d = depth + b * s.points();
      const T* f = features + b * s.rows() * s.channels + c0;
      std::fill(grid.begin(), grid.end(), A(0));
      for (int64_t cam = 0; cam < s.cameras; ++cam) {
        for (int64_t bin = 0; bin < s.bins; ++bin) {
          const int64_t p0 = (cam * s.bins + bin) * s.pixels;
          for (int64_t px = 0; px < s.pixels; ++px) {
            const int64_t cell = cell_of[p0 + px];
            if (cell < 0) continue;
            const A w = static_cast<A>(d[p0 + px]);
            const T* __restrict row = f + (cam * s.pixels + px) * s.channels;
            A* __restrict g = grid.data() + cell * kChannelBlock;
#pragma omp simd
            for (int64_t c = 0; c < n; ++c) g[c] += w * static_cast<A>(row[c]);
          }
        }
      }
      T* o = out + b * s.cells * s.channels + c0;
      for (int64_t cell = 0; cell < s.cells; ++cell) {
        for (int64_t c = 0; c < n; ++c) o[cell * s.channels + c] = static_cast<T>(grid[cell * kChannelBlock + c]);
      }
    }
  });
}

template <typename T>
void Backward(const T* grad, const T* depth, const T* features, const int64_t* cell_of, const Shape& s,
              T* grad_depth, T* grad_features) {
  using A = at::opmath_type<T>;
  const int64_t C = s.channels;
  at::parallel_for(0, s.batch * s.rows(), 64, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(C);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / s.rows(), r = task % s.rows(), cam = r / s.pixels, px = r % s.pixels;
      const T* __restrict row = features + (b * s.rows() + r) * C;
      const T* g = grad + b * s.cells * C;
      std::fill(acc.begin(), acc.end(), A(0));
      A* __restrict a = acc.data();
      for (int64_t bin = 0; bin < s.bins; ++bin) {
        const int64_t p = (cam * s.bins + bin) * s.pixels + px, cell = cell_of[p];
        if (cell < 0) continue;  // grad_depth stays 0
        const T* __restrict gc = g + cell * C;
        const A w = static_cast<A>(depth[b * s.points() + p]);
        A dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int64_t c = 0; c < C; ++c) {
          const A gv = static_cast<A>(gc[c]);
          dot += gv * static_cast<A>(row[c]);
          a[c] += w * gv;
        }
        grad_depth[b * s.points() + p] = static_cast<T>(dot);
      }
      T* gf = grad_features + (b * s.rows() + r) * C;
      for (int64_t c = 0; c < C; ++c) gf[c] = static_cast<T>(a[c]);
    }
  });
}

Shape ShapeOf(const Tensor& depth, const Tensor& features, int64_t cells) {
  return {depth.size(0), depth.size(1), depth.size(2), depth.size(3) * depth.size(4), features.size(4), cells};
}

class PixelScatterPool : public torch::autograd::Function<PixelScatterPool> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& depth, const Tensor& features, const Tensor& point_cells,
                        int64_t cells) {
    const Tensor d = depth.contiguous(), f = features.contiguous(), pc = point_cells.contiguous();
    const Shape s = ShapeOf(d, f, cells);
    Tensor out = torch::zeros({s.batch, cells, s.channels}, f.options());
    if (out.numel() > 0) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, f.scalar_type(), "lab_pixel_scatter", [&] {
        Forward(d.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), pc.data_ptr<int64_t>(), s, out.data_ptr<scalar_t>());
      });
    }
    ctx->save_for_backward({d, f, pc});
    ctx->saved_data["cells"] = cells;
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &d = saved[0], &f = saved[1], &pc = saved[2];
    const Shape s = ShapeOf(d, f, ctx->saved_data["cells"].toInt());
    const Tensor g = grads[0].to(f.scalar_type()).contiguous();
    Tensor grad_depth = torch::zeros_like(d), grad_features = torch::zeros_like(f);
    if (d.numel() > 0 && f.numel() > 0) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, f.scalar_type(), "lab_pixel_scatter_bwd", [&] {
        Backward(g.data_ptr<scalar_t>(), d.data_ptr<scalar_t>(), f.data_ptr<scalar_t>(), pc.data_ptr<int64_t>(), s,
                 grad_depth.data_ptr<scalar_t>(), grad_features.data_ptr<scalar_t>());
      });
    }
    return {grad_depth, grad_features, Tensor(), Tensor()};
  }
};

Tensor PixelScatter(const Tensor& depth, const Tensor& features, const frontier::bev::PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  TORCH_CHECK(depth.device().is_cpu(), "lab_pixel_scatter is a CPU kernel");
  const auto dtype = at::promote_types(depth.scalar_type(), features.scalar_type());
  return PixelScatterPool::apply(depth.to(dtype), features.to(dtype), plan.point_cells, plan.cells);
}

void Register() { frontier::plugin::RegisterBevPoolVariant("lab_pixel_scatter", PixelScatter); }

}  // namespace

FRONTIER_PLUGIN(Register)
