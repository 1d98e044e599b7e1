// Ops: computations a model may run with one of several variants (docs/plugins.md).
//
// An op (e.g. "bev_pool") has a reference variant and any number of others,
// registered by name with the op's own registry (bev::PoolRegistry) by
// Frontier or by a plugin. What the correctness gate (correctness.h) and the
// op benchmark (op_bench.h) need to know of an op is its Op entry in
// OpRegistry(); what they need to know of one call, at the shapes the model
// gives it, is an OpCall, which the op's dispatch point records while a
// CallRecorder is active (the trial runner records one forward pass before it
// times anything).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "worker/trial/registry.h"

namespace frontier::ops {

// One call of an op: its differentiable tensor inputs and how to run any of
// the op's variants on tensors of the same shapes (whatever else the call
// takes, e.g. a pooling plan, is bound inside `run`).
struct OpCall {
  std::string op;       // "bev_pool"
  std::string variant;  // the variant the model runs
  std::string edge;     // "" for the model's own call; else the edge case, e.g. "single-point intervals"
  std::vector<std::string> input_names;  // "depth", "features"
  std::vector<torch::Tensor> inputs;     // as the model gave them (only shapes, dtypes and devices are used)
  std::function<torch::Tensor(const std::string& variant, const std::vector<torch::Tensor>& inputs)> run;
  // The edge cases the op declares at this call's shapes (e.g. empty cells,
  // single-point intervals), each a call of its own. Unset: none.
  std::function<std::vector<OpCall>()> edge_cases;
  // The op at sizes other than the model's (odd sizes, size 1), each a call
  // of its own with `edge` naming it: the gate's rule that a variant must be
  // right beyond the shapes it was written for. Unset: none.
  std::function<std::vector<OpCall>()> other_shapes;
  // Bytes one call must move at the least (every input read and every output
  // written once), forward or forward+backward, for the benchmark's share of
  // memory bandwidth. Unset: the inputs and output once each way.
  std::function<double(bool backward)> bytes_moved;

  // "depth (2, 6, 8, 12, 20) bf16, features (2, 6, 12, 20, 32) bf16"
  std::string Shapes() const;
};

// One set of the gate's structured inputs. `forward_only`: the set is made
// to break the forward (e.g. a softmax that overflows) and leaves the
// gradients ill-conditioned by construction; only the output is compared.
struct StructuredInputs {
  std::string name;
  std::vector<torch::Tensor> inputs;
  bool forward_only = false;
};

// What the gate and the benchmark know of an op.
struct Op {
  std::string reference;                               // the variant every other is checked against
  std::function<std::vector<std::string>()> variants;  // every registered variant, sorted
  // Fresh random inputs of the call's shapes, dtypes and device (the op's
  // domain: e.g. depth probabilities in [0, 1]). Unset: standard normal.
  std::function<std::vector<torch::Tensor>(const OpCall& call, at::Generator& generator)> random_inputs;
  // Named input sets of a call's shapes that random draws rarely produce
  // (the gate's structured inputs), in the op's domain. Unset: the generic
  // sets of correctness.cc (constants, small integers, one-hot rows, large
  // and tiny magnitudes).
  std::function<std::vector<StructuredInputs>(const OpCall& call, at::Generator& generator)> structured_inputs;
  // What a variant computes, its signature and the plugin call that
  // registers one (the kernel lab's prompt, docs/kernel-lab.md).
  std::string contract;
  // The reference variant's source, as a person would read it.
  std::string reference_source;
  // A call of the op on inputs of given shapes without a model (the kernel
  // lab's calls from a command trial's recorded operators, TrialSpec::op_calls);
  // throws (naming the problem) when the shapes are not the op's. Unset: the
  // op's calls need a model's context (bev_pool: its camera geometry).
  std::function<OpCall(const std::vector<torch::Tensor>& inputs)> call_at;
};

// Ops by name: "bev_pool" (bev_pool.h) and "attention_kernel" (attention_kernel.h).
Registry<Op>& OpRegistry();

// Records the op calls made on this thread while it lives: one per distinct
// (op, variant, input shapes and dtypes). Not nested.
class CallRecorder {
 public:
  CallRecorder();
  ~CallRecorder();
  CallRecorder(const CallRecorder&) = delete;
  CallRecorder& operator=(const CallRecorder&) = delete;

  const std::vector<OpCall>& calls() const { return calls_; }

 private:
  friend void Record(const std::function<OpCall()>& make);
  std::vector<OpCall> calls_;
};

// When a recorder is active on this thread, builds the call with `make` and
// keeps it unless one like it is kept already (ops::Dispatch, an op's
// dispatch point, calls it: spot_check.h).
void Record(const std::function<OpCall()>& make);

// Rows one-hot along the last dimension (float): the structured inputs' one-hot rows.
torch::Tensor OneHotRows(c10::IntArrayRef sizes, at::Generator& generator);

// Random inputs for a call: the op's own generator, or standard normal.
std::vector<torch::Tensor> RandomInputs(const Op& op, const OpCall& call, at::Generator& generator);

}  // namespace frontier::ops
