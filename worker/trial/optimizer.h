// What the trainer steps with: the optimizer a spec names and fp16's dynamic
// loss scaling (worker/trial/training.cc).
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "search_spaces/trial_spec.h"

namespace frontier {

// Dynamic loss scaling for fp16 (as torch.cuda.amp.GradScaler): skip steps with
// non-finite gradients and halve the scale; double it after a run of good steps.
class LossScaler {
 public:
  explicit LossScaler(bool enabled) : enabled_(enabled) {}
  torch::Tensor Scale(const torch::Tensor& loss) const { return enabled_ ? loss * scale_ : loss; }
  // Unscales gradients in place; false when the step must be skipped.
  bool Unscale(const std::vector<torch::Tensor>& params) {
    if (!enabled_) return true;
    bool finite = true;
    for (const auto& p : params) {
      if (!p.grad().defined()) continue;
      p.grad().mul_(1.0 / scale_);
      finite = finite && torch::isfinite(p.grad()).all().item<bool>();
    }
    if (!finite) {
      scale_ /= 2;
      good_steps_ = 0;
      return false;
    }
    if (++good_steps_ == 2000) {
      scale_ *= 2;
      good_steps_ = 0;
    }
    return true;
  }
  double scale() const { return scale_; }

 private:
  bool enabled_;
  double scale_ = 65536.0;
  int good_steps_ = 0;
};

inline std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerSpec& o,
                                                       const std::vector<torch::Tensor>& params) {
  if (o.name == "adamw") {
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).weight_decay(o.weight_decay));
  }
  return std::make_unique<torch::optim::SGD>(
      params,
      torch::optim::SGDOptions(o.lr).momentum(o.momentum).nesterov(o.nesterov).weight_decay(o.weight_decay));
}

}  // namespace frontier
