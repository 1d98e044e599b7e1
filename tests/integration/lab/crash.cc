// Crashes inside the kernel call (a write through a null pointer).
#include "worker/trial/plugin.h"

namespace {

torch::Tensor Crash(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  volatile float* nowhere = nullptr;
  *nowhere = q.sum().item<float>();
  return frontier::attention::NaiveAttention(q, k, v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_test_crash", Crash); }

}  // namespace

FRONTIER_PLUGIN(Register)
