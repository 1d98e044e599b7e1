// attention_kernel candidate "lab_fixed_head_dim" (WRONG in one way: it assumes head_dim 16):
// the scale is the constant 0.25 = 1/sqrt(16) instead of 1/sqrt(d); otherwise the reference
// formula. Exact at the recorded shapes (head_dim 16, which every edge case of today's gate
// keeps); the gate's rule "several shapes beyond the recorded one" (another head_dim) must catch it.
#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

Tensor FixedHeadDim(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  constexpr double kScale = 0.25;  // the bug: 1 / sqrt(16), whatever q.size(3) is
  return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) * kScale, -1), v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_fixed_head_dim", FixedHeadDim); }

}  // namespace

FRONTIER_PLUGIN(Register)
