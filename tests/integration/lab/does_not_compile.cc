// Does not compile: a tensor is not a double.
#include "worker/trial/plugin.h"

namespace {

torch::Tensor Broken(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  double scale = q.size(3).sqrt();
  return frontier::attention::NaiveAttention(q * scale, k, v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_test_broken", Broken); }

}  // namespace

FRONTIER_PLUGIN(Register)
