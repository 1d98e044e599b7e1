// Wrong: the logits scaled by 1/d instead of 1/sqrt(d). The gate's numbers.
#include "worker/trial/plugin.h"

namespace {

torch::Tensor WrongScale(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  const torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / static_cast<double>(q.size(3));
  return torch::matmul(torch::softmax(scores, -1), v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_test_wrong_scale", WrongScale); }

}  // namespace

FRONTIER_PLUGIN(Register)
