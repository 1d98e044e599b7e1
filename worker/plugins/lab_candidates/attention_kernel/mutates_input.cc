// attention_kernel candidate "lab_mutates_input" (WRONG in one way: it writes into its input):
// the output and all gradients are right (computed from a copy of q), but afterwards it uses
// q's storage as scratch, halving q in place behind autograd's back (q.detach().mul_(0.5)).
// The gate's rule "inputs must be unchanged after the call" must catch it.
#include <cmath>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;

Tensor MutatesInput(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const Tensor qc = q.clone();  // the result depends on this copy only
  const Tensor out = torch::matmul(torch::softmax(torch::matmul(qc, k.transpose(-2, -1)) * scale, -1), v);
  q.detach().mul_(0.5);  // the bug: the caller's q is overwritten
  return out;
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_mutates_input", MutatesInput); }

}  // namespace

FRONTIER_PLUGIN(Register)
