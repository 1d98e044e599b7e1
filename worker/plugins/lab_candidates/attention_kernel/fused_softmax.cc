// attention_kernel candidate "lab_fused_softmax" (correct, faster than naive): one autograd Function
// over (B*h) bmm's: S = bmm(scale q, k^T), softmax in place, O = bmm(P, v); saves P, q, k, v, O and
// differentiates by hand (dS in place): two L x S buffers where the reference allocates six. Short rows
// (S <= 128, fp32/fp64) use whole-tensor ops instead of the per-row softmax kernels (their fixed cost).
#include <cmath>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr int64_t kShortRow = 128;

// k minus its mean over the keys: softmax is shift-invariant per row, and sum_j dS_ij = 0, so the
// scores and dQ are unchanged in exact arithmetic; in fp32 a component shared by every key (the gate's
// "logits near +100") no longer cancels in dQ = dS K, which otherwise doubles the reference's error.
// (fp32/fp64 only: in bf16/fp16 rounding k - mean would cost more than it saves.)
Tensor Centered(const Tensor& k3) {
  const bool wide = k3.scalar_type() == torch::kFloat || k3.scalar_type() == torch::kDouble;
  return wide ? k3 - k3.mean(1, /*keepdim=*/true) : k3;
}

bool ShortRows(const Tensor& s) {
  return s.size(-1) <= kShortRow && (s.scalar_type() == torch::kFloat || s.scalar_type() == torch::kDouble);
}

// softmax over the last dimension, in place.
void SoftmaxInPlace(Tensor& s) {
  if (ShortRows(s)) {
    s.sub_(s.amax(-1, /*keepdim=*/true)).exp_();
    s.div_(s.sum(-1, /*keepdim=*/true));
  } else {
    at::_softmax_out(s, s, -1, /*half_to_float=*/false);
  }
}

// dP -> dS = P (dP - rowsum(dP P)) in place; rowsum(dP P) = rowsum(dO O) = delta.
void SoftmaxBackwardInPlace(Tensor& dp, const Tensor& p, const Tensor& go, const Tensor& out) {
  if (ShortRows(dp)) {
    dp.sub_((go * out).sum(-1, /*keepdim=*/true)).mul_(p);
  } else {
    at::_softmax_backward_data_out(dp, dp, p, -1, p.scalar_type());
  }
}

class FusedSoftmaxAttention : public torch::autograd::Function<FusedSoftmaxAttention> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v) {
    const int64_t bh = q.size(0) * q.size(1), L = q.size(2), S = k.size(2), d = q.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const Tensor q3 = q.reshape({bh, L, d}), k3 = k.reshape({bh, S, d}), v3 = v.reshape({bh, S, d});
    Tensor p = at::empty({bh, L, S}, q.options());
    // bmm, not baddbmm with beta 0: LibTorch 1.13's small-matrix path reads the uninitialized p then.
    at::bmm_out(p, q3 * scale, Centered(k3).transpose(1, 2).contiguous());
    if (p.numel() > 0) SoftmaxInPlace(p);
    Tensor out = at::bmm(p, v3);
    ctx->save_for_backward({p, q3, k3, v3, out});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["sizes"] = q.sizes().vec();
    return out.view(q.sizes());
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &p = saved[0], &q3 = saved[1], &k3 = saved[2], &v3 = saved[3], &out = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const std::vector<int64_t> q_sizes = ctx->saved_data["sizes"].toIntVector();
    const std::vector<int64_t> k_sizes = {q_sizes[0], q_sizes[1], k3.size(1), q_sizes[3]};
    const Tensor go = grads[0].reshape(q3.sizes());
    const Tensor dv = at::bmm(p.transpose(1, 2), go);             // dV = P^T dO
    Tensor ds = at::bmm(go, v3.transpose(1, 2));                  // dP = dO V^T
    SoftmaxBackwardInPlace(ds, p, go, out);                       // dS
    const Tensor dq = at::bmm(ds, Centered(k3)).mul_(scale);      // dQ = dS K scale
    const Tensor dk = at::bmm(ds.transpose(1, 2), q3).mul_(scale);  // dK = dS^T Q scale
    return {dq.view(q_sizes), dk.view(k_sizes), dv.view(k_sizes)};
  }
};

Tensor FusedSoftmax(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  return FusedSoftmaxAttention::apply(q, k, v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_fused_softmax", FusedSoftmax); }

}  // namespace

FRONTIER_PLUGIN(Register)
