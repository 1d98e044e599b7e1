// Onboard inference of a trained network (docs/trial-output.md, Deploy):
// each format of the spec's deploy section (model/deploy.h: float, int8;
// torchscript: the float network traced into a TorchScript graph with
// LibTorch's frozen-graph optimizations, run by its graph executor)
// measured as it would run in a car: validation quality in that format, the
// forward latency at each batch size and thread count (median and p99 of
// timed passes after untimed warm-up, measure/latency.h), the deployed
// weights' size and the peak of the tensors a batch-1 forward allocates.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/model/model.h"
#include "worker/trial/prepared_model.h"

namespace frontier {

// What the trainer lends the measurement.
struct DeployHooks {
  std::string quality_metric;  // the result key of the validation quality, e.g. "val_accuracy"
  // `batch` normalized training images, fp32, on the trial's device.
  std::function<torch::Tensor(int batch)> input;
  // Forward passes of the network over the calibration images (int8).
  std::function<void()> calibrate;
  // The validation quality of `network` (the trial's network as it is now deployed, or its TorchScript graph).
  std::function<double(model::NetworkImpl& network)> quality;
  std::function<void()> synchronize;  // waits for the device
  int64_t forward_flops_per_sample = 0;  // of the trained network (quantized_flop_share's denominator)
  bool cpu = true;                       // int8 runs on LibTorch's CPU engines only
  int64_t calibration_samples = 0;
  // The formats timed in the reverse of the spec's order: alternated by the trial's seed, so that over a
  // config's seeds neither float nor int8 is always the one timed first (each format is deployed from,
  // and back to, the trained network: the order changes no figure but the timings' conditions).
  bool reverse_order = false;
};

// {engine, batch, threads, quality_metric, <format>: {latency_ms,
// latency_p99_ms, size_bytes, peak_memory_bytes, <quality_metric>, settings,
// ...} or {error}}. A format that cannot be measured says why in its error;
// the others are still measured. The network is back in its training layers
// and training mode afterwards, and LibTorch's thread count as it was.
nlohmann::json MeasureDeploy(model::NetworkImpl& network, const DeploySpec& spec, const DeployHooks& hooks);

// The deploy phase of a trial: MeasureDeploy of its trained network with the
// spec's deploy section, on the trial's device, the hooks lent by `m`
// (validation quality in fp32, never under the training's autocast; int8
// calibrated on the first calibration_batches x task.batch_size training
// images). `forward_flops_per_sample`: the trained network's.
nlohmann::json MeasureOnboard(const TrialSpec& spec, PreparedModel& m, int64_t forward_flops_per_sample);

}  // namespace frontier
