// Never returns from the kernel call.
#include "worker/trial/plugin.h"

namespace {

torch::Tensor Hang(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  volatile bool forever = true;
  while (forever) {
  }
  return frontier::attention::NaiveAttention(q, k, v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_test_hang", Hang); }

}  // namespace

FRONTIER_PLUGIN(Register)
