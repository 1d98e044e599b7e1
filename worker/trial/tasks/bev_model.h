// The BEV network of the bev task (tasks/bev_task.cc, docs/bev.md):
//   cameras (B, N*3, H, W) -> shared Backbone on (B*N, 3, H, W)
//   -> [neck (arch.bev.neck fpn | bifpn, model/neck.h): the last neck_levels
//      stages' maps fused into one at the finest of them]
//   -> view transform into the grid x grid BEV map:
//        lss:       1x1 conv to D depth logits + C context channels, softmax
//                   over depth; BEV pooling (naive | fused | depth_fused) of
//                   their outer product, a frustum point cloud of N*D*h*w
//                   points per sample (depth_fused never materializes it)
//        ipm:       every BEV cell centre on the ground (z = 0) projected into
//                   every camera, features bilinearly sampled and averaged
//                   over the cameras that see it, 1x1 conv to C channels
//                   (only the cameras that see a point sample it: the taps
//                   are a fixed sparse matrix, ops/bev_sample.h)
//        mean_lift: the same at `heights` heights from 0 to max_height
//                   (Simple-BEV's parameter-free lifting), heights stacked
//                   into channels, 1x1 conv to C
//   -> BEV encoder (block stages) -> head: 3x3 conv-norm-act, 1x1 conv to one
//      occupancy logit per cell (bilinearly upsampled when the encoder
//      downsampled) -> logits (B, grid, grid).
// The geometry (frustum cells, sampling taps) depends only on the rig and
// is computed once at construction; the pooling plan once per geometry in a
// process (LssPoolPlan).
#pragma once

#include <memory>
#include <string>

#include <torch/torch.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/data/bev_scene.h"
#include "worker/trial/model/model.h"
#include "worker/trial/model/neck.h"
#include "worker/trial/ops/bev_pool.h"
#include "worker/trial/ops/bev_sample.h"

namespace frontier::model {

// lss with a depth_loss_weight > 0: the BEVDepth-style depth supervision is on
// (the dataset then carries depth targets at the feature resolution).
inline bool DepthSupervised(const ResolvedBev& bev) {
  return bev.enabled && bev.spec.view_transform == "lss" && bev.spec.depth_loss_weight > 0;
}

class BevNetImpl : public NetworkImpl {
 public:
  BevNetImpl(const ResolvedArch& arch, const bev::Rig& rig);
  torch::Tensor forward(const torch::Tensor& x) override;  // (B, N*3, H, W) -> logits (B, grid, grid)

  // Image features lifted into the BEV grid, before the encoder: (B, C, grid, grid).
  torch::Tensor Lift(const torch::Tensor& x);
  // What the view transform lifts: the backbone's (or neck's) map of every
  // camera, (B*N, bev.lift_channels, bev.lift_height, bev.lift_width).
  torch::Tensor ImageFeatures(const torch::Tensor& x);
  const bev::PoolPlan& pool_plan() const { return *plan_; }  // lss only, on the CPU

  // lss with arch.bev.depth_loss_weight > 0: the weighted depth loss of the
  // last training forward (BEVDepth-style supervision): cross-entropy of the
  // depth logits (B*N, D, h, w) against the bin of `depth` (B, N, h, w),
  // metres, as Dataset::depth; depths outside [depth_min, depth_max) (sky
  // included) are ignored. Releases the stored logits. An undefined tensor
  // when depth supervision is off or no training forward ran.
  torch::Tensor DepthLoss(const torch::Tensor& depth);
  bool depth_supervised() const { return DepthSupervised(bev_); }

 private:
  torch::Tensor LiftSplat(const torch::Tensor& features, int64_t batch);
  torch::Tensor Sample(const torch::Tensor& features, int64_t batch);

  ResolvedBev bev_;
  int cameras_;
  int grid_;
  Backbone backbone_{nullptr};
  Neck neck_{nullptr};                        // arch.bev.neck != none
  torch::nn::Conv2d depth_context_{nullptr};  // lss
  Norm2d lss_norm_{nullptr};                  // lss: after pooling
  ConvNormAct reduce_{nullptr};               // ipm, mean_lift: heights x features -> channels
  torch::nn::Sequential encoder_;
  ConvNormAct head_conv_{nullptr};
  torch::nn::Conv2d head_out_{nullptr};
  std::string pooling_;  // lss: spec.pooling, a variant of bev::PoolRegistry (looked up at construction)
  torch::Tensor depth_logits_;       // lss, depth-supervised: of the last training forward
  std::shared_ptr<const bev::PoolPlan> plan_;  // lss: on the CPU, shared by networks of one geometry
  bev::PoolPlan device_plan_;                  // a copy on the features' device, made on first use there
  // ipm, mean_lift: the bilinear taps of every (height, row, column) point of
  // the grid into the (camera, row, column) feature rows of the cameras that
  // see it; moved to the features' device on first use there.
  int sample_heights_ = 0;
  bev::SamplePlan sample_plan_;
};
TORCH_MODULE(BevNet);

// Depth bin of each depth (metres): floor((depth - depth_min) / step), -100
// (cross-entropy's ignore index) outside [depth_min, depth_max) or not finite.
torch::Tensor DepthBins(const torch::Tensor& depth, const BevArchSpec& spec);

// The BEV pooling plan of the LSS lift (FrustumCells, with the frustum's
// shape, so it serves every pooling variant), built once per geometry (the
// rig's cameras and grid, the feature size, the depth bins) in a process and
// shared: a second network of the same geometry gets the same plan.
// Thread-safe. The cache keeps every geometry it has seen (a trial has one).
std::shared_ptr<const bev::PoolPlan> LssPoolPlan(const bev::Rig& rig, int feature_height, int feature_width,
                                                 const BevArchSpec& spec);

// Cell of every frustum point of the LSS lift, in the order of the lifted
// features ((camera, depth bin, row, column) of the h x w feature map),
// -1 outside the grid or outside the height band [-1, 3] m.
torch::Tensor FrustumCells(const bev::Rig& rig, int feature_height, int feature_width,
                           const BevArchSpec& spec);

}  // namespace frontier::model
