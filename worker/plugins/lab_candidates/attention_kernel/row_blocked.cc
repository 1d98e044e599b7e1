// attention_kernel candidate "lab_row_blocked" (correct, faster than naive, O(block) memory at long L):
// queries in blocks whose scores stay in cache (<= 512 KB; several heads per block when L x S is small).
// Per block S = (scale q) k^T, softmax in place, O = P v. P is kept only when all of it is small (<= 4M
// scores), else the backward recomputes it per block; dK, dV accumulate per head group (task-owned).
#include <algorithm>
#include <cmath>

#include <ATen/Parallel.h>

#include "worker/trial/plugin.h"

namespace {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr int64_t kBlockScores = 131072;  // scores per block: 512 KB in fp32
constexpr int64_t kKeptScores = 1 << 22;  // at most this many scores in all are kept for the backward
// OpenBLAS (Debian's pthread build) threads a gemm above 2^18 multiply-adds; called from several of our
// tasks at once it oversubscribes the cores (measured 4-11x slower), so parallel blocks stay below that.
constexpr int64_t kSerialBlasMacs = 1 << 18;
constexpr int64_t kShortRow = 128;        // keys at or below which whole-block ops beat the per-row kernels

// k minus its mean over the keys: softmax is shift-invariant per row and sum_j dS_ij = 0, so scores
// and dQ are unchanged exactly; in fp32 a component every key shares (the gate's "logits near +100")
// no longer cancels in dQ = dS K, where it otherwise doubles the reference's own error.
// (fp32/fp64 only: in bf16/fp16 rounding k - mean would cost more than it saves.)
Tensor Centered(const Tensor& k3) {
  const bool wide = k3.scalar_type() == torch::kFloat || k3.scalar_type() == torch::kDouble;
  return wide ? k3 - k3.mean(1, /*keepdim=*/true) : k3;
}

bool ShortRows(const Tensor& s) {
  return s.size(-1) <= kShortRow && (s.scalar_type() == torch::kFloat || s.scalar_type() == torch::kDouble);
}

// Calls body(scratch, h0, nh, i0, n) for every block of nh heads from h0 and n query rows from
// i0, in parallel over head groups (a group's blocks run in order on one thread). Either nh == 1
// or n == L, so every block's slices of (B*h, L, d) tensors are contiguous.
template <typename Body>
void ForEachBlock(const Tensor& like, int64_t bh, int64_t L, int64_t S, int buffers, const Body& body) {
  int64_t budget = kBlockScores / std::max<int64_t>(S, 1);  // rows per block
  if (at::get_num_threads() > 1) budget = std::min(budget, kSerialBlasMacs / std::max<int64_t>(S * like.size(2), 1));
  int64_t heads = 1, rows = std::clamp<int64_t>(budget, 1, L);
  if (rows == L) {  // whole heads per block, but enough groups for every thread
    const int64_t per_thread = (bh + at::get_num_threads() - 1) / at::get_num_threads();
    heads = std::clamp<int64_t>(kBlockScores / std::max<int64_t>(L * S, 1), 1, per_thread);
  }
  const int64_t groups = (bh + heads - 1) / heads;
  // Inference mode is thread-local too: a caller's inference tensors (the output of a call made in
  // InferenceMode) may be written in place only where it is on, so the pool's threads take the caller's.
  const bool inference = c10::InferenceMode::is_enabled();
  at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
    const c10::InferenceMode inference_mode(inference);
    const torch::NoGradGuard no_grad;  // grad mode is thread-local: the pool's threads have it on
    const Tensor scratch = at::empty({buffers, heads * rows * S}, like.options());
    for (int64_t g = begin; g < end; ++g) {
      const int64_t h0 = g * heads, nh = std::min(heads, bh - h0);
      for (int64_t i0 = 0; i0 < L; i0 += rows) body(scratch, h0, nh, i0, std::min(rows, L - i0));
    }
  });
}

// P of one block in `p` (nh, n, S): softmax(qs k^T), qs = scale q. (bmm, not baddbmm with beta 0:
// LibTorch 1.13's small-matrix path reads the uninitialized buffer then.)
void Probabilities(Tensor& p, const Tensor& qs, const Tensor& kb) {
  at::bmm_out(p, qs, kb.transpose(1, 2));
  if (ShortRows(p)) {  // the per-row kernel's fixed cost dominates short rows
    p.sub_(p.amax(-1, /*keepdim=*/true)).exp_();
    p.div_(p.sum(-1, /*keepdim=*/true));
  } else {
    at::_softmax_out(p, p, -1, /*half_to_float=*/false);
  }
}

class RowBlockedAttention : public torch::autograd::Function<RowBlockedAttention> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& q, const Tensor& k, const Tensor& v) {
    const int64_t bh = q.size(0) * q.size(1), L = q.size(2), S = k.size(2), d = q.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(d));
    const Tensor q3 = q.reshape({bh, L, d}).contiguous(), k3 = k.reshape({bh, S, d}).contiguous(),
                 v3 = v.reshape({bh, S, d}).contiguous(), qs = q3 * scale, kc = Centered(k3);
    Tensor out = at::zeros({bh, L, d}, q.options());
    Tensor kept;  // all of P, when it is small
    if (bh * L * S <= kKeptScores) kept = at::empty({bh, L, S}, q.options());
    if (out.numel() > 0 && S > 0) {
      const int buffers = kept.defined() ? 0 : 1;
      ForEachBlock(q3, bh, L, S, buffers, [&](const Tensor& scratch, int64_t h0, int64_t nh, int64_t i0, int64_t n) {
        Tensor p = kept.defined() ? kept.narrow(0, h0, nh).narrow(1, i0, n)
                                  : scratch[0].narrow(0, 0, nh * n * S).view({nh, n, S});
        Probabilities(p, qs.narrow(0, h0, nh).narrow(1, i0, n), kc.narrow(0, h0, nh));
        Tensor ob = out.narrow(0, h0, nh).narrow(1, i0, n);
        at::bmm_out(ob, p, v3.narrow(0, h0, nh));
      });
    }
    ctx->save_for_backward({q3, k3, v3, out, kept});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["sizes"] = q.sizes().vec();
    return out.view(q.sizes());
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &q3 = saved[0], &k3 = saved[1], &v3 = saved[2], &out = saved[3], &kept = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const std::vector<int64_t> q_sizes = ctx->saved_data["sizes"].toIntVector();
    const int64_t bh = q3.size(0), L = q3.size(1), S = k3.size(1);
    const Tensor go = grads[0].reshape(q3.sizes()).contiguous(), qs = q3 * scale, kc = Centered(k3);
    const Tensor delta = (go * out).sum(-1, /*keepdim=*/true);  // rowsum(dP P) = rowsum(dO O)
    Tensor dq = at::zeros_like(q3), dk = at::zeros_like(k3), dv = at::zeros_like(v3);
    if (dq.numel() > 0 && S > 0) {
      const int buffers = kept.defined() ? 1 : 2;
      ForEachBlock(q3, bh, L, S, buffers, [&](const Tensor& scratch, int64_t h0, int64_t nh, int64_t i0, int64_t n) {
        Tensor ds = scratch[0].narrow(0, 0, nh * n * S).view({nh, n, S});
        Tensor p = kept.defined() ? kept.narrow(0, h0, nh).narrow(1, i0, n)
                                  : scratch[1].narrow(0, 0, nh * n * S).view({nh, n, S});
        const Tensor qb = qs.narrow(0, h0, nh).narrow(1, i0, n), gb = go.narrow(0, h0, nh).narrow(1, i0, n);
        const Tensor kb = kc.narrow(0, h0, nh), vb = v3.narrow(0, h0, nh);
        if (!kept.defined()) Probabilities(p, qb, kb);            // P, recomputed
        at::bmm_out(ds, gb, vb.transpose(1, 2));                  // dP = dO V^T
        if (ShortRows(ds)) {                                      // dS = P (dP - rowsum(dP P))
          ds.sub_(delta.narrow(0, h0, nh).narrow(1, i0, n)).mul_(p);
        } else {
          at::_softmax_backward_data_out(ds, ds, p, -1, p.scalar_type());
        }
        Tensor dqb = dq.narrow(0, h0, nh).narrow(1, i0, n);
        at::bmm_out(dqb, ds, kb).mul_(scale);                     // dQ = dS K scale
        dk.narrow(0, h0, nh).baddbmm_(ds.transpose(1, 2), qb);    // dK += dS^T (scale Q)
        dv.narrow(0, h0, nh).baddbmm_(p.transpose(1, 2), gb);     // dV += P^T dO
      });
    }
    const std::vector<int64_t> k_sizes = {q_sizes[0], q_sizes[1], S, q_sizes[3]};
    return {dq.view(q_sizes), dk.view(k_sizes), dv.view(k_sizes)};
  }
};

Tensor RowBlocked(const Tensor& q, const Tensor& k, const Tensor& v) {
  frontier::attention::CheckQkv(q, k, v);
  return RowBlockedAttention::apply(q, k, v);
}

void Register() { frontier::plugin::RegisterAttentionKernelVariant("lab_row_blocked", RowBlocked); }

}  // namespace

FRONTIER_PLUGIN(Register)
