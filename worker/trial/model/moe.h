// The moe block family: a mixture-of-experts MLP (Switch Transformer /
// GShard style) on the positions of an NCHW map, registered as "moe" in
// model.cc's BlockRegistry. docs/trial-spec.md (Block families) has the
// definitions; in short, per block:
//   [1x1/s conv + norm projection when the shape changes]
//   y = x + MoE(LayerNorm(x)) over the B*H*W position tokens, where
//   MoE(t) = sum over t's kept top-k experts e of gate_e(t) * expert_e(t),
//   expert_e(t) = W2_e act(W1_e t + b1_e) + b2_e (hidden = width x expansion).
// Routing: router logits = Linear(C -> experts), p = softmax in fp32; each
// token's top_k experts, gates renormalized over them when top_k > 1 (the
// raw p at top_k = 1, Switch). Every expert has
// capacity = ceil(capacity_factor * tokens * top_k / experts) slots, filled in
// priority order: every token's first choice before any second choice,
// tokens in order within a choice; an assignment past its expert's capacity
// is dropped (a token none of whose choices are kept passes through the
// residual unchanged). The experts run as one grouped (batched) matmul over
// (experts, capacity, C). Load balancing (training only):
//   aux = aux_loss_weight * experts * sum_e f_e * P_e,
// f_e = the share of the T*top_k assignments (before drops) that chose e,
// P_e = the mean router probability of e; 1 x weight when perfectly balanced.
#pragma once

#include <string>

#include <torch/torch.h>

#include "worker/trial/model/model.h"

namespace frontier::model {

// The name of the RecordFunction scope around the experts' grouped matmuls,
// with inputs (kept assignments, channels, hidden): the FLOP counter
// (worker/trial/measure/flop_counter.cc) charges it by those instead of the
// padded capacity slots the batched matmuls compute.
inline constexpr const char* kMoeExpertsOp = "frontier::moe_experts";

// What the last forward routed.
struct MoeRouting {
  int64_t tokens = 0;
  int64_t capacity = 0;     // slots per expert
  int64_t kept = 0;         // assignments kept (run by an expert)
  torch::Tensor expert;     // (tokens, top_k) chosen experts, best first
  torch::Tensor gate;       // (tokens, top_k) their gates (fp32)
  torch::Tensor assigned;   // (tokens, top_k) bool: the assignment got a slot
};

class MoeMlpImpl : public torch::nn::Module {
 public:
  // `norm` "none" drops the pre-norm (any other kind: LayerNorm over channels).
  MoeMlpImpl(const MoeSpec& spec, int channels, int hidden, const std::string& norm, std::string activation);
  // (B, C, H, W) -> MoE(norm(x)) (B, C, H, W), without the residual (ConvBlock adds it).
  torch::Tensor forward(const torch::Tensor& x);
  // Tokens (T, C) -> (T, C): zero for a token whose every assignment was dropped.
  torch::Tensor Route(const torch::Tensor& tokens);

  int64_t Capacity(int64_t tokens) const;
  const MoeRouting& last_routing() const { return routing_; }
  // The weighted load-balancing loss of the last training forward (a scalar),
  // then forgotten; undefined when none is pending.
  torch::Tensor TakeAuxLoss();

  torch::nn::Linear router{nullptr};
  torch::Tensor w1, b1, w2, b2;  // (E, C, H), (E, 1, H), (E, H, C), (E, 1, C)

 private:
  MoeSpec spec_;
  std::string activation_;
  torch::nn::LayerNorm norm_{nullptr};
  MoeRouting routing_;
  torch::Tensor aux_;
};
TORCH_MODULE(MoeMlp);

// The moe family's BlockBuilder: body = [MoeMlp], identity residual, a
// 1x1/s conv + norm downsample when stride or width change.
BlockLayers MoeBlock(const LayerStyle& style, const BlockConfig& config);

}  // namespace frontier::model
