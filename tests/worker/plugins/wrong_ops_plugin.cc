// The test plugin of tests/worker/ops_test.cc: bev_pool and attention_kernel
// variants that are wrong in the ways public kernel benchmarks were fooled
// (off by a scale, a wrong gradient, a kept output buffer, no backward), ones
// right only outside a model (the gate's calls), and a right one of each.
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

// Right where the gate and the op benchmark call it (on leaf tensors), wrong inside a model (its inputs come
// from layers before it): the forward 1% off. The spot checks in training catch it.
Tensor WrongInModel(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  const bool in_model = depth.grad_fn() != nullptr || features.grad_fn() != nullptr;
  return in_model ? Reference(depth, features, plan) * 1.01 : Reference(depth, features, plan);
}

// The same, with a right forward and the gradient of the depth 1% off inside a model.
Tensor WrongGradInModel(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  if (depth.grad_fn() == nullptr) return Reference(depth, features, plan);
  const Tensor d = depth * 1.01 - (depth * 0.01).detach();  // the same values, 1.01 times the gradient
  return Reference(d, features, plan);
}

// attention_kernel variants wrong in the same ways, and one right one.
Tensor AttentionReference(const Tensor& q, const Tensor& k, const Tensor& v) {
  return frontier::attention::NaiveAttention(q, k, v);
}

// Off by a scale: the logits scaled by 1.01 / sqrt(d) instead of 1 / sqrt(d).
Tensor AttentionScaled(const Tensor& q, const Tensor& k, const Tensor& v) {
  return AttentionReference(q * 1.01, k, v);
}

// The forward is right; the gradient of k is 1% too large.
class AttentionWrongGradFunction : public torch::autograd::Function<AttentionWrongGradFunction> {
 public:
  static Tensor forward(torch::autograd::AutogradContext* ctx, const Tensor& q, const Tensor& k,
                        const Tensor& v) {
    ctx->save_for_backward({q, k, v});
    torch::NoGradGuard no_grad;
    return AttentionReference(q, k, v);
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    std::vector<Tensor> in;
    for (const Tensor& t : saved) in.push_back(t.detach().requires_grad_(true));
    torch::AutoGradMode on(true);
    const Tensor y = AttentionReference(in[0], in[1], in[2]);
    const auto g = torch::autograd::grad({y}, in, {grads[0]});
    return {g[0], g[1] * 1.01, g[2]};
  }
};
Tensor AttentionWrongGrad(const Tensor& q, const Tensor& k, const Tensor& v) {
  return AttentionWrongGradFunction::apply(q, k, v);
}

// Computes once per shape, then hands back the buffer it kept.
Tensor AttentionCached(const Tensor& q, const Tensor& k, const Tensor& v) {
  static Tensor kept;
  if (!kept.defined() || kept.sizes() != q.sizes() || kept.scalar_type() != q.scalar_type()) {
    kept = AttentionReference(q, k, v);
  }
  return kept;
}

// Right: the chunked kernel.
Tensor AttentionRightCopy(const Tensor& q, const Tensor& k, const Tensor& v) {
  return frontier::attention::KernelRegistry().At("chunked")(q, k, v);
}

void Register() {
  frontier::plugin::RegisterBevPoolVariant("scaled", Scaled);
  frontier::plugin::RegisterBevPoolVariant("wrong_grad", WrongGrad);
  frontier::plugin::RegisterBevPoolVariant("cached", Cached);
  frontier::plugin::RegisterBevPoolVariant("detached", Detached);
  frontier::plugin::RegisterBevPoolVariant("right_copy", RightCopy);
  frontier::plugin::RegisterBevPoolVariant("wrong_in_model", WrongInModel);
  frontier::plugin::RegisterBevPoolVariant("wrong_grad_in_model", WrongGradInModel);
  frontier::plugin::RegisterAttentionKernelVariant("scaled", AttentionScaled);
  frontier::plugin::RegisterAttentionKernelVariant("wrong_grad", AttentionWrongGrad);
  frontier::plugin::RegisterAttentionKernelVariant("cached", AttentionCached);
  frontier::plugin::RegisterAttentionKernelVariant("right_copy", AttentionRightCopy);
}

}  // namespace

FRONTIER_PLUGIN(Register)
