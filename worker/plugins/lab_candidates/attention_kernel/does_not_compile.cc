// attention_kernel candidate "lab_does_not_compile" (DOES NOT COMPILE): written with PyTorch's
// Python API in mind, it reads the head size as q.shape[3]; at::Tensor has no member `shape`
// (C++ spells it q.size(3)). The lab must report the compiler's error and go on.
#include <cmath>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

Tensor DoesNotCompile(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  const int64_t d = q.shape[3];  // the bug: no such member
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) * scale, -1), v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_does_not_compile", DoesNotCompile); }

}  // namespace

FRONTIER_PLUGIN(Register)
