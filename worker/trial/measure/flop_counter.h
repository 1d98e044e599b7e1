// Analytic model FLOPs, counted from the shapes of the operators a forward
// pass actually runs (the PaLM / nanoGPT convention, docs/worker.md#measurement):
// convolutions, linear layers and matrix products (which covers the attention
// matmuls QK^T and AV, and phi(K)^T V, phi(Q)(...) of linear attention);
// a moe block's experts by the token assignments they kept (its
// "frontier::moe_experts" scope), not by their padded capacity slots; an op
// with variants (ops/, the scope "frontier::op::NAME" ops::Dispatch opens
// around whichever variant runs) by the op's own formula, whatever the
// variant runs inside it: the attention kernel as the reference's two
// matmuls, BEV pooling as 0 (docs/bev.md's convention);
// one multiply-add = 2 FLOPs; elementwise ops, norms, pooling and biases are
// not counted. A training step counts 3 x forward. Every FLOP formula of the
// project is in flop_counter.cc.
//
// The counter observes LibTorch's dispatcher (RecordFunction) on the calling
// thread. Only the outermost counted op is charged, so an op that decomposes
// into others (linear -> addmm, matmul -> bmm, an autocast re-dispatch of
// conv2d) is counted once, by its own shapes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace frontier {

class FlopCounter {
 public:
  // Starts counting ops dispatched on this thread. One counter per thread.
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;

  int64_t total() const;
  // FLOPs by counted op name ("aten::convolution", "aten::linear", ...).
  const std::map<std::string, int64_t>& by_op() const { return by_op_; }

  // Called by the dispatcher observer.
  void Add(const std::string& op, int64_t flops) { by_op_[op] += flops; }

 private:
  uint64_t handle_;
  std::map<std::string, int64_t> by_op_;
};

// FLOPs of one aten::convolution_backward call from the shapes of its
// grad_output and weight, for the profiler (the counter sees only forward
// passes): the input and the weight gradient cost one forward convolution
// each, 2 x 2 x |grad_output| x (Cin / groups) x kernel. nullopt when the
// shapes are not a convolution's.
std::optional<int64_t> ConvBackwardFlops(const std::vector<int64_t>& grad_output,
                                         const std::vector<int64_t>& weight);

struct ModelFlops {
  int64_t forward = 0;     // one forward pass over the batch
  int64_t train_step = 0;  // 3 x forward
  std::map<std::string, int64_t> forward_by_op;
};

// Runs one forward pass of `module` on `input` in eval mode without autograd
// (the module's training flag is restored) and counts its FLOPs.
template <typename ModuleHolder>
ModelFlops CountModelFlops(ModuleHolder& module, const torch::Tensor& input) {
  const bool was_training = module->is_training();
  module->eval();
  ModelFlops flops;
  {
    torch::NoGradGuard no_grad;
    FlopCounter counter;
    module->forward(input);
    flops.forward = counter.total();
    flops.forward_by_op = counter.by_op();
  }
  module->train(was_training);
  flops.train_step = 3 * flops.forward;
  return flops;
}

}  // namespace frontier
