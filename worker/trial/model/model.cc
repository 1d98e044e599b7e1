#include "worker/trial/model/model.h"

#include <cmath>

#include "worker/trial/model/moe.h"
#include "worker/trial/ops/attention_kernel.h"

namespace frontier::model {
namespace nn = torch::nn;

torch::Tensor Activate(const std::string& activation, const torch::Tensor& x) {
  if (activation == "relu") return torch::relu(x);
  if (activation == "gelu") return torch::gelu(x);
  if (activation == "silu") return torch::silu(x);
  TORCH_CHECK(false, "unknown activation '", activation, "'");
}

Norm2dImpl::Norm2dImpl(const std::string& kind, int channels, int groups) : kind_(kind) {
  if (kind == "batch") {
    batch_ = register_module("batch", nn::BatchNorm2d(channels));
  } else if (kind == "group") {
    group_ = register_module("group", nn::GroupNorm(nn::GroupNormOptions(groups, channels)));
  } else if (kind == "layer") {
    layer_ = register_module("layer", nn::LayerNorm(nn::LayerNormOptions({channels}).eps(1e-6)));
  } else {
    TORCH_CHECK(kind == "none", "unknown norm '", kind, "'");
  }
}

torch::Tensor InParameterDtype(const torch::Tensor& x, const torch::Tensor& weight) {
  return x.scalar_type() == weight.scalar_type() ? x : x.to(weight.scalar_type());
}

torch::Tensor Norm2dImpl::forward(const torch::Tensor& x) {
  if (batch_) return batch_(x);  // LibTorch's CPU batch norm takes bf16 input with fp32 parameters
  if (group_) return group_(InParameterDtype(x, group_->weight));
  // NHWC view: contiguous when x is channels_last, so no copy in that layout.
  if (layer_) return layer_(InParameterDtype(x.permute({0, 2, 3, 1}), layer_->weight)).permute({0, 3, 1, 2});
  return x;
}

ConvNormActImpl::ConvNormActImpl(const LayerStyle& style, int in, int out, int kernel, int stride, int groups,
                                 bool act)
    : activation_(act ? style.activation : "") {
  conv_ = register_module("conv", nn::Conv2d(nn::Conv2dOptions(in, out, kernel)
                                                 .stride(stride)
                                                 .padding(kernel / 2)
                                                 .groups(groups)
                                                 .bias(style.norm == "none")));
  norm_ = register_module("norm", Norm2d(style.norm, out, style.norm_groups));
}

torch::Tensor ConvNormActImpl::forward(const torch::Tensor& x) {
  if (deployed_) return deployed_(x);
  torch::Tensor y = norm_(conv_(x));
  return activation_.empty() ? y : Activate(activation_, y);
}

SqueezeExciteImpl::SqueezeExciteImpl(int channels, int reduced, std::string activation)
    : activation_(std::move(activation)) {
  reduce_ = register_module("reduce", nn::Conv2d(nn::Conv2dOptions(channels, reduced, 1)));
  expand_ = register_module("expand", nn::Conv2d(nn::Conv2dOptions(reduced, channels, 1)));
}

torch::Tensor SqueezeExciteImpl::forward(const torch::Tensor& x) {
  torch::Tensor s = x.mean({2, 3}, /*keepdim=*/true);
  s = expand_(Activate(activation_, reduce_(s)));
  return x * torch::sigmoid(s);
}

namespace {

int Scaled(int channels, double factor) {
  return std::max(1, static_cast<int>(std::lround(channels * factor)));
}

}  // namespace

namespace {

nn::Sequential Projection(const LayerStyle& style, const BlockConfig& c) {
  nn::Sequential s;
  s->push_back(ConvNormAct(style, c.in, c.out, 1, c.stride, 1, false));
  return s;
}

bool SameShape(const BlockConfig& c) { return c.stride == 1 && c.in == c.out; }

BlockLayers BasicBlock(const LayerStyle& style, const BlockConfig& c) {
  BlockLayers b;
  b.body->push_back(ConvNormAct(style, c.in, c.out, c.kernel, c.stride, 1, true));
  b.body->push_back(ConvNormAct(style, c.out, c.out, c.kernel, 1, 1, false));
  if (!SameShape(c)) b.shortcut = Projection(style, c);
  b.activate_after_sum = true;
  return b;
}

BlockLayers Bottleneck(const LayerStyle& style, const BlockConfig& c) {
  BlockLayers b;
  const int mid = Scaled(c.out, 1.0 / c.expansion);
  b.body->push_back(ConvNormAct(style, c.in, mid, 1, 1, 1, true));
  b.body->push_back(ConvNormAct(style, mid, mid, c.kernel, c.stride, 1, true));
  b.body->push_back(ConvNormAct(style, mid, c.out, 1, 1, 1, false));
  if (!SameShape(c)) b.shortcut = Projection(style, c);
  b.activate_after_sum = true;
  return b;
}

BlockLayers ConvNextBlock(const LayerStyle& style, const BlockConfig& c) {
  BlockLayers b;
  if (!SameShape(c)) {  // ConvNeXt's separate downsampling layer: norm, then a stride x stride conv
    b.downsample = nn::Sequential();
    b.downsample->push_back(Norm2d(style.norm, c.in, style.norm_groups));
    b.downsample->push_back(nn::Conv2d(nn::Conv2dOptions(c.in, c.out, c.stride).stride(c.stride)));
  }
  const int hidden = Scaled(c.out, c.expansion);
  b.body->push_back(
      nn::Conv2d(nn::Conv2dOptions(c.out, c.out, c.kernel).padding(c.kernel / 2).groups(c.out)));
  b.body->push_back(Norm2d(style.norm, c.out, style.norm_groups));
  LayerStyle plain = style;
  plain.norm = "none";  // the inverted MLP has no norms of its own, and biases
  b.body->push_back(ConvNormAct(plain, c.out, hidden, 1, 1, 1, true));
  b.body->push_back(ConvNormAct(plain, hidden, c.out, 1, 1, 1, false));
  return b;
}

BlockLayers MbConv(const LayerStyle& style, const BlockConfig& c) {
  BlockLayers b;
  const int mid = Scaled(c.in, c.expansion);
  if (mid != c.in) b.body->push_back(ConvNormAct(style, c.in, mid, 1, 1, 1, true));
  b.body->push_back(ConvNormAct(style, mid, mid, c.kernel, c.stride, mid, true));
  if (c.se) b.body->push_back(SqueezeExcite(mid, Scaled(c.in, 0.25), style.activation));
  b.body->push_back(ConvNormAct(style, mid, c.out, 1, 1, 1, false));
  b.residual = SameShape(c);
  return b;
}

BlockLayers FusedMbConv(const LayerStyle& style, const BlockConfig& c) {
  BlockLayers b;
  const int mid = Scaled(c.in, c.expansion);
  if (mid == c.in && !c.se) {
    b.body->push_back(ConvNormAct(style, c.in, c.out, c.kernel, c.stride, 1, true));
  } else {
    b.body->push_back(ConvNormAct(style, c.in, mid, c.kernel, c.stride, 1, true));
    if (c.se) b.body->push_back(SqueezeExcite(mid, Scaled(c.in, 0.25), style.activation));
    b.body->push_back(ConvNormAct(style, mid, c.out, 1, 1, 1, false));
  }
  b.residual = SameShape(c);
  return b;
}

}  // namespace

Registry<BlockBuilder>& BlockRegistry() {
  static Registry<BlockBuilder> registry = [] {
    Registry<BlockBuilder> r("block family");
    r.Add("basic", BasicBlock);
    r.Add("bottleneck", Bottleneck);
    r.Add("convnext", ConvNextBlock);
    r.Add("mbconv", MbConv);
    r.Add("fused_mbconv", FusedMbConv);
    r.Add("moe", MoeBlock);
    return r;
  }();
  return registry;
}

ConvBlockImpl::ConvBlockImpl(const LayerStyle& style, const BlockConfig& c)
    : config_(c), activation_(style.activation) {
  BlockLayers layers = BlockRegistry().At(c.family)(style, c);
  residual_ = layers.residual;
  activate_after_sum_ = layers.activate_after_sum;
  if (layers.downsample) downsample_ = register_module("downsample", layers.downsample);
  body_ = register_module("body", layers.body);
  if (layers.shortcut) shortcut_ = register_module("shortcut", layers.shortcut);
}

torch::Tensor ConvBlockImpl::forward(const torch::Tensor& input) {
  torch::Tensor x = downsample_ ? downsample_->forward(input) : input;
  torch::Tensor y = body_->forward(x);
  if (!residual_) return y;
  y = y + (shortcut_ ? shortcut_->forward(x) : x);
  return activate_after_sum_ ? Activate(activation_, y) : y;
}

namespace {

// Softmax attention with the attention kernel `kernel`; every group of
// h / kv_heads query heads shares one k/v head.
torch::Tensor SoftmaxAttention(const std::string& kernel, const torch::Tensor& q, torch::Tensor k,
                               torch::Tensor v) {
  const int64_t h = q.size(1), kv_heads = k.size(1);
  if (kv_heads != h) {
    k = k.repeat_interleave(h / kv_heads, 1);
    v = v.repeat_interleave(h / kv_heads, 1);
  }
  return attention::Attend(kernel, q, k, v);
}

// The softmax kinds' mixer, as a plugin calling the registry's entry sees it:
// the reference kernel. AttentionImpl runs these kinds with its own kernel.
torch::Tensor SoftmaxMix(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
  return SoftmaxAttention("naive", q, std::move(k), std::move(v));
}

// ReLU linear attention: phi(Q)(phi(K)^T V) / (phi(Q) sum(phi(K))), the
// normalizer in fp32.
torch::Tensor LinearMix(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
  q = torch::relu(q);
  k = torch::relu(k);
  torch::Tensor kv_state = torch::matmul(k.transpose(-2, -1), v);    // (B, h, d, d)
  torch::Tensor num = torch::matmul(q, kv_state).to(torch::kFloat);  // (B, h, N, d)
  torch::Tensor den = (q.to(torch::kFloat) * k.to(torch::kFloat).sum(2, true)).sum(-1, true);
  return (num / (den + 1e-6)).to(q.scalar_type());
}

}  // namespace

Registry<AttentionKind>& AttentionRegistry() {
  static Registry<AttentionKind> registry = [] {
    Registry<AttentionKind> r("attention kind");
    r.Add("mhsa", {SoftmaxMix, /*grouped_kv=*/false, /*windowed=*/false});
    r.Add("window", {SoftmaxMix, /*grouped_kv=*/false, /*windowed=*/true});
    r.Add("gqa", {SoftmaxMix, /*grouped_kv=*/true, /*windowed=*/false});
    r.Add("linear", {LinearMix, /*grouped_kv=*/false, /*windowed=*/false});
    return r;
  }();
  return registry;
}

AttentionImpl::AttentionImpl(const AttentionSpec& spec, int channels, const std::string& norm,
                             const std::string& kernel)
    : spec_(spec),
      kind_(AttentionRegistry().At(spec.kind)),
      kernel_(kernel),
      kv_heads_(kind_.grouped_kv ? spec.kv_heads : spec.heads),
      use_norm_(norm != "none") {
  TORCH_CHECK(spec.head_dim > 0, "attention head_dim must be resolved before building");
  attention::KernelRegistry().At(kernel_);  // throws naming a kernel no one registered
  const int inner = spec.heads * spec.head_dim;
  if (use_norm_) norm_ = register_module("norm", nn::LayerNorm(nn::LayerNormOptions({channels})));
  q_ = register_module("q", nn::Linear(channels, inner));
  kv_ = register_module("kv", nn::Linear(channels, 2 * kv_heads_ * spec.head_dim));
  proj_ = register_module("proj", nn::Linear(inner, channels));
}

torch::Tensor AttentionImpl::Mix(const torch::Tensor& t) {
  const int64_t b = t.size(0), n = t.size(1);
  const int64_t h = spec_.heads, d = spec_.head_dim;
  torch::Tensor q = q_(t).view({b, n, h, d}).transpose(1, 2);                        // (B, h, N, d)
  torch::Tensor kv = kv_(t).view({b, n, 2, kv_heads_, d}).permute({2, 0, 3, 1, 4});  // (2, B, kvh, N, d)
  torch::Tensor out =
      kind_.mix == SoftmaxMix ? SoftmaxAttention(kernel_, q, kv[0], kv[1]) : kind_.mix(q, kv[0], kv[1]);
  return out.transpose(1, 2).reshape({b, n, h * d});
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), c = x.size(1), hh = x.size(2), ww = x.size(3);
  torch::Tensor tokens;
  int64_t win = 0;
  if (kind_.windowed) {
    win = spec_.window;
    TORCH_CHECK(hh % win == 0 && ww % win == 0, "window ", win, " does not divide the ", hh, "x", ww, " map");
    // (B, C, H, W) -> (B * windows, win*win, C)
    tokens = x.view({b, c, hh / win, win, ww / win, win})
                 .permute({0, 2, 4, 3, 5, 1})
                 .reshape({b * (hh / win) * (ww / win), win * win, c});
  } else {
    tokens = x.flatten(2).transpose(1, 2);  // (B, HW, C)
  }
  torch::Tensor y = proj_(Mix(use_norm_ ? norm_(InParameterDtype(tokens, norm_->weight)) : tokens));
  torch::Tensor out = tokens + y;
  if (win) {
    return out.view({b, hh / win, ww / win, win, win, c}).permute({0, 5, 1, 3, 2, 4}).reshape({b, c, hh, ww});
  }
  return out.transpose(1, 2).reshape({b, c, hh, ww});
}

Registry<StemBuilder>& StemRegistry() {
  static Registry<StemBuilder> registry = [] {
    Registry<StemBuilder> r("stem");
    r.Add("conv3x3", [](const LayerStyle& style, int in, const StemSpec& stem, nn::Sequential& seq) {
      seq->push_back(ConvNormAct(style, in, stem.width, 3, stem.stride, 1, true));
      for (int i = 1; i < stem.depth; ++i)
        seq->push_back(ConvNormAct(style, stem.width, stem.width, 3, 1, 1, true));
    });
    r.Add("patchify", [](const LayerStyle& style, int in, const StemSpec& stem, nn::Sequential& seq) {
      seq->push_back(nn::Conv2d(nn::Conv2dOptions(in, stem.width, stem.stride).stride(stem.stride)));
      seq->push_back(Norm2d(style.norm, stem.width, style.norm_groups));
    });
    r.Add("resnet", [](const LayerStyle& style, int in, const StemSpec& stem, nn::Sequential& seq) {
      seq->push_back(ConvNormAct(style, in, stem.width, 7, stem.stride, 1, true));
      seq->push_back(nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1)));
    });
    return r;
  }();
  return registry;
}

void AppendStage(const ResolvedStage& s, const ResolvedArch& arch, nn::Sequential& seq) {
  const LayerStyle style{arch.norm, arch.norm_groups, arch.activation};
  for (int i = 0; i < s.depth; ++i) {
    BlockConfig block{
        s.block, i == 0 ? s.in_width : s.width, s.width, i == 0 ? s.stride : 1, s.kernel, s.expansion, s.se, s.moe};
    seq->push_back(ConvBlock(style, block));
    if (s.attention.kind != "none" && i >= s.attention_from_block) {
      seq->push_back(Attention(s.attention, s.width, arch.norm, arch.ops.attention_kernel));
    }
  }
}

BackboneImpl::BackboneImpl(const ResolvedArch& arch) : features_(arch.features) {
  const LayerStyle style{arch.norm, arch.norm_groups, arch.activation};
  StemRegistry().At(arch.stem.kind)(style, arch.input.channels, arch.stem, stem_);
  register_module("stem", stem_);

  for (const ResolvedStage& s : arch.stages) {
    nn::Sequential stage;
    AppendStage(s, arch, stage);
    stages_.push_back(register_module("stage" + std::to_string(stages_.size()), stage));
  }
}

torch::Tensor BackboneImpl::forward(const torch::Tensor& input) {
  torch::Tensor x = stem_->forward(input);
  for (auto& stage : stages_) x = stage->forward(x);
  return x;
}

std::vector<torch::Tensor> BackboneImpl::Stages(const torch::Tensor& input) {
  std::vector<torch::Tensor> maps;
  torch::Tensor x = stem_->forward(input);
  for (auto& stage : stages_) maps.push_back(x = stage->forward(x));
  return maps;
}

ClassifierImpl::ClassifierImpl(const ResolvedArch& arch) {
  backbone_ = register_module("backbone", Backbone(arch));
  dropout_ = register_module("dropout", nn::Dropout(arch.dropout));
  fc_ = register_module("fc", nn::Linear(arch.features, arch.input.classes));
}

torch::Tensor ClassifierImpl::forward(const torch::Tensor& x) {
  torch::Tensor features = backbone_(x).mean({2, 3});
  return fc_(dropout_(features));
}

int64_t CountParameters(nn::Module& module) {
  int64_t n = 0;
  for (const auto& p : module.parameters()) n += p.numel();
  return n;
}

void SetMemoryFormat(nn::Module& module, at::MemoryFormat format) {
  torch::NoGradGuard no_grad;
  for (auto& p : module.parameters()) {
    if (p.dim() == 4) p.set_data(p.contiguous(format));
  }
  for (auto& b : module.buffers()) {
    if (b.dim() == 4) b.set_data(b.contiguous(format));
  }
}

}  // namespace frontier::model
