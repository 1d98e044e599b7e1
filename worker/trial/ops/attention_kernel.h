// The op "attention_kernel": scaled dot-product attention,
// softmax(q k^T / sqrt(d)) v, as the softmax attention kinds of the model
// (mhsa, window, gqa) compute it. Variants (arch.ops.attention_kernel):
//  naive:   the scores (B, h, L, S) materialized, softmax, matmul (plain
//           LibTorch ops; autograd derives the backward). The reference.
//  chunked: the FlashAttention recurrence on the CPU: keys in blocks with a
//           running max and running sum per query, never the (L x S) score
//           matrix; the backward recomputes each block's probabilities from
//           the saved log-sum-exp (FlashAttention-2's backward) and each task
//           owns its (batch, head)'s gradients: no atomics, deterministic.
//           Parallel over batch x heads (at::parallel_for); accumulates in
//           float for bf16/fp16 (double for double). CPU tensors only.
#pragma once

#include <string>

#include <torch/torch.h>

#include "worker/trial/ops/op.h"
#include "worker/trial/registry.h"

namespace frontier::attention {

// Throws (c10::Error, naming the problem) unless q is (B, h, L, d) and k, v
// are (B, h, S, d), floating, of one dtype and on one device.
void CheckQkv(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// (B, h, L, d) x (B, h, S, d) x (B, h, S, d) -> (B, h, L, d) in q's dtype,
// differentiable in all three (double backward is not supported by chunked).
torch::Tensor NaiveAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);
torch::Tensor ChunkedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// Attention kernels by name: "naive" (the reference), "chunked", and any a
// plugin registers (plugin::RegisterAttentionKernelVariant).
using KernelVariant = torch::Tensor (*)(const torch::Tensor& q, const torch::Tensor& k,
                                        const torch::Tensor& v);
Registry<KernelVariant>& KernelRegistry();

// The variant `kernel` of KernelRegistry applied to q, k, v: the op
// "attention_kernel"'s dispatch point, where its calls are recorded for the
// correctness gate and the op benchmark (ops/op.h).
torch::Tensor Attend(const std::string& kernel, const torch::Tensor& q, const torch::Tensor& k,
                     const torch::Tensor& v);

// The op "attention_kernel" for ops::OpRegistry(): reference naive, inputs
// standard normal; each call declares its edge cases (sequence length 1, a
// single head, one more key than a block, logits 20 times larger).
ops::Op KernelOp();

// Keys per block of the chunked kernel.
inline constexpr int64_t kKeyBlock = 64;

}  // namespace frontier::attention
