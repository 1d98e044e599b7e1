// BEV pooling, the lift-splat step of LSS: every frustum point carries a
// feature vector, and the features of all points that fall in one BEV cell are
// summed into that cell.
//
// Two implementations with the same contract, compared by the search:
//  naive: index_select of the in-grid points, then index_add into the grid
//         (plain LibTorch ops; autograd derives the backward).
//  fused: one custom operator with its own forward and backward (BEVFusion /
//         BEVPoolv2's interval trick). The in-grid points are sorted by cell
//         once per camera rig (PoolPlan); the forward reduces each contiguous
//         run of same-cell points ("interval") into its cell, in parallel over
//         (sample, interval), with no atomics and no intermediate copy; the
//         backward is a gather: every point's gradient is its cell's gradient.
//         On CUDA (FRONTIER_WITH_CUDA_OPS builds) the same plan drives the
//         kernels in bev_pool_cuda.cu.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "worker/trial/registry.h"

namespace frontier::bev {

// Assignment of the P points of one sample to `cells` BEV cells. Fixed for a
// rig, so it is built once and shared by every batch. All tensors int64, CPU
// or on the device of the features.
struct PoolPlan {
  int64_t points = 0;              // P
  int64_t cells = 0;               // grid * grid
  torch::Tensor point_cells;       // (P): cell of each point, -1 outside the grid
  torch::Tensor valid_points;      // (K): the in-grid points, ascending (naive)
  torch::Tensor valid_cells;       // (K): their cells (naive)
  torch::Tensor ranks;             // (K): the in-grid points sorted by cell, stable (fused)
  torch::Tensor interval_starts;   // (I): first position in `ranks` of each run of one cell
  torch::Tensor interval_lengths;  // (I)
  torch::Tensor interval_cells;    // (I): the run's cell

  PoolPlan To(const torch::Device& device) const;
};

// Builds the plan from each point's cell (-1 or >= cells: outside the grid).
PoolPlan MakePoolPlan(const torch::Tensor& point_cells, int64_t cells);

// Both: x (B, P, C) floating -> (B, cells, C), the per-cell sums; empty cells
// are 0. Differentiable in x. `fused` accumulates in float for bf16/fp16.
torch::Tensor NaivePool(const torch::Tensor& x, const PoolPlan& plan);
torch::Tensor FusedPool(const torch::Tensor& x, const PoolPlan& plan);

// BEV pooling variants by name: "naive" (NaivePool, the reference) and
// "fused" (FusedPool). A new variant is one entry in bev_pool.cc's list (and
// its name in the spec's validation); tests/worker/bev_test.cc checks every
// registered variant against the reference.
using PoolVariant = torch::Tensor (*)(const torch::Tensor& x, const PoolPlan& plan);
Registry<PoolVariant>& PoolRegistry();

// The variant `implementation` of PoolRegistry applied to x.
torch::Tensor Pool(const std::string& implementation, const torch::Tensor& x, const PoolPlan& plan);

// True when this build can run FusedPool on CUDA tensors.
bool FusedPoolHasCuda();

}  // namespace frontier::bev
