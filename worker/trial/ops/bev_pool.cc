#include "worker/trial/ops/bev_pool.h"

#include <utility>
#include <vector>

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include "worker/trial/ops/bev_pool_internal.h"
#include "worker/trial/ops/spot_check.h"

#ifdef FRONTIER_WITH_CUDA_OPS
#include <c10/cuda/CUDAStream.h>

#include "worker/trial/ops/bev_pool_cuda.h"
#endif

namespace frontier::bev {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

void CheckInputs(const torch::Tensor& x, const PoolPlan& plan) {
  TORCH_CHECK(x.dim() == 3, "BEV pooling expects features (B, P, C), got ", x.sizes());
  TORCH_CHECK(x.size(1) == plan.points, "BEV pooling: the plan has ", plan.points, " points, the features ",
              x.size(1));
}

void ForwardCpu(const torch::Tensor& x, const PoolPlan& plan, torch::Tensor& out) {
  const int64_t batch = x.size(0), points = x.size(1), channels = x.size(2), cells = plan.cells;
  const int64_t intervals = plan.interval_starts.numel();
  const int64_t* ranks = plan.ranks.data_ptr<int64_t>();
  const int64_t* starts = plan.interval_starts.data_ptr<int64_t>();
  const int64_t* lengths = plan.interval_lengths.data_ptr<int64_t>();
  const int64_t* cell_of = plan.interval_cells.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "bev_pool_forward", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const scalar_t* xp = x.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    at::parallel_for(0, batch * intervals, kGrainIntervals, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> acc(channels);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / intervals, i = task % intervals;
        std::fill(acc.begin(), acc.end(), acc_t(0));
        const scalar_t* xb = xp + b * points * channels;
        for (int64_t k = starts[i], stop = starts[i] + lengths[i]; k < stop; ++k) {
          const scalar_t* row = xb + ranks[k] * channels;
          for (int64_t c = 0; c < channels; ++c) acc[c] += static_cast<acc_t>(row[c]);
        }
        scalar_t* dst = op + (b * cells + cell_of[i]) * channels;
        for (int64_t c = 0; c < channels; ++c) dst[c] = static_cast<scalar_t>(acc[c]);
      }
    });
  });
}

void BackwardCpu(const torch::Tensor& grad_out, const PoolPlan& plan, torch::Tensor& grad_x) {
  const int64_t batch = grad_x.size(0), points = grad_x.size(1), channels = grad_x.size(2),
                cells = plan.cells;
  const int64_t intervals = plan.interval_starts.numel();
  const int64_t* ranks = plan.ranks.data_ptr<int64_t>();
  const int64_t* starts = plan.interval_starts.data_ptr<int64_t>();
  const int64_t* lengths = plan.interval_lengths.data_ptr<int64_t>();
  const int64_t* cell_of = plan.interval_cells.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, grad_x.scalar_type(), "bev_pool_backward", [&] {
    const scalar_t* gp = grad_out.data_ptr<scalar_t>();
    scalar_t* xp = grad_x.data_ptr<scalar_t>();
    at::parallel_for(0, batch * intervals, kGrainIntervals, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / intervals, i = task % intervals;
        const scalar_t* src = gp + (b * cells + cell_of[i]) * channels;
        scalar_t* xb = xp + b * points * channels;
        for (int64_t k = starts[i], stop = starts[i] + lengths[i]; k < stop; ++k) {
          std::copy(src, src + channels, xb + ranks[k] * channels);
        }
      }
    });
  });
}

torch::Tensor FusedForward(const torch::Tensor& input, const PoolPlan& plan) {
  const torch::Tensor x = input.contiguous();
  torch::Tensor out = torch::zeros({x.size(0), plan.cells, x.size(2)}, x.options());
  if (x.is_cuda()) {
#ifdef FRONTIER_WITH_CUDA_OPS
    TORCH_CHECK(x.scalar_type() == torch::kFloat, "the CUDA BEV pooling kernel takes float32 features");
    BevPoolForwardCuda(x.data_ptr<float>(), plan.ranks.data_ptr<int64_t>(),
                       plan.interval_starts.data_ptr<int64_t>(), plan.interval_lengths.data_ptr<int64_t>(),
                       plan.interval_cells.data_ptr<int64_t>(), x.size(0), x.size(1), x.size(2),
                       plan.interval_starts.numel(), plan.cells, out.data_ptr<float>(),
                       c10::cuda::getCurrentCUDAStream().stream());
    return out;
#else
    TORCH_CHECK(false, "fused BEV pooling on CUDA needs a build with -DFRONTIER_WITH_CUDA_OPS=ON");
#endif
  }
  ForwardCpu(x, plan, out);
  return out;
}

torch::Tensor FusedBackward(const torch::Tensor& grad, const PoolPlan& plan, int64_t batch) {
  const torch::Tensor g = grad.contiguous();
  torch::Tensor grad_x = torch::zeros({batch, plan.points, g.size(2)}, g.options());
  if (g.is_cuda()) {
#ifdef FRONTIER_WITH_CUDA_OPS
    TORCH_CHECK(g.scalar_type() == torch::kFloat, "the CUDA BEV pooling kernel takes float32 gradients");
    BevPoolBackwardCuda(g.data_ptr<float>(), plan.ranks.data_ptr<int64_t>(),
                        plan.interval_starts.data_ptr<int64_t>(), plan.interval_lengths.data_ptr<int64_t>(),
                        plan.interval_cells.data_ptr<int64_t>(), batch, plan.points, g.size(2),
                        plan.interval_starts.numel(), plan.cells, grad_x.data_ptr<float>(),
                        c10::cuda::getCurrentCUDAStream().stream());
    return grad_x;
#else
    TORCH_CHECK(false, "fused BEV pooling on CUDA needs a build with -DFRONTIER_WITH_CUDA_OPS=ON");
#endif
  }
  BackwardCpu(g, plan, grad_x);
  return grad_x;
}

class FusedPoolFunction : public torch::autograd::Function<FusedPoolFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const PoolPlan& plan) {
    SavePlan(ctx, plan);
    ctx->saved_data["batch"] = x.size(0);
    return FusedForward(x, plan);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const PoolPlan& plan = SavedPlanOf<PoolPlan>(ctx);
    // FusedBackward is itself linear in the gradient but not recorded, so
    // double backward is not supported (not needed for training).
    return {FusedBackward(grads[0], plan, ctx->saved_data["batch"].toInt()), torch::Tensor()};
  }
};

// The runs of equal values of a sorted 1-d int64 tensor: (starts, lengths, values).
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> Runs(const torch::Tensor& sorted) {
  std::vector<int64_t> starts, lengths, values;
  const torch::Tensor s = sorted.contiguous();
  const int64_t* v = s.data_ptr<int64_t>();
  for (int64_t i = 0, n = s.numel(); i < n; ++i) {
    if (i == 0 || v[i] != v[i - 1]) {
      starts.push_back(i);
      lengths.push_back(0);
      values.push_back(v[i]);
    }
    ++lengths.back();
  }
  auto to_tensor = [](const std::vector<int64_t>& x) {
    return torch::tensor(torch::ArrayRef<int64_t>(x), torch::kLong).reshape({static_cast<int64_t>(x.size())});
  };
  return {to_tensor(starts), to_tensor(lengths), to_tensor(values)};
}

}  // namespace

PoolPlan PoolPlan::To(const torch::Device& device) const {
  PoolPlan p = *this;
  for (torch::Tensor* t :
       {&p.point_cells, &p.valid_points, &p.valid_cells, &p.ranks, &p.interval_starts, &p.interval_lengths,
        &p.interval_cells, &p.feature_ranks, &p.feature_points, &p.feature_point_cells,
        &p.feature_interval_starts, &p.feature_interval_lengths, &p.feature_interval_rows}) {
    if (t->defined()) *t = t->to(device);
  }
  return p;
}

PoolPlan MakePoolPlan(const torch::Tensor& point_cells, int64_t cells, const FrustumShape& shape) {
  TORCH_CHECK(point_cells.dim() == 1, "point_cells must be 1-d");
  TORCH_CHECK(!shape.defined() || shape.points() == point_cells.numel(), "BEV pooling plan: the frustum shape has ",
              shape.points(), " points, point_cells ", point_cells.numel());
  PoolPlan plan;
  plan.points = point_cells.numel();
  plan.cells = cells;
  torch::Tensor pc = point_cells.to(torch::kCPU, torch::kLong).contiguous();
  pc = torch::where(pc.ge(0).logical_and(pc.lt(cells)), pc, torch::full_like(pc, -1));
  plan.point_cells = pc;
  plan.valid_points = pc.ge(0).nonzero().flatten();
  plan.valid_cells = pc.index_select(0, plan.valid_points);
  // Stable sort by cell keeps points of one cell in ascending order, so the
  // fused sum adds them in the same order as the naive index_add.
  const auto [sorted_cells, order] = plan.valid_cells.sort(/*stable=*/true, /*dim=*/0, /*descending=*/false);
  plan.ranks = plan.valid_points.index_select(0, order).contiguous();
  std::tie(plan.interval_starts, plan.interval_lengths, plan.interval_cells) = Runs(sorted_cells);
  if (!shape.defined()) return plan;

  plan.shape = shape;
  const int64_t pixels = shape.height * shape.width;
  auto feature_row = [&](const torch::Tensor& p) {
    return p.div(shape.depth_bins * pixels, "floor") * pixels + p.remainder(pixels);
  };
  plan.feature_ranks = feature_row(plan.ranks).contiguous();
  // Stable: the points of one feature row (its depth bins) stay in ascending order.
  const auto [sorted_rows, row_order] = feature_row(plan.valid_points).sort(true, 0, false);
  plan.feature_points = plan.valid_points.index_select(0, row_order).contiguous();
  plan.feature_point_cells = plan.valid_cells.index_select(0, row_order).contiguous();
  std::tie(plan.feature_interval_starts, plan.feature_interval_lengths, plan.feature_interval_rows) =
      Runs(sorted_rows);
  return plan;
}

void CheckFactors(const torch::Tensor& depth, const torch::Tensor& features, const PoolPlan& plan) {
  const FrustumShape& f = plan.shape;
  TORCH_CHECK(f.defined(), "BEV pooling of depth and features needs a plan built with the frustum's shape");
  TORCH_CHECK(depth.dim() == 5 && depth.size(1) == f.cameras && depth.size(2) == f.depth_bins &&
                  depth.size(3) == f.height && depth.size(4) == f.width,
              "BEV pooling: depth must be (B, ", f.cameras, ", ", f.depth_bins, ", ", f.height, ", ", f.width,
              "), got ", depth.sizes());
  TORCH_CHECK(features.dim() == 5 && features.size(0) == depth.size(0) && features.size(1) == f.cameras &&
                  features.size(2) == f.height && features.size(3) == f.width,
              "BEV pooling: features must be (", depth.size(0), ", ", f.cameras, ", ", f.height, ", ", f.width,
              ", C), got ", features.sizes());
  TORCH_CHECK(depth.is_floating_point() && features.is_floating_point(),
              "BEV pooling: depth and features must be floating, got ", depth.scalar_type(), " and ",
              features.scalar_type());
  TORCH_CHECK(depth.device() == features.device(), "BEV pooling: depth on ", depth.device(), ", features on ",
              features.device());
}

torch::Tensor LiftFrustum(const torch::Tensor& depth, const torch::Tensor& features) {
  TORCH_CHECK(depth.dim() == 5 && features.dim() == 5 && features.size(0) == depth.size(0) &&
                  features.size(1) == depth.size(1) && features.size(2) == depth.size(3) &&
                  features.size(3) == depth.size(4),
              "the lift takes depth (B, N, D, h, w) and features (B, N, h, w, C), got ", depth.sizes(), " and ",
              features.sizes());
  return (depth.unsqueeze(-1) * features.unsqueeze(2)).reshape({depth.size(0), -1, features.size(4)});
}

torch::Tensor NaivePool(const torch::Tensor& x, const PoolPlan& plan) {
  CheckInputs(x, plan);
  torch::Tensor selected = x.index_select(1, plan.valid_points);
  return torch::zeros({x.size(0), plan.cells, x.size(2)}, x.options())
      .index_add(1, plan.valid_cells, selected);
}

torch::Tensor FusedPool(const torch::Tensor& x, const PoolPlan& plan) {
  CheckInputs(x, plan);
  if (x.is_cuda() && x.scalar_type() != torch::kFloat) {  // the CUDA kernels are float32 only
    return FusedPoolFunction::apply(x.to(torch::kFloat), plan).to(x.scalar_type());
  }
  return FusedPoolFunction::apply(x, plan);
}

Registry<PoolVariant>& PoolRegistry() {
  static Registry<PoolVariant> registry = [] {
    Registry<PoolVariant> r("BEV pooling");
    r.Add("naive", [](const torch::Tensor& depth, const torch::Tensor& features, const PoolPlan& plan) {
      CheckFactors(depth, features, plan);
      return NaivePool(LiftFrustum(depth, features), plan);
    });
    r.Add("fused", [](const torch::Tensor& depth, const torch::Tensor& features, const PoolPlan& plan) {
      CheckFactors(depth, features, plan);
      return FusedPool(LiftFrustum(depth, features), plan);
    });
    r.Add("depth_fused", DepthFusedPool);
    return r;
  }();
  return registry;
}

namespace {

// The call of variant `variant` on inputs shaped like depth and features
// with `plan` (already on their device), as the gate and the benchmark see it.
ops::OpCall PoolCall(const std::string& variant, const torch::Tensor& depth, const torch::Tensor& features,
                     const PoolPlan& plan, std::string edge) {
  ops::OpCall call;
  call.op = "bev_pool";
  call.variant = variant;
  call.edge = std::move(edge);
  call.input_names = {"depth", "features"};
  call.inputs = {depth, features};
  call.run = [plan](const std::string& v, const std::vector<torch::Tensor>& in) {
    return PoolRegistry().At(v)(in.at(0), in.at(1), plan);
  };
  const double element = static_cast<double>(depth.element_size());
  const double depth_bytes = depth.numel() * element, feature_bytes = features.numel() * element,
               grid_bytes = static_cast<double>(depth.size(0)) * plan.cells * features.size(-1) * element;
  // Forward: both factors read, the grid zeroed and written. Backward: the
  // grid's gradient read, both factors read again (each gradient needs the
  // other factor) and both gradients written, once per pass over each.
  call.bytes_moved = [=](bool backward) {
    const double forward = depth_bytes + feature_bytes + 2 * grid_bytes;
    return backward ? forward + grid_bytes + 3 * depth_bytes + 3 * feature_bytes : forward;
  };
  if (call.edge.empty()) {
    call.edge_cases = [variant, depth, features, plan] {
      const torch::Tensor cells = plan.point_cells.to(torch::kCPU);
      const int64_t points = cells.numel();
      std::vector<std::pair<std::string, torch::Tensor>> cases;
      const torch::Tensor index = torch::arange(points, torch::kLong);
      // Most cells empty: nine points in ten moved outside the grid.
      cases.emplace_back("most cells empty", torch::where(index.remainder(10).eq(0), cells, torch::full_like(cells, -1)));
      // Every in-grid point alone in its cell (the first min(P, cells) points, to distinct cells).
      const torch::Tensor lone = torch::full_like(cells, -1);
      const int64_t n = std::min(points, plan.cells);
      lone.slice(0, 0, n).copy_(torch::arange(plan.cells - 1, plan.cells - 1 - n, -1, torch::kLong));  // no RNG
      cases.emplace_back("single-point intervals", lone);
      // Every point in one cell: one interval of P points.
      cases.emplace_back("one cell", torch::zeros_like(cells));
      // No point in the grid: the output is all zeros.
      cases.emplace_back("no point in the grid", torch::full_like(cells, -1));
      std::vector<ops::OpCall> calls;
      for (auto& [name, point_cells] : cases) {
        const PoolPlan edge_plan = MakePoolPlan(point_cells, plan.cells, plan.shape).To(depth.device());
        calls.push_back(PoolCall(variant, depth, features, edge_plan, name));
      }
      return calls;
    };
    // A small rig of odd sizes (each point's cell a fixed pattern, a fifth of
    // them outside the grid) and one of every size 1.
    call.other_shapes = [variant, depth, features] {
      const auto rig = [&](FrustumShape shape, int64_t batch, int64_t channels, int64_t cells, std::string name) {
        const torch::Tensor index = torch::arange(shape.points(), torch::kLong);
        const torch::Tensor pattern = (index * 37 + 11).remainder(cells + cells / 4);
        const torch::Tensor point_cells = torch::where(pattern.lt(cells), pattern, torch::full_like(pattern, -1));
        const PoolPlan rig_plan = MakePoolPlan(point_cells, cells, shape).To(depth.device());
        return PoolCall(
            variant,
            torch::empty({batch, shape.cameras, shape.depth_bins, shape.height, shape.width}, depth.options()),
            torch::empty({batch, shape.cameras, shape.height, shape.width, channels}, features.options()), rig_plan,
            std::move(name));
      };
      return std::vector<ops::OpCall>{
          rig(FrustumShape{3, 5, 3, 7}, 3, 5, 63, "odd sizes (3 samples, 3 cameras, 5 bins, 3x7, 5 channels, 63 cells)"),
          rig(FrustumShape{1, 1, 1, 1}, 1, 1, 1, "size 1 (1 sample, camera, bin, pixel, channel and cell)")};
    };
  }
  return call;
}

}  // namespace

torch::Tensor Pool(const std::string& implementation, const torch::Tensor& depth, const torch::Tensor& features,
                   const PoolPlan& plan) {
  const PoolVariant& variant = PoolRegistry().At(implementation);
  return ops::Dispatch([&] { return PoolCall(implementation, depth, features, plan, ""); }, {depth, features},
                       [&](const std::vector<torch::Tensor>& in) { return variant(in[0], in[1], plan); });
}

ops::Op PoolOp() {
  ops::Op op;
  op.reference = "naive";
  op.variants = [] { return PoolRegistry().Names(); };
  // Depth is a distribution over the bins (as the lift's softmax makes it),
  // features standard normal.
  op.contract =
      "op bev_pool: the lift-splat pooling of LSS. Signature: torch::Tensor Fn(const torch::Tensor& depth, const "
      "torch::Tensor& features, const frontier::bev::PoolPlan& plan). depth is (B, N, D, h, w) (a distribution "
      "over the D bins), features (B, N, h, w, C), one floating dtype on one device. Frustum point p = ((camera * D "
      "+ bin) * h + row) * w + column carries depth[b, camera, bin, row, column] * features[b, camera, row, column, "
      ":]; plan.point_cells[p] is its BEV cell (-1 outside the grid). Returns (B, plan.cells, C): per cell the sum "
      "of its points' vectors (0 for empty cells), a new tensor, differentiable in depth and features; the inputs "
      "must be left unchanged. The plan (frontier/worker/trial/ops/bev_pool.h) also has the in-grid points sorted "
      "by cell (ranks, interval_starts, interval_lengths, interval_cells) and by feature row (feature_points, "
      "feature_interval_*). Call frontier::bev::CheckFactors(depth, features, plan) first.\n"
      "Register: frontier::plugin::RegisterBevPoolVariant(\"NAME\", Fn); end the file with FRONTIER_PLUGIN(Register).";
  op.reference_source =
      "torch::Tensor Naive(const torch::Tensor& depth, const torch::Tensor& features, const PoolPlan& plan) {\n"
      "  CheckFactors(depth, features, plan);\n"
      "  // frustum (B, P, C): depth (B, N, D, h, w, 1) * features (B, N, 1, h, w, C), flattened\n"
      "  const torch::Tensor x = LiftFrustum(depth, features);\n"
      "  const torch::Tensor points = x.index_select(1, plan.valid_points);\n"
      "  return torch::zeros({x.size(0), plan.cells, x.size(2)}, x.options()).index_add(1, plan.valid_cells, points);\n"
      "}\n";
  op.random_inputs = [](const ops::OpCall& call, at::Generator& generator) {
    const torch::Tensor& depth = call.inputs.at(0);
    const torch::Tensor& features = call.inputs.at(1);
    return std::vector<torch::Tensor>{
        torch::randn(depth.sizes(), generator, torch::kFloat).softmax(2).to(depth.options()),
        torch::randn(features.sizes(), generator, torch::kFloat).to(features.options())};
  };
  return op;
}

bool FusedPoolHasCuda() {
#ifdef FRONTIER_WITH_CUDA_OPS
  return true;
#else
  return false;
#endif
}

}  // namespace frontier::bev
