// What the custom BEV pooling operators (bev_pool.cc, bev_depth_pool.cc)
// share. Internal to worker/trial/ops/.
#pragma once

#include <utility>

#include <torch/torch.h>

#include "worker/trial/ops/bev_pool.h"

namespace frontier::bev {

// Work per parallel task of the CPU kernels: enough intervals that scheduling
// overhead is small.
constexpr int64_t kGrainIntervals = 64;

// The PoolPlan carried from forward to backward: the whole plan in one saved
// value (its tensors are shared, not copied).
struct SavedPlan : torch::CustomClassHolder {
  explicit SavedPlan(PoolPlan p) : plan(std::move(p)) {}
  PoolPlan plan;
};

inline void SavePlan(torch::autograd::AutogradContext* ctx, const PoolPlan& plan) {
  ctx->saved_data["plan"] = c10::IValue::make_capsule(c10::make_intrusive<SavedPlan>(plan));
}

// Valid while ctx holds the saved value (the whole backward).
inline const PoolPlan& SavedPlanOf(torch::autograd::AutogradContext* ctx) {
  return static_cast<const SavedPlan*>(ctx->saved_data.at("plan").toCapsule().get())->plan;
}

}  // namespace frontier::bev
