// Multi-scale necks between a backbone and a head (docs/bev.md, Neck): they
// fuse the output maps of the backbone's last stages (finest first) into one
// map at the finest level's resolution with `channels` channels.
//   fpn:   laterals (1x1 conv + norm to `channels`) on every level; top-down
//          p_i = lateral_i + up(p_{i+1}); output 3x3 conv-norm-act(p_0).
//          (Only the finest output is built: it is the one the head reads.)
//   bifpn: the same laterals, then `repeats` BiFPN layers, each a top-down
//          path td_i = node(p_i, up(td_{i+1})) for i < L-1 and a bottom-up
//          path o_i = node(p_i, td_i, down(o_{i-1})) for 0 < i < L-1,
//          o_{L-1} = node(p_{L-1}, down(o_{L-2})), o_0 = td_0; then the
//          output node(o_0, up(o_1), ..., up(o_{L-1})). A node is fast
//          normalized fusion sum_j w_j x_j / (eps + sum_j w_j), w = relu(its
//          learned weights, initially 1), then a depthwise-separable conv
//          (3x3 depthwise, 1x1 conv-norm-act) as in EfficientDet.
// up: nearest-neighbour resize to the finer map's size; down: adaptive max
// pool to the coarser map's size (neither counts FLOPs).
#pragma once

#include <string>
#include <vector>

#include <torch/torch.h>

#include "worker/trial/model/model.h"

namespace frontier::model {

// One BiFPN fusion node: fast normalized weighted sum, then a separable conv.
class FusionNodeImpl : public torch::nn::Module {
 public:
  FusionNodeImpl(const LayerStyle& style, int inputs, int channels);
  torch::Tensor forward(const std::vector<torch::Tensor>& inputs);
  // relu(w) / (eps + sum relu(w)): the weights the last forward applied.
  torch::Tensor NormalizedWeights() const;

  torch::Tensor weights;  // (inputs,)

 private:
  torch::nn::Conv2d depthwise_{nullptr};
  ConvNormAct pointwise_{nullptr};
};
TORCH_MODULE(FusionNode);

class NeckImpl : public torch::nn::Module {
 public:
  // `in_channels`: the channels of the levels forward receives, finest first.
  NeckImpl(const std::string& kind, const LayerStyle& style, const std::vector<int>& in_channels, int channels,
           int repeats);
  // Levels (B, in_channels[i], h_i, w_i), finest first -> (B, channels, h_0, w_0).
  torch::Tensor forward(const std::vector<torch::Tensor>& levels);

 private:
  torch::Tensor Fpn(std::vector<torch::Tensor> p);
  torch::Tensor BiFpn(std::vector<torch::Tensor> p);

  std::string kind_;
  int levels_;
  std::vector<ConvNormAct> laterals_;
  ConvNormAct fpn_out_{nullptr};
  std::vector<std::vector<FusionNode>> top_down_, bottom_up_;  // per layer: L-1 nodes each
  FusionNode bifpn_out_{nullptr};
};
TORCH_MODULE(Neck);

}  // namespace frontier::model
