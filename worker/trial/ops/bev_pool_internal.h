// What the custom BEV operators (bev_pool.cc, bev_depth_pool.cc,
// bev_sample.cc) share. Internal to worker/trial/ops/.
#pragma once

#include <utility>

#include <torch/torch.h>

#include "worker/trial/ops/bev_pool.h"

namespace frontier::bev {

// Work per parallel task of the CPU kernels: enough intervals that scheduling
// overhead is small.
constexpr int64_t kGrainIntervals = 64;

// A plan (PoolPlan, SamplePlan) carried from forward to backward: the whole
// plan in one saved value (its tensors are shared, not copied).
template <typename Plan>
struct SavedPlan : torch::CustomClassHolder {
  explicit SavedPlan(Plan p) : plan(std::move(p)) {}
  Plan plan;
};

template <typename Plan>
void SavePlan(torch::autograd::AutogradContext* ctx, const Plan& plan) {
  ctx->saved_data["plan"] = c10::IValue::make_capsule(c10::make_intrusive<SavedPlan<Plan>>(plan));
}

// Valid while ctx holds the saved value (the whole backward).
template <typename Plan>
const Plan& SavedPlanOf(torch::autograd::AutogradContext* ctx) {
  return static_cast<const SavedPlan<Plan>*>(ctx->saved_data.at("plan").toCapsule().get())->plan;
}

// The inner loops run over channels, contiguous in every operand; `omp simd`
// (with -fopenmp-simd, no OpenMP runtime) has them vectorized at -O2.
template <typename scalar_t, typename acc_t>
inline void AddScaledRow(acc_t* __restrict acc, const scalar_t* __restrict row, acc_t scale, int64_t n) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) acc[c] += scale * static_cast<acc_t>(row[c]);
}

// acc += scale * g, and returns dot(g, f).
template <typename scalar_t, typename acc_t>
inline acc_t DotAndAddScaled(acc_t* __restrict acc, const scalar_t* __restrict g,
                             const scalar_t* __restrict f, acc_t scale, int64_t n) {
  acc_t dot = 0;
#pragma omp simd reduction(+ : dot)
  for (int64_t c = 0; c < n; ++c) {
    const acc_t gc = static_cast<acc_t>(g[c]);
    dot += gc * static_cast<acc_t>(f[c]);
    acc[c] += scale * gc;
  }
  return dot;
}

template <typename scalar_t, typename acc_t>
inline void StoreRow(const acc_t* __restrict acc, scalar_t* __restrict dst, int64_t n) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c) dst[c] = static_cast<scalar_t>(acc[c]);
}

}  // namespace frontier::bev
