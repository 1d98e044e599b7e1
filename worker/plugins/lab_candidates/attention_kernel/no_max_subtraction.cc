// attention_kernel candidate "lab_no_max_subtraction" (WRONG in one way: numerically unstable
// softmax): exp(s) / sum exp(s) in the input's dtype without subtracting the row max. Right on
// standard-normal inputs; exp overflows to inf (then NaN) once a logit exceeds ~88 in fp32, so
// the gate's softmax-saturating structured inputs (large logits) must catch it.
#include <cmath>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

Tensor NoMaxSubtraction(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const Tensor e = (torch::matmul(q, k.transpose(-2, -1)) * scale).exp();  // the bug: no max subtracted
  return torch::matmul(e / e.sum(-1, /*keepdim=*/true), v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_no_max_subtraction", NoMaxSubtraction); }

}  // namespace

FRONTIER_PLUGIN(Register)
