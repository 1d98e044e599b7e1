// A trained network as it would ship (docs/trial-output.md, Deploy): every
// ConvNormAct (model.h) deployed as
//  float: fp32, its batch norm folded into the conv's weight and bias;
//  int8:  post-training static quantization on one of LibTorch's quantized
//         CPU engines: per-channel symmetric int8 weights (of the folded
//         conv), per-tensor affine uint8 activations whose ranges are the
//         min and max seen while calibration inputs run through the float
//         network; a ReLU after the conv is fused into it.
// An int8 layer quantizes a float input and dequantizes its output, except
// where it feeds the next int8 layer of a Sequential directly: then the
// quantized tensor goes on as it is (the stem's convs, a block's body up to
// its last conv). A conv followed
// by a group or layer norm is quantized with its own bias and the norm runs
// in fp32 after it. Layers outside a ConvNormAct (linear layers, attention,
// squeeze-and-excitation, a patchify stem, ConvNeXt's depthwise conv) stay
// fp32 and are named with the reason.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "worker/trial/model/model.h"

namespace frontier::model {

// The min and max of every tensor observed (a MinMax observer).
struct ActivationRange {
  double min = 0, max = 0;
  bool seen = false;
  void Observe(const torch::Tensor& x);
};

// Affine uint8 parameters covering `range` widened to hold 0 (so that zero
// is exact, as padding needs): scale = (max - min) / 255, zero point
// round(-min / scale) in [0, 255].
struct QuantParams {
  double scale = 1;
  int64_t zero_point = 0;
};
QuantParams Uint8Params(const ActivationRange& range);

// A conv with what follows it folded in where it can be: with a batch norm,
// weight * gamma / sqrt(var + eps) per output channel and
// (bias - mean) * gamma / sqrt(var + eps) + beta; with no norm, the conv as
// it is; with a group or layer norm, the conv as it is and `folded` false.
struct FoldedConv {
  torch::Tensor weight, bias;  // fp32; bias defined (zeros when the conv had none)
  bool folded = true;          // false: the norm still runs after the conv
};
FoldedConv Fold(ConvNormActImpl& layer);

// Per-channel symmetric int8 weights: scale_c = max |w_c| / 127 (1 for an
// all-zero channel), zero points 0.
torch::Tensor QuantizeWeightPerChannel(const torch::Tensor& weight);

struct DeployedLayers {
  int quantized = 0;                                            // ConvNormActs in int8
  std::vector<std::pair<std::string, std::string>> float_layers;  // {module name, why it stays fp32}
  int64_t quantized_flops_per_sample = 0;  // forward FLOPs of the int8 convs, per sample
  int64_t size_bytes = 0;                  // the deployed weights and buffers
  std::string engine;                      // int8: the quantized engine
};

// Every ConvNormAct of `network` deployed as float.
DeployedLayers DeployFloat(torch::nn::Module& network);

// Every ConvNormAct of `network` deployed as int8 on `engine` ("onednn" or
// "qnnpack"; empty: the first of QuantizedEngines()), the activation ranges
// observed while `calibrate` runs forward passes (the float network, in eval
// mode, without autograd). Throws std::runtime_error naming the problem: an
// engine this build lacks, a layer no calibration input reached.
DeployedLayers DeployInt8(torch::nn::Module& network, const std::string& engine,
                          const std::function<void()>& calibrate);

// The training layers back.
void Undeploy(torch::nn::Module& network);

// The quantized engines this build has, by preference: "onednn", "qnnpack".
std::vector<std::string> QuantizedEngines();

}  // namespace frontier::model
