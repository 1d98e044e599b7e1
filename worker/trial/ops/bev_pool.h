// BEV pooling, the lift-splat step of LSS: every frustum point carries a
// feature vector, and the features of all points that fall in one BEV cell are
// summed into that cell.
//
// The lift makes each point's vector the outer product of two factors: the
// depth probability of its bin and the image feature of its pixel. The op
// variants, compared by the search (docs/bev.md):
//  naive:       materialize the frustum (LiftFrustum), index_select of the
//               in-grid points, index_add into the grid (plain LibTorch ops;
//               autograd derives the backward). The reference.
//  fused:       materialize the frustum, then one custom operator with its own
//               forward and backward (BEVFusion's interval trick): the in-grid
//               points are sorted by cell once per rig (PoolPlan); the forward
//               reduces each run of same-cell points ("interval") into its
//               cell, the backward is a gather.
//  depth_fused: BEVPoolv2 (arXiv 2211.17111): never builds the frustum. Per
//               interval it accumulates depth[point] * features[pixel of the
//               point] into the cell; the backward computes the depth gradient
//               as a dot product over channels and the feature gradient from
//               intervals of the points sorted by feature row.
// CPU kernels run in parallel over intervals, each task owning its output rows:
// no atomics, deterministic, float accumulation for bf16/fp16. On CUDA
// (FRONTIER_WITH_CUDA_OPS builds) the same plan drives bev_pool_cuda.cu.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "worker/trial/ops/op.h"
#include "worker/trial/registry.h"

namespace frontier::bev {

// Layout of the lifted frustum of one sample: point p is (camera, depth bin,
// row, column), p = ((camera * depth_bins + bin) * height + row) * width +
// column; its image feature row is (camera * height + row) * width + column.
struct FrustumShape {
  int64_t cameras = 0, depth_bins = 0, height = 0, width = 0;
  int64_t points() const { return cameras * depth_bins * height * width; }
  int64_t feature_rows() const { return cameras * height * width; }
  bool defined() const { return points() > 0; }
};

// Assignment of the P points of one sample to `cells` BEV cells. Fixed for a
// rig, so it is built once and shared by every batch. All tensors int64, CPU
// or on the device of the features.
struct PoolPlan {
  int64_t points = 0;              // P
  int64_t cells = 0;               // grid * grid
  torch::Tensor point_cells;       // (P): cell of each point, -1 outside the grid
  torch::Tensor valid_points;      // (K): the in-grid points, ascending (naive)
  torch::Tensor valid_cells;       // (K): their cells (naive)
  torch::Tensor ranks;             // (K): the in-grid points sorted by cell, stable (fused, depth_fused)
  torch::Tensor interval_starts;   // (I): first position in `ranks` of each run of one cell
  torch::Tensor interval_lengths;  // (I)
  torch::Tensor interval_cells;    // (I): the run's cell

  // depth_fused only (set when the plan is built with a FrustumShape):
  FrustumShape shape;
  torch::Tensor feature_ranks;             // (K): the feature row of each point of `ranks`
  torch::Tensor feature_points;            // (K): the in-grid points sorted by feature row, stable
  torch::Tensor feature_point_cells;       // (K): their cells
  torch::Tensor feature_interval_starts;   // (J): first position in `feature_points` of each run of one row
  torch::Tensor feature_interval_lengths;  // (J)
  torch::Tensor feature_interval_rows;     // (J): the run's feature row

  PoolPlan To(const torch::Device& device) const;
};

// Builds the plan from each point's cell (-1 or >= cells: outside the grid).
// With a defined `shape` (shape.points() must equal the number of points) the
// plan also serves depth_fused.
PoolPlan MakePoolPlan(const torch::Tensor& point_cells, int64_t cells, const FrustumShape& shape = {});

// The lift: depth (B, N, D, h, w) x features (B, N, h, w, C) -> the frustum
// (B, N*D*h*w, C), point p's row depth[p] * features[its pixel], in the order
// of FrustumShape. Differentiable; this is the tensor depth_fused never builds.
torch::Tensor LiftFrustum(const torch::Tensor& depth, const torch::Tensor& features);

// Throws (c10::Error, naming the problem) unless the plan has its shape and
// depth is (B, cameras, depth_bins, height, width) and features (B, cameras,
// height, width, C) of that shape, floating, on one device. Every registered
// variant checks its inputs with it.
void CheckFactors(const torch::Tensor& depth, const torch::Tensor& features, const PoolPlan& plan);

// NaivePool, FusedPool: frustum x (B, P, C) floating -> (B, cells, C), the
// per-cell sums; empty cells are 0. Differentiable in x. `fused` accumulates
// in float for bf16/fp16.
torch::Tensor NaivePool(const torch::Tensor& x, const PoolPlan& plan);
torch::Tensor FusedPool(const torch::Tensor& x, const PoolPlan& plan);

// = NaivePool(LiftFrustum(depth, features), plan) up to rounding, without the
// frustum: (B, cells, C) in the promoted dtype of the two, differentiable in
// both (double backward is not supported). The plan needs its shape, with
// depth (B, shape.cameras, shape.depth_bins, shape.height, shape.width) and
// features (B, shape.cameras, shape.height, shape.width, C). Accumulates in
// float for bf16/fp16 (double for double). CUDA: float32 kernels (other
// dtypes are converted), in FRONTIER_WITH_CUDA_OPS builds only.
torch::Tensor DepthFusedPool(const torch::Tensor& depth, const torch::Tensor& features, const PoolPlan& plan);

// BEV pooling variants by name, all taking the lift's two factors (as
// DepthFusedPool) and returning the per-cell sums: "naive" (the reference:
// LiftFrustum + NaivePool), "fused" (LiftFrustum + FusedPool) and
// "depth_fused" (DepthFusedPool). A new variant is one entry in bev_pool.cc's
// list (and its name in the spec's validation); tests/worker/bev_test.cc
// checks every registered variant against the reference.
using PoolVariant = torch::Tensor (*)(const torch::Tensor& depth, const torch::Tensor& features,
                                      const PoolPlan& plan);
Registry<PoolVariant>& PoolRegistry();

// The variant `implementation` of PoolRegistry applied to the lift's factors:
// the op "bev_pool"'s dispatch point, where its calls are recorded for the
// correctness gate and the op benchmark (ops/op.h).
torch::Tensor Pool(const std::string& implementation, const torch::Tensor& depth, const torch::Tensor& features,
                   const PoolPlan& plan);

// The op "bev_pool" for ops::OpRegistry(): reference naive, depth drawn as a
// distribution over the bins; each call declares four edge cases (most cells
// empty, single-point intervals, every point in one cell, no point in the grid).
ops::Op PoolOp();

// True when this build can run FusedPool and DepthFusedPool on CUDA tensors.
bool FusedPoolHasCuda();

}  // namespace frontier::bev
