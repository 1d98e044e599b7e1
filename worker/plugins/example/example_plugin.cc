// An example Frontier plugin (docs/plugins.md): a block family and an op
// variant that frontier-trial does not have, registered by name.
//
//  block "fused_cna":        the basic residual block with each conv -> batch
//                            norm -> ReLU as one op with its own backward
//                            (FusedConvNormAct below), not three modules.
//  bev_pool "quick_cumsum":  LSS's cumulative-sum trick: the frustum's in-grid
//                            points sorted by cell, one prefix sum (in float),
//                            each cell the difference of the sums at its
//                            interval's ends. Plain LibTorch ops: autograd
//                            derives the backward.
#include <torch/torch.h>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// conv (no bias) -> batch norm with the batch's statistics -> optional ReLU,
// forward and backward by hand. The backward is the batch-norm gradient
// dy = invstd / N * (N dxhat - sum dxhat - xhat sum(dxhat xhat)), then one
// convolution_backward for the input and weight gradients.
class FusedConvNormActFunction : public torch::autograd::Function<FusedConvNormActFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const Tensor& gamma,
                        const Tensor& beta, int64_t stride, int64_t padding, double eps, bool relu) {
    const Tensor w = weight.to(x.scalar_type());
    const Tensor y = at::conv2d(x, w, {}, {stride, stride}, {padding, padding});
    const Tensor yf = y.to(torch::kFloat);
    const Tensor mean = yf.mean({0, 2, 3}, true);
    const Tensor invstd = (yf.var({0, 2, 3}, /*unbiased=*/false, true) + eps).rsqrt();
    const Tensor xhat = (yf - mean) * invstd;
    Tensor z = xhat * gamma.to(torch::kFloat).view({1, -1, 1, 1}) + beta.to(torch::kFloat).view({1, -1, 1, 1});
    if (relu) z = z.clamp_min(0);
    ctx->save_for_backward({x, weight, gamma, xhat, invstd, z});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["relu"] = relu;
    ctx->saved_data["mean"] = mean.detach();
    ctx->saved_data["var"] = (invstd.pow(-2) - eps).detach();
    return z.to(x.scalar_type());
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &weight = saved[1], &gamma = saved[2], &xhat = saved[3], &invstd = saved[4],
                 &z = saved[5];
    const int64_t stride = ctx->saved_data["stride"].toInt(), padding = ctx->saved_data["padding"].toInt();
    Tensor g = grads[0].to(torch::kFloat);
    if (ctx->saved_data["relu"].toBool()) g = g * z.gt(0);
    const Tensor dgamma = (g * xhat).sum({0, 2, 3});
    const Tensor dbeta = g.sum({0, 2, 3});
    const Tensor dxhat = g * gamma.to(torch::kFloat).view({1, -1, 1, 1});
    const double n = static_cast<double>(xhat.numel() / xhat.size(1));
    const Tensor dy = invstd / n *
                      (n * dxhat - dxhat.sum({0, 2, 3}, true) - xhat * (dxhat * xhat).sum({0, 2, 3}, true));
    const Tensor w = weight.to(x.scalar_type());
    auto [dx, dw, unused] =
        at::convolution_backward(dy.to(x.scalar_type()), x, w, c10::nullopt, {stride, stride}, {padding, padding},
                                 {1, 1}, false, {0, 0}, 1, {true, true, false});
    return {dx, dw.to(weight.scalar_type()), dgamma.to(gamma.scalar_type()), dbeta.to(gamma.scalar_type()),
            Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

class FusedConvNormActImpl : public torch::nn::Module {
 public:
  FusedConvNormActImpl(int in, int out, int kernel, int stride, bool relu)
      : stride_(stride), padding_(kernel / 2), relu_(relu) {
    weight_ = register_parameter("weight", torch::empty({out, in, kernel, kernel}));
    torch::nn::init::kaiming_normal_(weight_, 0, torch::kFanOut, torch::kReLU);
    gamma_ = register_parameter("gamma", torch::ones({out}));
    beta_ = register_parameter("beta", torch::zeros({out}));
    running_mean_ = register_buffer("running_mean", torch::zeros({out}));
    running_var_ = register_buffer("running_var", torch::ones({out}));
  }

  Tensor forward(const Tensor& x) {
    if (!is_training()) {  // inference: the running statistics, plain ops
      Tensor y = at::conv2d(x, weight_.to(x.scalar_type()), {}, {stride_, stride_}, {padding_, padding_});
      y = at::batch_norm(y.to(torch::kFloat), gamma_, beta_, running_mean_, running_var_, false, 0.1, kEps, false);
      return (relu_ ? y.clamp_min(0) : y).to(x.scalar_type());
    }
    const Tensor out = FusedConvNormActFunction::apply(x, weight_, gamma_, beta_, stride_, padding_, kEps, relu_);
    {
      torch::NoGradGuard no_grad;  // the running statistics, as BatchNorm2d keeps them (momentum 0.1)
      const Tensor y = at::conv2d(x.detach(), weight_.detach().to(x.scalar_type()), {}, {stride_, stride_},
                                  {padding_, padding_})
                           .to(torch::kFloat);
      const double n = static_cast<double>(y.numel() / y.size(1));
      running_mean_.mul_(0.9).add_(y.mean({0, 2, 3}), 0.1);
      running_var_.mul_(0.9).add_(y.var({0, 2, 3}, false) * (n / std::max(1.0, n - 1)), 0.1);
    }
    return out;
  }

 private:
  static constexpr double kEps = 1e-5;
  int64_t stride_, padding_;
  bool relu_;
  Tensor weight_, gamma_, beta_, running_mean_, running_var_;
};
TORCH_MODULE(FusedConvNormAct);

frontier::model::BlockLayers FusedCnaBlock(const frontier::model::LayerStyle& style,
                                           const frontier::model::BlockConfig& c) {
  frontier::model::BlockLayers layers;
  layers.body = torch::nn::Sequential(FusedConvNormAct(c.in, c.out, c.kernel, c.stride, true),
                                      FusedConvNormAct(c.out, c.out, c.kernel, 1, false));
  if (c.in != c.out || c.stride != 1) {
    layers.shortcut = torch::nn::Sequential(frontier::model::ConvNormAct(style, c.in, c.out, 1, c.stride, 1, false));
  }
  layers.activate_after_sum = true;
  return layers;
}

Tensor QuickCumsumPool(const Tensor& depth, const Tensor& features, const frontier::bev::PoolPlan& plan) {
  frontier::bev::CheckFactors(depth, features, plan);
  const Tensor frustum = frontier::bev::LiftFrustum(depth, features);  // (B, P, C)
  const int64_t batch = frustum.size(0), channels = frustum.size(2);
  Tensor out = torch::zeros({batch, plan.cells, channels}, frustum.options().dtype(torch::kFloat));
  if (plan.interval_starts.numel() == 0) return out.to(frustum.scalar_type());
  const Tensor sorted = frustum.index_select(1, plan.ranks).to(torch::kFloat);
  const Tensor sums = torch::cat({torch::zeros({batch, 1, channels}, sorted.options()), sorted.cumsum(1)}, 1);
  const Tensor ends = plan.interval_starts + plan.interval_lengths;
  const Tensor per_cell = sums.index_select(1, ends) - sums.index_select(1, plan.interval_starts);
  return out.index_copy(1, plan.interval_cells, per_cell).to(frustum.scalar_type());
}

void Register() {
  frontier::plugin::RegisterBlock("fused_cna", FusedCnaBlock);
  frontier::plugin::RegisterBevPoolVariant("quick_cumsum", QuickCumsumPool);
}

}  // namespace

FRONTIER_PLUGIN(Register)
