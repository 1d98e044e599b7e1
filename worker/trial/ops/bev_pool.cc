#include "worker/trial/ops/bev_pool.h"

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#ifdef FRONTIER_WITH_CUDA_OPS
#include <c10/cuda/CUDAStream.h>

#include "worker/trial/ops/bev_pool_cuda.h"
#endif

namespace frontier::bev {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Work per parallel task: enough intervals that scheduling overhead is small.
constexpr int64_t kGrainIntervals = 64;

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

// The plan travels through autograd as saved tensors (it holds no state of its own).
PoolPlan PlanFrom(AutogradContext* ctx) {
  PoolPlan plan;
  plan.points = ctx->saved_data["points"].toInt();
  plan.cells = ctx->saved_data["cells"].toInt();
  plan.ranks = ctx->saved_data["ranks"].toTensor();
  plan.interval_starts = ctx->saved_data["starts"].toTensor();
  plan.interval_lengths = ctx->saved_data["lengths"].toTensor();
  plan.interval_cells = ctx->saved_data["interval_cells"].toTensor();
  return plan;
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
    ctx->saved_data["points"] = plan.points;
    ctx->saved_data["cells"] = plan.cells;
    ctx->saved_data["ranks"] = plan.ranks;
    ctx->saved_data["starts"] = plan.interval_starts;
    ctx->saved_data["lengths"] = plan.interval_lengths;
    ctx->saved_data["interval_cells"] = plan.interval_cells;
    ctx->saved_data["batch"] = x.size(0);
    return FusedForward(x, plan);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const PoolPlan plan = PlanFrom(ctx);
    // FusedBackward is itself linear in the gradient but not recorded, so
    // double backward is not supported (not needed for training).
    return {FusedBackward(grads[0], plan, ctx->saved_data["batch"].toInt()), torch::Tensor()};
  }
};

}  // namespace

PoolPlan PoolPlan::To(const torch::Device& device) const {
  PoolPlan p = *this;
  for (torch::Tensor* t : {&p.point_cells, &p.valid_points, &p.valid_cells, &p.ranks, &p.interval_starts,
                           &p.interval_lengths, &p.interval_cells}) {
    *t = t->to(device);
  }
  return p;
}

PoolPlan MakePoolPlan(const torch::Tensor& point_cells, int64_t cells) {
  TORCH_CHECK(point_cells.dim() == 1, "point_cells must be 1-d");
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
  std::vector<int64_t> starts, lengths, interval_cells;
  const int64_t* sc = sorted_cells.data_ptr<int64_t>();
  const int64_t k = sorted_cells.numel();
  for (int64_t i = 0; i < k; ++i) {
    if (i == 0 || sc[i] != sc[i - 1]) {
      starts.push_back(i);
      lengths.push_back(0);
      interval_cells.push_back(sc[i]);
    }
    ++lengths.back();
  }
  auto to_tensor = [](const std::vector<int64_t>& v) {
    return torch::tensor(torch::ArrayRef<int64_t>(v), torch::kLong).reshape({static_cast<int64_t>(v.size())});
  };
  plan.interval_starts = to_tensor(starts);
  plan.interval_lengths = to_tensor(lengths);
  plan.interval_cells = to_tensor(interval_cells);
  return plan;
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
    r.Add("naive", NaivePool);
    r.Add("fused", FusedPool);
    return r;
  }();
  return registry;
}

torch::Tensor Pool(const std::string& implementation, const torch::Tensor& x, const PoolPlan& plan) {
  return PoolRegistry().At(implementation)(x, plan);
}

bool FusedPoolHasCuda() {
#ifdef FRONTIER_WITH_CUDA_OPS
  return true;
#else
  return false;
#endif
}

}  // namespace frontier::bev
