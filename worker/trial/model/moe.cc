#include "worker/trial/model/moe.h"

#include <ATen/record_function.h>

#include <cmath>

namespace frontier::model {
namespace nn = torch::nn;

MoeMlpImpl::MoeMlpImpl(const MoeSpec& spec, int channels, int hidden, const std::string& norm,
                       std::string activation)
    : spec_(spec), activation_(std::move(activation)) {
  TORCH_CHECK(spec.experts >= 1 && spec.top_k >= 1 && spec.top_k <= spec.experts,
              "moe: top_k must be in [1, experts], got top_k ", spec.top_k, " of ", spec.experts);
  if (norm != "none") norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({channels})));
  router = register_module("router", nn::Linear(channels, spec.experts));
  // Each expert initialized as nn::Linear would be (uniform +-1/sqrt(fan_in)).
  const int64_t e = spec.experts;
  const double bound1 = 1.0 / std::sqrt(static_cast<double>(channels)),
               bound2 = 1.0 / std::sqrt(static_cast<double>(hidden));
  w1 = register_parameter("w1", torch::empty({e, channels, hidden}).uniform_(-bound1, bound1));
  b1 = register_parameter("b1", torch::empty({e, 1, hidden}).uniform_(-bound1, bound1));
  w2 = register_parameter("w2", torch::empty({e, hidden, channels}).uniform_(-bound2, bound2));
  b2 = register_parameter("b2", torch::empty({e, 1, channels}).uniform_(-bound2, bound2));
}

int64_t MoeMlpImpl::Capacity(int64_t tokens) const {
  return static_cast<int64_t>(
      std::ceil(spec_.capacity_factor * static_cast<double>(tokens * spec_.top_k) / spec_.experts - 1e-9));
}

torch::Tensor MoeMlpImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  torch::Tensor tokens = x.permute({0, 2, 3, 1}).reshape({b * h * w, c});  // a view when channels_last
  return Route(tokens).view({b, h, w, c}).permute({0, 3, 1, 2});
}

torch::Tensor MoeMlpImpl::Route(const torch::Tensor& input) {
  const int64_t t = input.size(0), c = input.size(1), e = spec_.experts, k = spec_.top_k;
  const int64_t hidden = w1.size(2), capacity = Capacity(t);
  const torch::Tensor x = norm_ ? norm_(InParameterDtype(input, norm_->weight)) : input;
  const torch::Tensor probs = torch::softmax(router(x).to(torch::kFloat), -1);  // (T, E), fp32
  auto [top, expert] = probs.topk(k, -1);                                       // (T, k), best first
  const torch::Tensor gate = k > 1 ? top / top.sum(-1, true) : top;

  // Slots in priority order: choice-major (every first choice, then every second ...).
  const torch::Tensor order_expert = expert.t().reshape({k * t});  // (kT)
  const torch::Tensor one_hot = torch::one_hot(order_expert, e);   // (kT, E)
  const torch::Tensor position = (one_hot.cumsum(0) - 1).gather(1, order_expert.unsqueeze(1)).squeeze(1);
  const torch::Tensor assigned = position.lt(capacity);
  if (is_training() && spec_.aux_loss_weight > 0) {
    const torch::Tensor f = one_hot.to(torch::kFloat).mean(0), p = probs.mean(0);
    aux_ = spec_.aux_loss_weight * e * (f * p).sum();
  }

  const torch::Tensor kept = assigned.nonzero().squeeze(1);
  const torch::Tensor token = torch::arange(t, expert.options()).repeat({k}).index_select(0, kept);
  const torch::Tensor slot = order_expert.index_select(0, kept) * capacity + position.index_select(0, kept);
  routing_ = {t, capacity, kept.size(0), expert, gate, assigned.view({k, t}).t()};

  torch::Tensor slots = torch::zeros({e * capacity, c}, x.options()).index_copy(0, slot, x.index_select(0, token));
  torch::Tensor y;
  {
    // The FLOP counter charges this scope by the kept assignments, not the padded slots.
    const std::vector<c10::IValue> shape = {c10::IValue(routing_.kept), c10::IValue(c), c10::IValue(hidden)};
    RECORD_FUNCTION(kMoeExpertsOp, shape);
    torch::Tensor a = Activate(activation_, torch::baddbmm(b1, slots.view({e, capacity, c}), w1));
    y = torch::baddbmm(b2, a, w2).view({e * capacity, c});
  }
  const torch::Tensor weight = gate.t().reshape({k * t}).index_select(0, kept).unsqueeze(1);
  const torch::Tensor out = y.index_select(0, slot) * weight.to(y.scalar_type());
  return torch::zeros({t, c}, out.options()).index_add(0, token, out);
}

torch::Tensor MoeMlpImpl::TakeAuxLoss() {
  torch::Tensor aux = aux_;
  aux_ = torch::Tensor();
  return aux;
}

BlockLayers MoeBlock(const LayerStyle& style, const BlockConfig& c) {
  BlockLayers b;
  if (c.stride != 1 || c.in != c.out) {
    b.downsample = nn::Sequential();
    b.downsample->push_back(ConvNormAct(style, c.in, c.out, 1, c.stride, 1, false));
  }
  const int hidden = std::max(1, static_cast<int>(std::lround(c.out * c.expansion)));
  b.body->push_back(MoeMlp(c.moe, c.out, hidden, style.norm, style.activation));
  return b;
}

nlohmann::json MoeRoutingSummary(nn::Module& network) {
  int64_t layers = 0, tokens = 0, assignments = 0, kept = 0, slots = 0;
  for (const std::shared_ptr<nn::Module>& m : network.modules(/*include_self=*/true)) {
    if (auto* moe = dynamic_cast<MoeMlpImpl*>(m.get())) {
      const MoeRouting& r = moe->last_routing();
      ++layers;
      tokens += r.tokens;
      assignments += r.expert.defined() ? r.expert.numel() : 0;
      kept += r.kept;
      slots += moe->w1.size(0) * r.capacity;
    }
  }
  if (layers == 0) return nlohmann::json::object();
  return {{"layers", layers},       {"tokens", tokens}, {"assignments", assignments},
          {"kept", kept},           {"dropped", assignments - kept}, {"slots", slots}};
}

torch::Tensor TakeAuxiliaryLoss(nn::Module& network) {
  torch::Tensor total;
  for (const std::shared_ptr<nn::Module>& m : network.modules(/*include_self=*/true)) {
    if (auto* moe = dynamic_cast<MoeMlpImpl*>(m.get())) {
      torch::Tensor aux = moe->TakeAuxLoss();
      if (aux.defined()) total = total.defined() ? total + aux : aux;
    }
  }
  return total;
}

}  // namespace frontier::model
