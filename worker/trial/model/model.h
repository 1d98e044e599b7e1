// The model builder: turns a ResolvedArch (plain data, see
// search_spaces/trial_spec.h) into LibTorch modules.
//
// A network is a Backbone (stem + stages, producing a feature map) followed by
// a task head. Classification uses Classifier; the BEV task
// (worker/trial/tasks/bev_model.h) puts a view transform and a BEV encoder
// behind the same Backbone.
//
// Stems, block families and attention kinds are looked up by name in the
// registries below (StemRegistry, BlockRegistry, AttentionRegistry): a new
// kind is one entry in model.cc's built-in list (and its name in the spec's
// validation, search_spaces/trial_spec_arch.cc).
#pragma once

#include <functional>
#include <string>

#include <torch/torch.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/registry.h"

namespace frontier::model {

torch::Tensor Activate(const std::string& activation, const torch::Tensor& x);

// `x` cast to the dtype of `weight`. Under CPU autocast a bf16 activation can
// reach a layer/group norm whose parameters are fp32, which LibTorch's CPU
// kernels reject; those norms then run in fp32, as autocast does on CUDA.
torch::Tensor InParameterDtype(const torch::Tensor& x, const torch::Tensor& weight);

// Normalization over the channels of an NCHW map: batch, group, layer
// (per position over channels, as in ConvNeXt) or none.
class Norm2dImpl : public torch::nn::Module {
 public:
  Norm2dImpl(const std::string& kind, int channels, int groups);
  torch::Tensor forward(const torch::Tensor& x);
  const std::string& kind() const { return kind_; }
  torch::nn::BatchNorm2d& batch() { return batch_; }  // null unless kind() == "batch"

 private:
  std::string kind_;
  torch::nn::BatchNorm2d batch_{nullptr};
  torch::nn::GroupNorm group_{nullptr};
  torch::nn::LayerNorm layer_{nullptr};
};
TORCH_MODULE(Norm2d);

// Shared settings of every conv layer in one network.
struct LayerStyle {
  std::string norm = "batch";
  int norm_groups = 8;
  std::string activation = "relu";
};

// conv(k, stride, groups) -> norm -> optional activation. The conv has a bias
// only when there is no norm after it.
class ConvNormActImpl : public torch::nn::Module {
 public:
  ConvNormActImpl(const LayerStyle& style, int in, int out, int kernel, int stride, int groups, bool act);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Conv2d& conv() { return conv_; }
  Norm2d& norm() { return norm_; }
  const std::string& activation() const { return activation_; }
  // The deployed layer (worker/trial/model/deploy.h: batch norm folded, or
  // int8): when set, forward runs it instead of conv -> norm -> activation.
  using Deployed = std::function<torch::Tensor(const torch::Tensor&)>;
  void Deploy(Deployed deployed) { deployed_ = std::move(deployed); }

 private:
  torch::nn::Conv2d conv_{nullptr};
  Norm2d norm_{nullptr};
  std::string activation_;  // empty: none
  Deployed deployed_;
};
TORCH_MODULE(ConvNormAct);

// Squeeze-and-excitation: channel gates from globally pooled features.
class SqueezeExciteImpl : public torch::nn::Module {
 public:
  SqueezeExciteImpl(int channels, int reduced, std::string activation);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d reduce_{nullptr}, expand_{nullptr};
  std::string activation_;
};
TORCH_MODULE(SqueezeExcite);

// Parameters of one block as the builder hands them over.
struct BlockConfig {
  std::string family;  // basic | bottleneck | convnext | mbconv | fused_mbconv | moe
  int in = 0, out = 0, stride = 1, kernel = 3;
  double expansion = 4;
  bool se = false;
  MoeSpec moe;  // moe only
};

// The layers of one block as its family's builder makes them. ConvBlock
// registers them (downsample, body, shortcut: that order) and computes
// x' = downsample(x); y = body(x'); y += shortcut(x') or x' when residual;
// then the activation when activate_after_sum.
struct BlockLayers {
  torch::nn::Sequential body;
  torch::nn::Sequential shortcut{nullptr};    // null: identity
  torch::nn::Sequential downsample{nullptr};  // null: none
  bool residual = true;
  bool activate_after_sum = false;  // ResNet families apply the activation after the sum
};

// Block families by name (the built-ins are in model.cc):
//  basic:        kxk/s -> kxk, residual (1x1/s projection when shapes change)
//  bottleneck:   1x1 reduce to out/expansion -> kxk/s -> 1x1, residual
//  convnext:     [norm + sxs/s downsample] -> depthwise kxk -> norm -> 1x1 expand -> act -> 1x1, residual
//  mbconv:       1x1 expand -> depthwise kxk/s -> [SE] -> 1x1 project, residual when shapes match
//  fused_mbconv: kxk/s expand -> [SE] -> 1x1 project (a single kxk/s conv at expansion 1), same residual
//  moe:          [1x1/s conv + norm] -> x + mixture-of-experts MLP over positions (moe.h), no conv
using BlockBuilder = std::function<BlockLayers(const LayerStyle& style, const BlockConfig& config)>;
Registry<BlockBuilder>& BlockRegistry();

// Any conv block family, chosen by BlockConfig::family from BlockRegistry.
class ConvBlockImpl : public torch::nn::Module {
 public:
  ConvBlockImpl(const LayerStyle& style, const BlockConfig& config);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  BlockConfig config_;
  std::string activation_;
  torch::nn::Sequential body_{nullptr};
  torch::nn::Sequential shortcut_{nullptr};    // null: identity (or none when !residual_)
  torch::nn::Sequential downsample_{nullptr};  // null: none
  bool residual_ = true;
  bool activate_after_sum_ = false;
};
TORCH_MODULE(ConvBlock);

// An attention kind: how tokens are formed and how they are mixed.
struct AttentionKind {
  // (B, h, N, d) queries and (B, kv_heads, N, d) keys and values ->
  // (B, h, N, d). Called once per layer and forward.
  using Mixer = torch::Tensor (*)(torch::Tensor q, torch::Tensor k, torch::Tensor v);
  Mixer mix = nullptr;
  bool grouped_kv = false;  // spec.kv_heads key/value heads (else one per query head)
  bool windowed = false;    // tokens are the spec.window x spec.window tiles of the map (else all positions)
};

// Attention kinds by name (the built-ins are in model.cc; "none" is no layer):
//  mhsa:   global softmax attention, `heads` heads of `head_dim`
//  window: the same inside non-overlapping window x window tiles (Swin)
//  gqa:    `kv_heads` key/value heads shared by groups of query heads (1 = MQA)
//  linear: ReLU linear attention, out = phi(Q)(phi(K)^T V) / phi(Q) sum(phi(K)) (EfficientViT)
Registry<AttentionKind>& AttentionRegistry();

// Token mixing on an NCHW map as a pre-norm residual layer:
// x + proj(mix(norm(tokens(x)))), the kind from AttentionRegistry. The
// built-in softmax kinds (mhsa, window, gqa) compute softmax(q k^T/sqrt(d)) v
// with the op attention_kernel's variant `kernel` (ops/attention_kernel.h,
// arch.ops.attention_kernel); other kinds ignore it.
class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const AttentionSpec& spec, int channels, const std::string& norm,
                const std::string& kernel = "naive");
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::Tensor Mix(const torch::Tensor& tokens);  // (B, N, C) -> (B, N, heads*head_dim)

  AttentionSpec spec_;
  AttentionKind kind_;
  std::string kernel_;
  int kv_heads_;
  bool use_norm_;
  torch::nn::LayerNorm norm_{nullptr};
  torch::nn::Linear q_{nullptr}, kv_{nullptr}, proj_{nullptr};
};
TORCH_MODULE(Attention);

// Stems by name (the built-ins are in model.cc): append the stem's layers
// for `in_channels` input channels to `stem`.
//  conv3x3:  3x3/stride conv-norm-act, then depth - 1 more 3x3 ones
//  patchify: stride x stride conv with that stride, then norm (ViT / ConvNeXt)
//  resnet:   7x7/stride conv-norm-act, then 3x3/2 max pool
using StemBuilder = std::function<void(const LayerStyle& style, int in_channels, const StemSpec& spec,
                                       torch::nn::Sequential& stem)>;
Registry<StemBuilder>& StemRegistry();

// Appends the blocks of `stage` to `seq`, each followed by an attention layer
// from stage.attention_from_block on when the stage has attention: the one
// stage loop of backbones and BEV encoders.
void AppendStage(const ResolvedStage& stage, const ResolvedArch& arch, torch::nn::Sequential& seq);

// Stem + stages: image (B, C, H, W) -> feature map (B, features, h, w).
class BackboneImpl : public torch::nn::Module {
 public:
  explicit BackboneImpl(const ResolvedArch& arch);
  torch::Tensor forward(const torch::Tensor& x);
  // The output map of every stage, in order (forward's is the last): what a
  // multi-scale neck fuses.
  std::vector<torch::Tensor> Stages(const torch::Tensor& x);
  int features() const { return features_; }

 private:
  torch::nn::Sequential stem_;
  std::vector<torch::nn::Sequential> stages_;
  int features_;
};
TORCH_MODULE(Backbone);

// A whole network as the trainer sees it: a batch of inputs -> the task's
// logits (classes for classification, BEV cells for bev-synthetic).
class NetworkImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
};

// Global average pool -> dropout -> linear classifier.
class ClassifierImpl : public NetworkImpl {
 public:
  explicit ClassifierImpl(const ResolvedArch& arch);
  torch::Tensor forward(const torch::Tensor& x) override;  // logits (B, classes)

 private:
  Backbone backbone_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(Classifier);

int64_t CountParameters(torch::nn::Module& module);

// The summed, weighted load-balancing losses of the network's moe layers from
// its last training forward (moe.h), which are then forgotten; undefined when
// there are none. The trainer adds it to the training loss.
torch::Tensor TakeAuxiliaryLoss(torch::nn::Module& network);

// What the network's moe layers routed in its last forward, summed over
// layers: {layers, tokens, assignments (tokens x top_k), kept, dropped,
// slots (experts x capacity)}; empty when it has none. The trainer reports
// it for the forward whose FLOPs it counted (result flops.moe).
nlohmann::json MoeRoutingSummary(torch::nn::Module& network);

// Puts every 4-d parameter and buffer in channels_last (or back to contiguous).
void SetMemoryFormat(torch::nn::Module& module, at::MemoryFormat format);

}  // namespace frontier::model
