// attention_kernel candidate "lab_aliases_input" (WRONG in one way: its output aliases an input):
// with one query and one key (L == S == 1) softmax is 1 and the result equals v, so it returns
// v itself (a view of v's storage, gradients dV = dO, dQ = dK = 0: numerically right); other
// shapes use the reference formula. The gate's rule "outputs must not alias inputs" must catch it.
#include <cmath>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class SingleTokenAttention : public torch::autograd::Function<SingleTokenAttention> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v) {
    ctx->saved_data["q_sizes"] = q.sizes().vec();
    ctx->saved_data["k_sizes"] = k.sizes().vec();
    return v;  // the bug: autograd hands back a view of v, sharing its storage
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto options = grads[0].options();
    return {torch::zeros(ctx->saved_data["q_sizes"].toIntVector(), options),
            torch::zeros(ctx->saved_data["k_sizes"].toIntVector(), options), grads[0]};
  }
};

Tensor AliasesInput(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  if (q.size(2) == 1 && k.size(2) == 1) return SingleTokenAttention::apply(q, k, v);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) * scale, -1), v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_aliases_input", AliasesInput); }

}  // namespace

FRONTIER_PLUGIN(Register)
