// The calls of frontier-trial's kernel-lab ops that a command trial's
// recorded operators make (docs/kernel-lab.md, calls from a command trial):
// its own code is not frontier-trial's model, so its op calls are
// recognized in the SDK's recording by their operator pattern and shapes.
// Torch-free.
#pragma once

#include <nlohmann/json.hpp>

#include "worker/profile/profile_summary.h"

namespace frontier {

// Scaled dot-product attention written as a matrix product, a softmax and a
// matrix product (aten::matmul or aten::bmm, aten::softmax or
// aten::_softmax, in that order on one thread, other operators between them
// ignored): q (..., L, d) x k^T (..., d, S), softmax over (..., L, S), then
// (..., L, S) x v (..., S, d). Each distinct call is one entry
// {"op": "attention_kernel", "shapes": [q, k, v] as (B, h, L, d) and
// (B, h, S, d) (3-d products as B = 1, h = their batch), "calls_per_step",
// "recognized_from"}; an empty array when none is recognized. Calls outside
// the recorded steps are not looked at, nor calls whose dimensions a spec's
// op_calls would refuse (outside [1, 2^20], an input past 2^28 elements).
nlohmann::json LabOpCalls(const ProfileRecording& recording);

}  // namespace frontier
