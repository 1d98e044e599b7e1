#include "worker/trial/model/neck.h"

namespace frontier::model {
namespace nn = torch::nn;
namespace F = torch::nn::functional;

namespace {

constexpr double kFusionEps = 1e-4;  // EfficientDet's epsilon of fast normalized fusion

// `x` at the spatial size of `like`: nearest upsampling when it is coarser,
// adaptive max pooling when it is finer.
torch::Tensor Resized(const torch::Tensor& x, const torch::Tensor& like) {
  const int64_t h = like.size(2), w = like.size(3);
  if (x.size(2) == h && x.size(3) == w) return x;
  if (x.size(2) <= h && x.size(3) <= w) {
    return F::interpolate(x, F::InterpolateFuncOptions().size(std::vector<int64_t>{h, w}).mode(torch::kNearest));
  }
  return F::adaptive_max_pool2d(x, F::AdaptiveMaxPool2dFuncOptions({h, w}));
}

}  // namespace

FusionNodeImpl::FusionNodeImpl(const LayerStyle& style, int inputs, int channels) {
  weights = register_parameter("weights", torch::ones({inputs}));
  depthwise_ = register_module(
      "depthwise", nn::Conv2d(nn::Conv2dOptions(channels, channels, 3).padding(1).groups(channels).bias(false)));
  pointwise_ = register_module("pointwise", ConvNormAct(style, channels, channels, 1, 1, 1, true));
}

torch::Tensor FusionNodeImpl::NormalizedWeights() const {
  const torch::Tensor w = torch::relu(weights);
  return w / (w.sum() + kFusionEps);
}

torch::Tensor FusionNodeImpl::forward(const std::vector<torch::Tensor>& inputs) {
  TORCH_CHECK(static_cast<int64_t>(inputs.size()) == weights.size(0), "fusion node of ", weights.size(0),
              " inputs given ", inputs.size());
  const torch::Tensor w = NormalizedWeights();
  torch::Tensor fused = inputs[0] * w[0].to(inputs[0].scalar_type());
  for (size_t j = 1; j < inputs.size(); ++j) fused = fused + inputs[j] * w[j].to(inputs[j].scalar_type());
  return pointwise_(depthwise_(fused));
}

NeckImpl::NeckImpl(const std::string& kind, const LayerStyle& style, const std::vector<int>& in_channels,
                   int channels, int repeats)
    : kind_(kind), levels_(static_cast<int>(in_channels.size())) {
  TORCH_CHECK(kind == "fpn" || kind == "bifpn", "unknown neck '", kind, "'");
  TORCH_CHECK(levels_ >= 2, "a neck fuses at least 2 levels, got ", levels_);
  for (int i = 0; i < levels_; ++i) {
    laterals_.push_back(register_module("lateral" + std::to_string(i),
                                        ConvNormAct(style, in_channels[i], channels, 1, 1, 1, false)));
  }
  if (kind == "fpn") {
    fpn_out_ = register_module("out", ConvNormAct(style, channels, channels, 3, 1, 1, true));
    return;
  }
  for (int r = 0; r < repeats; ++r) {
    std::vector<FusionNode> td, bu;
    for (int i = 0; i + 1 < levels_; ++i) {  // td_i for levels 0..L-2; bottom-up o_{i+1}
      td.push_back(register_module("layer" + std::to_string(r) + "_td" + std::to_string(i),
                                   FusionNode(style, 2, channels)));
      const int inputs = i + 2 < levels_ ? 3 : 2;  // the top level has no td node
      bu.push_back(register_module("layer" + std::to_string(r) + "_bu" + std::to_string(i + 1),
                                   FusionNode(style, inputs, channels)));
    }
    top_down_.push_back(td);
    bottom_up_.push_back(bu);
  }
  bifpn_out_ = register_module("out", FusionNode(style, levels_, channels));
}

torch::Tensor NeckImpl::forward(const std::vector<torch::Tensor>& levels) {
  TORCH_CHECK(static_cast<int>(levels.size()) == levels_, "the neck fuses ", levels_, " levels, given ",
              levels.size());
  std::vector<torch::Tensor> p;
  for (int i = 0; i < levels_; ++i) p.push_back(laterals_[i](levels[i]));
  return kind_ == "fpn" ? Fpn(std::move(p)) : BiFpn(std::move(p));
}

torch::Tensor NeckImpl::Fpn(std::vector<torch::Tensor> p) {
  for (int i = levels_ - 2; i >= 0; --i) p[i] = p[i] + Resized(p[i + 1], p[i]);
  return fpn_out_(p[0]);
}

torch::Tensor NeckImpl::BiFpn(std::vector<torch::Tensor> p) {
  const int top = levels_ - 1;
  for (size_t r = 0; r < top_down_.size(); ++r) {
    std::vector<torch::Tensor> td(levels_), out(levels_);
    td[top] = p[top];
    for (int i = top - 1; i >= 0; --i) td[i] = top_down_[r][i]->forward({p[i], Resized(td[i + 1], p[i])});
    out[0] = td[0];
    for (int i = 1; i <= top; ++i) {
      const torch::Tensor below = Resized(out[i - 1], p[i]);
      out[i] = i < top ? bottom_up_[r][i - 1]->forward({p[i], td[i], below}) : bottom_up_[r][i - 1]->forward({p[i], below});
    }
    p = std::move(out);
  }
  std::vector<torch::Tensor> gathered = {p[0]};
  for (int i = 1; i <= top; ++i) gathered.push_back(Resized(p[i], p[0]));
  return bifpn_out_->forward(gathered);
}

}  // namespace frontier::model
