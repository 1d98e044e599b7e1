// Right output and gradients, but halves q in place after the call: the
// gate's unchanged-inputs rule.
#include "worker/trial/plugin.h"

namespace {

torch::Tensor Mutates(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  const torch::Tensor out = frontier::attention::NaiveAttention(q.clone(), k, v);
  q.detach().mul_(0.5);
  return out;
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_test_mutates", Mutates); }

}  // namespace

FRONTIER_PLUGIN(Register)
