#include "worker/trial/model/deploy.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <stdexcept>

#include "worker/trial/model/moe.h"

namespace frontier::model {
namespace {

// The ConvNormActs of a network with their module names, in module order.
std::vector<std::pair<std::string, ConvNormActImpl*>> Layers(torch::nn::Module& network) {
  std::vector<std::pair<std::string, ConvNormActImpl*>> layers;
  for (const auto& item : network.named_modules("", /*include_self=*/true)) {
    if (auto* layer = dynamic_cast<ConvNormActImpl*>(item.value().get())) layers.emplace_back(item.key(), layer);
  }
  return layers;
}

// Whether module `name` is inside one of the modules named `outer`.
bool Inside(const std::string& name, const std::vector<std::string>& outer) {
  return std::any_of(outer.begin(), outer.end(), [&](const std::string& o) {
    return name.size() > o.size() && name.compare(0, o.size(), o) == 0 && name[o.size()] == '.';
  });
}

int64_t Bytes(const torch::Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0; }

// Bytes of the parameters and buffers outside every ConvNormAct, and the
// layers there that do a network's arithmetic (they stay fp32), at most 32
// named.
void DescribeOthers(torch::nn::Module& network, DeployedLayers& out) {
  const auto layers = Layers(network);
  std::set<const void*> inside;
  for (const auto& layer : layers) {
    for (const torch::Tensor& t : layer.second->parameters()) inside.insert(t.unsafeGetTensorImpl());
    for (const torch::Tensor& t : layer.second->buffers()) inside.insert(t.unsafeGetTensorImpl());
  }
  for (const torch::Tensor& t : network.parameters()) {
    if (!inside.count(t.unsafeGetTensorImpl())) out.size_bytes += Bytes(t);
  }
  for (const torch::Tensor& t : network.buffers()) {
    if (!inside.count(t.unsafeGetTensorImpl())) out.size_bytes += Bytes(t);
  }
  constexpr size_t kMaxNamed = 32;
  size_t unnamed = 0;
  std::vector<std::string> named;  // the layers named so far: what is inside them is not named again
  for (const auto& layer : layers) named.push_back(layer.first);
  for (const auto& item : network.named_modules("", /*include_self=*/false)) {
    const std::string& name = item.key();
    torch::nn::Module* m = item.value().get();
    if (Inside(name, named)) continue;
    std::string why;
    if (dynamic_cast<torch::nn::Conv2dImpl*>(m)) {
      why = "a conv without a norm module of its own (conv-norm-act layers only are quantized)";
    } else if (dynamic_cast<torch::nn::LinearImpl*>(m)) {
      why = "a linear layer (convs only are quantized)";
    } else if (dynamic_cast<AttentionImpl*>(m)) {
      why = "attention: its projections, scores, softmax and mixing";
    } else if (dynamic_cast<MoeMlpImpl*>(m)) {
      why = "mixture-of-experts routing and experts";
    } else {
      continue;
    }
    named.push_back(name);
    if (out.float_layers.size() < kMaxNamed) {
      out.float_layers.emplace_back(name, why);
    } else {
      ++unnamed;
    }
  }
  if (unnamed > 0) out.float_layers.emplace_back("...", std::to_string(unnamed) + " more layers");
}

struct ConvGeometry {
  std::vector<int64_t> stride, padding, dilation;
  int64_t groups = 1;
};

ConvGeometry GeometryOf(torch::nn::Conv2dImpl& conv) {
  const auto& o = conv.options;
  const auto& padding = c10::get<torch::ExpandingArray<2>>(o.padding());  // ConvNormAct pads by numbers
  return {{(*o.stride())[0], (*o.stride())[1]},
          {(*padding)[0], (*padding)[1]},
          {(*o.dilation())[0], (*o.dilation())[1]},
          o.groups()};
}

// 2 x |output| x (Cin / groups) x kh x kw per sample (the weight is (Cout, Cin / groups, kh, kw)): the
// convolution rule of worker/trial/measure/flop_counter.cc.
int64_t ConvFlopsPerSample(const torch::Tensor& output, const torch::Tensor& weight) {
  const int64_t per_sample = output.numel() / std::max<int64_t>(1, output.size(0));
  return 2 * per_sample * weight.size(1) * weight.size(2) * weight.size(3);
}

c10::OperatorHandle Op(const char* name, const char* overload) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
}

c10::IValue CallBoxed(const c10::OperatorHandle& op, std::vector<c10::IValue> stack) {
  op.callBoxed(&stack);
  return std::move(stack.front());
}

c10::List<int64_t> IntList(const std::vector<int64_t>& v) { return c10::List<int64_t>(v); }

// One int8 layer: what its deployed forward needs.
struct Int8Layer {
  c10::IValue packed;  // the engine's prepacked weight and bias
  QuantParams input, output;
  bool fused_relu = false;
  bool folded = true;
  // Its output goes straight to another int8 layer (the next in a Sequential) and nothing runs after its
  // conv: it hands over the quantized tensor, which the next layer takes as it is.
  bool stays_quantized = false;
  ConvNormActImpl* layer = nullptr;
};

// The layers of `network` that hand their output straight to another one: a ConvNormAct followed by
// a ConvNormAct in a Sequential.
std::set<const ConvNormActImpl*> FeedingAnother(torch::nn::Module& network) {
  std::set<const ConvNormActImpl*> feeding;
  for (const auto& module : network.modules(/*include_self=*/true)) {
    auto* sequential = dynamic_cast<torch::nn::SequentialImpl*>(module.get());
    if (!sequential) continue;
    const auto children = sequential->children();
    for (size_t i = 0; i + 1 < children.size(); ++i) {
      auto* layer = dynamic_cast<ConvNormActImpl*>(children[i].get());
      if (layer && dynamic_cast<ConvNormActImpl*>(children[i + 1].get())) feeding.insert(layer);
    }
  }
  return feeding;
}

// The quantized engines deploy knows, by preference, with their spec names.
constexpr std::pair<at::QEngine, const char*> kEngines[] = {{at::QEngine::ONEDNN, "onednn"},
                                                           {at::QEngine::QNNPACK, "qnnpack"}};

// The fp32 conv of a folded layer.
torch::Tensor FoldedConv2d(const FoldedConv& folded, const ConvGeometry& g, const torch::Tensor& x) {
  return torch::conv2d(x.to(torch::kFloat), folded.weight, folded.bias, g.stride, g.padding, g.dilation, g.groups);
}

// The bytes a deployed layer keeps beside its conv: its norm's parameters when it could not be folded.
int64_t UnfoldedNormBytes(ConvNormActImpl& layer, const FoldedConv& folded) {
  int64_t bytes = 0;
  if (!folded.folded) {
    for (const torch::Tensor& t : layer.norm()->parameters()) bytes += Bytes(t);
  }
  return bytes;
}

// What follows the conv in the layer's own forward: the norm when it was not
// folded, then the activation unless it is fused.
torch::Tensor AfterConv(ConvNormActImpl& layer, torch::Tensor y, bool folded, bool fused_relu) {
  if (!folded) y = layer.norm()(y);
  if (!layer.activation().empty() && !fused_relu) y = Activate(layer.activation(), y);
  return y;
}

}  // namespace

void ActivationRange::Observe(const torch::Tensor& x) {
  const torch::Tensor f = x.detach().to(torch::kFloat);
  const double lo = f.min().item<double>(), hi = f.max().item<double>();
  min = seen ? std::min(min, lo) : lo;
  max = seen ? std::max(max, hi) : hi;
  seen = true;
}

QuantParams Uint8Params(const ActivationRange& range) {
  const double lo = std::min(0.0, range.min), hi = std::max(0.0, range.max);
  QuantParams q;
  q.scale = hi > lo ? (hi - lo) / 255.0 : 1.0;
  q.zero_point = std::clamp<int64_t>(std::llround(-lo / q.scale), 0, 255);
  return q;
}

FoldedConv Fold(ConvNormActImpl& layer) {
  torch::NoGradGuard no_grad;
  torch::nn::Conv2dImpl& conv = *layer.conv();
  FoldedConv f;
  f.weight = conv.weight.detach().to(torch::kFloat).clone();
  f.bias = conv.bias.defined() ? conv.bias.detach().to(torch::kFloat).clone()
                               : torch::zeros({f.weight.size(0)}, f.weight.options());
  Norm2dImpl& norm = *layer.norm();
  if (norm.kind() == "batch") {
    torch::nn::BatchNorm2dImpl& bn = *norm.batch();
    const torch::Tensor inv_std = torch::rsqrt(bn.running_var.to(torch::kFloat) + bn.options.eps());
    const torch::Tensor gamma = bn.weight.defined() ? bn.weight.detach().to(torch::kFloat) : torch::ones_like(inv_std);
    const torch::Tensor beta = bn.bias.defined() ? bn.bias.detach().to(torch::kFloat) : torch::zeros_like(inv_std);
    const torch::Tensor factor = gamma * inv_std;
    f.weight = f.weight * factor.view({-1, 1, 1, 1});
    f.bias = (f.bias - bn.running_mean.to(torch::kFloat)) * factor + beta;
  } else if (norm.kind() != "none") {
    f.folded = false;
  }
  return f;
}

torch::Tensor QuantizeWeightPerChannel(const torch::Tensor& weight) {
  const torch::Tensor w = weight.detach().to(torch::kFloat).contiguous();
  torch::Tensor scales = w.abs().flatten(1).amax(1).to(torch::kDouble) / 127.0;
  scales = torch::where(scales > 0, scales, torch::ones_like(scales));
  return at::quantize_per_channel(w, scales, torch::zeros({w.size(0)}, torch::kLong), 0, torch::kQInt8);
}

std::vector<std::string> QuantizedEngines() {
  std::vector<std::string> engines;
  const auto& supported = at::globalContext().supportedQEngines();
  for (const auto& [engine, name] : kEngines) {
    if (std::find(supported.begin(), supported.end(), engine) != supported.end()) engines.push_back(name);
  }
  return engines;
}

DeployedLayers DeployFloat(torch::nn::Module& network) {
  DeployedLayers out;
  for (auto& [name, layer] : Layers(network)) {
    auto folded = std::make_shared<FoldedConv>(Fold(*layer));
    const ConvGeometry g = GeometryOf(*layer->conv());
    out.size_bytes += Bytes(folded->weight) + Bytes(folded->bias) + UnfoldedNormBytes(*layer, *folded);
    ConvNormActImpl* l = layer;
    layer->Deploy([folded, g, l](const torch::Tensor& x) {
      return AfterConv(*l, FoldedConv2d(*folded, g, x), folded->folded, false);
    });
  }
  DescribeOthers(network, out);
  return out;
}

DeployedLayers DeployInt8(torch::nn::Module& network, const std::string& engine,
                          const std::function<void()>& calibrate) {
  const std::vector<std::string> engines = QuantizedEngines();
  const std::string name = engine.empty() ? (engines.empty() ? "" : engines.front()) : engine;
  if (name.empty() || std::find(engines.begin(), engines.end(), name) == engines.end()) {
    std::string have;
    for (const std::string& e : engines) have += (have.empty() ? "" : ", ") + e;
    throw std::runtime_error("the quantized engine '" + (name.empty() ? engine : name) +
                             "' is not in this LibTorch build (it has: " + (have.empty() ? "none" : have) + ")");
  }
  for (const auto& [id, known] : kEngines) {
    if (name == known) at::globalContext().setQEngine(id);
  }
  DeployedLayers out;
  out.engine = name;

  // Calibration: the float layers, observing each one's input and conv output.
  struct Observed {
    std::shared_ptr<FoldedConv> folded;
    ConvGeometry geometry;
    bool fused_relu = false;
    ActivationRange input, output;
    int64_t flops_per_sample = 0;
  };
  const auto layers = Layers(network);
  std::vector<std::shared_ptr<Observed>> observed;
  for (const auto& [layer_name, layer] : layers) {
    auto o = std::make_shared<Observed>();
    o->folded = std::make_shared<FoldedConv>(Fold(*layer));
    o->geometry = GeometryOf(*layer->conv());
    o->fused_relu = o->folded->folded && layer->activation() == "relu";
    observed.push_back(o);
    ConvNormActImpl* l = layer;
    layer->Deploy([o, l](const torch::Tensor& x) {
      o->input.Observe(x);
      torch::Tensor y = FoldedConv2d(*o->folded, o->geometry, x);
      if (o->fused_relu) y = torch::relu(y);
      o->output.Observe(y);
      o->flops_per_sample = ConvFlopsPerSample(y, o->folded->weight);
      return AfterConv(*l, y, o->folded->folded, o->fused_relu);
    });
  }
  {
    torch::NoGradGuard no_grad;
    network.eval();
    calibrate();
  }

  static const c10::OperatorHandle prepack = Op("quantized::conv2d_prepack", "");
  static const c10::OperatorHandle conv = Op("quantized::conv2d", "new");
  static const c10::OperatorHandle conv_relu = Op("quantized::conv2d_relu", "new");
  const std::set<const ConvNormActImpl*> feeding = FeedingAnother(network);
  for (size_t i = 0; i < layers.size(); ++i) {
    const auto& [layer_name, layer] = layers[i];
    const Observed& o = *observed[i];
    if (!o.input.seen) throw std::runtime_error("no calibration input reached the layer " + layer_name);
    auto q = std::make_shared<Int8Layer>();
    q->input = Uint8Params(o.input);
    q->output = Uint8Params(o.output);
    q->fused_relu = o.fused_relu;
    q->folded = o.folded->folded;
    q->layer = layer;
    q->stays_quantized = feeding.count(layer) && q->folded && (layer->activation().empty() || q->fused_relu);
    const torch::Tensor weight = QuantizeWeightPerChannel(o.folded->weight);
    const ConvGeometry& g = o.geometry;
    q->packed = CallBoxed(prepack, {weight, c10::optional<torch::Tensor>(o.folded->bias), IntList(g.stride),
                                    IntList(g.padding), IntList(g.dilation), g.groups});
    // int8 weights, a float scale and an int32 zero point per channel, the fp32 bias, both activations'
    // scale and zero point.
    out.size_bytes +=
        weight.numel() + 8 * weight.size(0) + Bytes(o.folded->bias) + 2 * 16 + UnfoldedNormBytes(*layer, *o.folded);
    out.quantized += 1;
    out.quantized_flops_per_sample += o.flops_per_sample;
    layer->Deploy([q](const torch::Tensor& x) {
      const torch::Tensor qx =
          x.is_quantized() ? x  // from the layer before, which stays quantized
                           : at::quantize_per_tensor(x.to(torch::kFloat).contiguous(x.suggest_memory_format()),
                                                     q->input.scale, q->input.zero_point, torch::kQUInt8);
      const torch::Tensor qy =
          CallBoxed(q->fused_relu ? conv_relu : conv, {qx, q->packed, q->output.scale, q->output.zero_point}).toTensor();
      if (q->stays_quantized) return qy;
      return AfterConv(*q->layer, qy.dequantize(), q->folded, q->fused_relu);
    });
  }
  DescribeOthers(network, out);
  return out;
}

void Undeploy(torch::nn::Module& network) {
  for (auto& [name, layer] : Layers(network)) layer->Deploy(nullptr);
}

}  // namespace frontier::model
