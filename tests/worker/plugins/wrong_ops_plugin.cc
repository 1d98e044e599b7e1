// The test plugin of tests/worker/ops_test.cc: bev_pool variants that are
// wrong in the ways public kernel benchmarks were fooled (off by a scale, a
// wrong gradient, a kept output buffer, no backward), and one right one.
// Loading a second copy of it registers its names twice.
#include <torch/torch.h>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using frontier::bev::PoolPlan;

Tensor Reference(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  return frontier::bev::PoolRegistry().At("naive")(depth, features, plan);
}

// Off by a scale of 1.001: a relative error of 1e-3.
Tensor Scaled(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  return Reference(depth, features, plan) * 1.001;
}

// The forward is right; the gradient of the features is 1% too large.
class WrongGradFunction : public torch::autograd::Function<WrongGradFunction> {
 public:
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& depth, const Tensor& features,
                        const PoolPlan* plan) {
    ctx->save_for_backward({depth, features});
    ctx->saved_data["plan"] = reinterpret_cast<int64_t>(plan);
    torch::NoGradGuard no_grad;
    return Reference(depth, features, *plan);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto* plan = reinterpret_cast<const PoolPlan*>(ctx->saved_data["plan"].toInt());
    const Tensor d = saved[0].detach().requires_grad_(true), f = saved[1].detach().requires_grad_(true);
    torch::AutoGradMode on(true);
    const Tensor y = Reference(d, f, *plan);
    const auto g = torch::autograd::grad({y}, {d, f}, {grads[0]});
    return {g[0], g[1] * 1.01, Tensor()};
  }
};
Tensor WrongGrad(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  return WrongGradFunction::apply(depth, features, &plan);
}

// Computes once, then hands back the buffer it kept.
Tensor Cached(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  static Tensor kept;
  if (!kept.defined() || kept.sizes() != torch::IntArrayRef{depth.size(0), plan.cells, features.size(-1)}) {
    kept = Reference(depth, features, plan);
  }
  return kept;
}

// Right values, but the output does not require grad (no backward).
Tensor Detached(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  return Reference(depth, features, plan).detach();
}

// Right: the reference computed in another order (the interval variant).
Tensor RightCopy(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  return frontier::bev::PoolRegistry().At("fused")(depth, features, plan);
}

void Register() {
  frontier::plugin::RegisterBevPoolVariant("scaled", Scaled);
  frontier::plugin::RegisterBevPoolVariant("wrong_grad", WrongGrad);
  frontier::plugin::RegisterBevPoolVariant("cached", Cached);
  frontier::plugin::RegisterBevPoolVariant("detached", Detached);
  frontier::plugin::RegisterBevPoolVariant("right_copy", RightCopy);
}

}  // namespace

FRONTIER_PLUGIN(Register)
