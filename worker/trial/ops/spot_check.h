// Spot checks (docs/plugins.md#spot-checks): the correctness gate checks a
// variant on the calls it makes before training; a variant whose results
// change later (a cache keyed on the wrong thing, a race, a counter: right for
// its first calls, then wrong) passes it. While a SpotCheck is armed on a
// thread, the next call of each op whose variant is not the op's reference is
// watched as the model makes it: its inputs before and after the call, its
// output, the gradient its output receives and the gradients its backward
// gives its inputs. Check() then compares them with the reference on the same
// inputs and output gradient, by the gate's rules for one draw
// (correctness.h: forward and gradients within twice the reference's own
// error of float64, inputs unchanged, no aliasing).
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "worker/trial/ops/correctness.h"
#include "worker/trial/ops/op.h"

namespace frontier::ops {

class SpotCheck {
 public:
  SpotCheck();  // active on this thread while it lives; not nested
  ~SpotCheck();
  SpotCheck(const SpotCheck&) = delete;
  SpotCheck& operator=(const SpotCheck&) = delete;

  // The next call of each op with a non-reference variant is watched; `label`
  // names where ("training step 17").
  void Arm(std::string label);
  // Compares what the armed calls gave (after the backward that used them)
  // with the reference, disarms, and returns one check per watched call.
  std::vector<VariantCheck> Check();

  struct Watched;  // one call's tensors (spot_check.cc)

 private:
  friend torch::Tensor Dispatch(const std::function<OpCall()>& make, const std::vector<torch::Tensor>& inputs,
                                const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& run);
  void Release();
  bool armed_ = false;
  std::string label_;
  std::vector<std::shared_ptr<Watched>> watched_;
};

// `count` of `steps` (all of them if fewer), drawn from `seed`: the same on every rank of a trial.
std::set<int> DrawSpotCheckSteps(std::vector<int> steps, int count, int64_t seed);

// An op's dispatch point: records the call for an active CallRecorder
// (`make` builds it), runs the variant (`run` on `inputs`) and, where an
// armed SpotCheck wants this call, hands it the call's tensors.
torch::Tensor Dispatch(const std::function<OpCall()>& make, const std::vector<torch::Tensor>& inputs,
                       const std::function<torch::Tensor(const std::vector<torch::Tensor>&)>& run);

}  // namespace frontier::ops
