// attention_kernel candidate "lab_scale_off" (WRONG in one way: the scale): the logits are
// scaled by 1.01 / sqrt(d) instead of 1 / sqrt(d) (a mistyped constant); otherwise the
// reference formula, autograd's backward. Off by ~1e-2 relative on every random draw: the
// gate's forward comparison against the float64 reference must catch it (today's gate does).
#include <cmath>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

Tensor ScaleOff(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  const double scale = 1.01 / std::sqrt(static_cast<double>(q.size(3)));  // the bug: 1.01
  return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) * scale, -1), v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_scale_off", ScaleOff); }

}  // namespace

FRONTIER_PLUGIN(Register)
