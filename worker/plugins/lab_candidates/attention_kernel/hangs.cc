// attention_kernel candidate "lab_hangs" (HANGS inside the kernel call, not at registration):
// it waits forever for a flag nothing sets (volatile, so the compiler keeps the loop). The lab
// must run it in a sandbox with a time limit and report the timeout.
#include <cmath>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

volatile bool ready = false;  // never set

Tensor Hangs(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  while (!ready) {
  }  // the bug: spins forever
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) * scale, -1), v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_hangs", Hangs); }

}  // namespace

FRONTIER_PLUGIN(Register)
