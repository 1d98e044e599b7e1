#include "worker/trial/deploy.h"

#include <exception>

#include "worker/trial/measure/cpu_allocator.h"
#include "worker/trial/measure/latency.h"
#include "worker/trial/model/deploy.h"
#include "worker/trial/trainer.h"

namespace frontier {
namespace {

using json = nlohmann::json;

// One format's figures once its layers are deployed: quality, then each
// setting's latency; the peak memory at the headline setting.
json MeasureFormat(model::NetworkImpl& network, const DeploySpec& spec, const DeployHooks& hooks,
                   const model::DeployedLayers& layers) {
  json out;
  out[hooks.quality_metric] = hooks.quality();
  out["size_bytes"] = layers.size_bytes;
  network.eval();
  LatencyPlan plan;
  plan.warmup = spec.warmup;
  plan.repetitions = spec.repetitions;
  json settings = json::array();
  const int threads_before = torch::get_num_threads();
  for (int batch : spec.batch) {
    const torch::Tensor x = hooks.input(batch);
    for (int threads : spec.threads) {
      torch::set_num_threads(threads);
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
  torch::set_num_threads(threads_before);
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
  for (const std::string& format : spec.formats) {
    try {
      model::DeployedLayers layers;
      if (format == "float") {
        layers = model::DeployFloat(network);
      } else {
        if (!hooks.cpu) {
          throw std::runtime_error(
              "int8 runs on LibTorch's quantized CPU engines (onednn, qnnpack); this trial ran on another device");
        }
        layers = model::DeployInt8(network, spec.engine, hooks.calibrate);
        out["engine"] = layers.engine;
      }
      json figures = MeasureFormat(network, spec, hooks, layers);
      if (format == "int8") {
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

}  // namespace frontier
