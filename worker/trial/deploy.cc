#include "worker/trial/deploy.h"

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <vector>

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/passes/frozen_graph_optimizations.h>

#include "worker/trial/evaluation.h"
#include "worker/trial/measure/cpu_allocator.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/latency.h"
#include "worker/trial/model/deploy.h"
#include "worker/trial/trainer.h"

namespace frontier {
namespace {

using json = nlohmann::json;

// The float network as a TorchScript graph: traced at each input shape it
// meets (a C++ module's forward traces with its sizes as constants), its
// weights constants, then LibTorch's frozen-graph optimizations
// (OptimizeFrozenGraph: conv-bn and conv-add/mul folding, linear
// transposes, dropout removal), run by the graph executor. A trace that
// computes something else than the network on a second input (a forward
// whose C++ control flow reads values, or a custom kernel the tracer cannot
// see, as the BEV view transforms') is refused.
class ScriptedNetworkImpl : public model::NetworkImpl {
 public:
  explicit ScriptedNetworkImpl(model::NetworkImpl& network) : network_(network) {
    for (torch::Tensor& p : network_.parameters()) {
      if (p.requires_grad()) {
        p.set_requires_grad(false);  // a traced constant must not require grad
        restore_.push_back(p);
      }
    }
  }
  ~ScriptedNetworkImpl() override {
    for (torch::Tensor& p : restore_) p.set_requires_grad(true);
  }

  torch::Tensor forward(const torch::Tensor& x) override {
    auto& function = functions_[x.sizes().vec()];
    if (!function) function = Trace(x);
    return (*function)({x}).toTensor();
  }

 private:
  std::unique_ptr<torch::jit::GraphFunction> Trace(const torch::Tensor& x) {
    torch::NoGradGuard no_grad;
    auto traced = torch::jit::tracer::trace(
        {x}, [&](torch::jit::Stack in) -> torch::jit::Stack { return {network_.forward(in[0].toTensor())}; },
        [](const torch::autograd::Variable&) { return std::string(); }, /*strict=*/false);
    std::shared_ptr<torch::jit::Graph> graph = traced.first->graph;
    torch::jit::OptimizeFrozenGraph(graph, /*optimize_numerics=*/true);
    auto function = std::make_unique<torch::jit::GraphFunction>("forward", graph, nullptr);
    // The same computation on another input of that shape (the images mirrored).
    const torch::Tensor other = x.flip({-1}).contiguous(x.suggest_memory_format());
    const torch::Tensor expected = network_.forward(other);
    const torch::Tensor got = (*function)({other}).toTensor();
    const double tolerance = 1e-4 * (1 + expected.abs().max().item<double>());
    if (got.sizes() != expected.sizes() || (got - expected).abs().max().item<double>() > tolerance) {
      throw std::runtime_error(
          "the traced TorchScript graph computes something else than the network on a second input: its forward "
          "reads its input outside the ops a trace records (control flow on values, or a custom kernel such as "
          "the BEV view transforms'), which tracing cannot export");
    }
    return function;
  }

  model::NetworkImpl& network_;
  std::vector<torch::Tensor> restore_;
  std::map<std::vector<int64_t>, std::unique_ptr<torch::jit::GraphFunction>> functions_;
};

// One format's figures once its layers are deployed: quality, then each
// setting's latency; the peak memory at the headline setting.
json MeasureFormat(model::NetworkImpl& network, const DeploySpec& spec, const DeployHooks& hooks,
                   const model::DeployedLayers& layers) {
  json out;
  out[hooks.quality_metric] = hooks.quality(network);
  out["size_bytes"] = layers.size_bytes;
  network.eval();
  LatencyPlan plan;
  plan.warmup = spec.warmup;
  plan.repetitions = spec.repetitions;
  json settings = json::array();
  // LibTorch's intra-op pool and OpenBLAS's (SetCpuThreads, the trial's one rule) at each setting's count,
  // both back at the trial's afterwards, also when a format fails half-way.
  struct RestoreThreads {
    const int threads = torch::get_num_threads();
    ~RestoreThreads() { SetCpuThreads(threads); }
  } restore;
  for (int batch : spec.batch) {
    const torch::Tensor x = hooks.input(batch);
    for (int threads : spec.threads) {
      SetCpuThreads(threads);
      const bool headline = settings.empty();
      const int64_t held = headline ? ResetCpuAllocatedPeak() : 0;
      SeriesStats s;
      {
        c10::InferenceMode inference;
        s = TimeRepeatedly(
            [&] {
              network.forward(x);
              hooks.synchronize();
            },
            plan);
      }
      if (headline) {
        out["latency_ms"] = s.median * 1e3;
        out["latency_p99_ms"] = s.p99 * 1e3;
        if (hooks.cpu) out["peak_memory_bytes"] = CountedCpuBytes().peak - held;
      }
      json setting = LatencyJson(batch, s, plan.warmup);
      setting["threads"] = threads;
      settings.push_back(setting);
    }
  }
  out["settings"] = settings;
  return out;
}

}  // namespace

json MeasureDeploy(model::NetworkImpl& network, const DeploySpec& spec, const DeployHooks& hooks) {
  json out = {{"batch", spec.batch.front()},
              {"threads", spec.threads.front()},
              {"quality_metric", hooks.quality_metric},
              {"mode", "eval, inference mode, fp32 input in the trial's memory format; an int8 layer dequantizes its "
                       "output unless it feeds the next int8 layer directly"}};
  std::vector<std::string> order = spec.formats;
  if (hooks.reverse_order) std::reverse(order.begin(), order.end());
  out["timed_order"] = order;
  for (const std::string& format : order) {
    try {
      model::DeployedLayers layers;
      json figures;
      if (format == "float") {
        layers = model::DeployFloat(network);
        figures = MeasureFormat(network, spec, hooks, layers);
      } else if (format == "torchscript") {
        layers = model::DeployFloat(network);
        ScriptedNetworkImpl scripted(network);
        network.eval();
        {
          torch::NoGradGuard no_grad;  // traced before any pass is timed, warm-up or not
          for (int batch : spec.batch) scripted.forward(hooks.input(batch));
        }
        figures = MeasureFormat(scripted, spec, hooks, layers);
      } else {
        if (!hooks.cpu) {
          throw std::runtime_error(
              "int8 runs on LibTorch's quantized CPU engines (onednn, qnnpack); this trial ran on another device");
        }
        layers = model::DeployInt8(network, spec.engine, hooks.calibrate);
        out["engine"] = layers.engine;
        figures = MeasureFormat(network, spec, hooks, layers);
        figures["quantized_layers"] = layers.quantized;
        figures["quantized_flop_share"] =
            hooks.forward_flops_per_sample > 0
                ? static_cast<double>(layers.quantized_flops_per_sample) / hooks.forward_flops_per_sample
                : 0.0;
        figures["calibration_samples"] = hooks.calibration_samples;
      }
      json float_layers = json::array();
      for (const auto& [name, why] : layers.float_layers) float_layers.push_back({{"name", name}, {"why", why}});
      figures["float_layers"] = float_layers;
      out[format] = figures;
    } catch (const std::exception& e) {
      out[format] = {{"error", FirstLineOf(e)}};
    }
    model::Undeploy(network);
  }
  network.train();
  return out;
}

json MeasureOnboard(const TrialSpec& spec, PreparedModel& m, int64_t forward_flops_per_sample) {
  const int batch = spec.task.batch_size;
  const int64_t calibration =
      std::min<int64_t>(m.data.train.size(), int64_t{spec.deploy.calibration_batches} * batch);
  RuntimeSpec fp32 = spec.runtime;
  fp32.precision = Precision::kFp32;  // a deployed network runs in its format, never under the training's autocast
  DeployHooks hooks;
  hooks.quality_metric = "val_" + m.task->quality();
  hooks.input = [&](int b) { return m.InferenceInput(b).to(torch::kFloat); };
  hooks.calibrate = [&] {
    for (int64_t begin = 0; begin < calibration; begin += batch) {
      m.net->forward(m.TrainImages(begin, std::min(calibration, begin + batch)).to(torch::kFloat));
    }
  };
  hooks.quality = [&](model::NetworkImpl& network) {
    return Evaluate(network, m, m.data.val, batch, fp32).quality;
  };
  hooks.synchronize = [&] { Synchronize(m.dev); };
  hooks.forward_flops_per_sample = forward_flops_per_sample;
  hooks.cpu = !m.dev.is_cuda();
  hooks.calibration_samples = calibration;
  hooks.reverse_order = spec.seed % 2 == 0;
  return MeasureDeploy(*m.net, spec.deploy, hooks);
}

}  // namespace frontier
