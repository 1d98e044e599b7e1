// bev_pool candidate "lab_feature_grad_without_depth" (WRONG in one way: a gradient): the
// forward is the reference's sum; the hand-written backward forgets the depth factor in the
// features' gradient (sum over bins of grad[cell] instead of depth * grad[cell]); the depth
// gradient is right. The gate's gradient comparison (gradient of features) must catch it (today's does).
#include <algorithm>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;
using frontier::bev::PoolPlan;

class WrongFeatureGradPool : public torch::autograd::Function<WrongFeatureGradPool> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
    ctx->save_for_backward({depth, features, plan.valid_points, plan.valid_cells});
    return frontier::bev::NaivePool(frontier::bev::LiftFrustum(depth, features), plan);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto s = ctx->get_saved_variables();
    const Tensor &depth = s[0], &features = s[1], &valid_points = s[2], &valid_cells = s[3];
    const int64_t batch = depth.size(0), channels = features.size(4);
    // G: every in-grid point's cell gradient, in frustum order (B, N, D, h, w, C).
    Tensor G = torch::zeros({batch, depth.numel() / std::max<int64_t>(batch, 1), channels}, grads[0].options());
    G.index_copy_(1, valid_points, grads[0].index_select(1, valid_cells));
    G = G.view({batch, depth.size(1), depth.size(2), depth.size(3), depth.size(4), channels});
    const Tensor grad_depth = (G * features.unsqueeze(2)).sum(-1);
    const Tensor grad_features = G.sum(2);  // the bug: should be (G * depth.unsqueeze(-1)).sum(2)
    return {grad_depth, grad_features, Tensor()};
  }
};

Tensor FeatureGradWithoutDepth(const Tensor& depth, const Tensor& features, const PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  const auto dtype = at::promote_types(depth.scalar_type(), features.scalar_type());
  return WrongFeatureGradPool::apply(depth.to(dtype), features.to(dtype), plan);
}

void Register() {
  frontier::plugin::RegisterBevPoolVariant("lab_feature_grad_without_depth", FeatureGradWithoutDepth);
}

}  // namespace

FRONTIER_PLUGIN(Register)
