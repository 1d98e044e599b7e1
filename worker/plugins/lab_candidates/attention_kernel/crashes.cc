// attention_kernel candidate "lab_crashes" (CRASHES inside the kernel call, not at registration):
// its workspace pointer is never allocated, so the first call writes through a null pointer
// (SIGSEGV). The lab must run it in a sandbox and report the signal, not die with it.
#include <cmath>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

float* volatile workspace = nullptr;  // volatile: the compiler cannot prove it null and drop the store

Tensor Crashes(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  workspace[0] = 1.0f;  // the bug: SIGSEGV
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) * scale, -1), v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_crashes", Crashes); }

}  // namespace

FRONTIER_PLUGIN(Register)
