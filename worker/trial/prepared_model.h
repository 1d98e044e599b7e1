// The first phase of a trial, and all the op benchmark needs: the spec's
// device (generators seeded), then its plugins, task,
// data and network, on that device in the spec's memory format. The trial
// (trainer.cc) and `frontier-trial --op-bench` (op_bench.cc) build their
// model here, so both see the same network at the same shapes.
#pragma once

#include <memory>

#include <torch/torch.h>

#include "search_spaces/trial_spec.h"
#include "worker/trial/data/dataset.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/phases.h"
#include "worker/trial/model/model.h"
#include "worker/trial/tasks/task.h"

namespace frontier {

// The spec's memory format as LibTorch names it.
at::MemoryFormat MemoryFormatOf(const RuntimeSpec& runtime);

// Seeds LibTorch's generators with spec.seed (CUDA's too on a GPU) and
// selects runtime.device (CheckPrecision, device.h, says whether it can run
// runtime.precision).
DeviceInfo PrepareDevice(const TrialSpec& spec);

struct PreparedModel {
  DeviceInfo dev;
  at::MemoryFormat format = at::MemoryFormat::Contiguous;
  std::unique_ptr<Task> task;
  Dataset data;
  std::shared_ptr<model::NetworkImpl> net;  // on dev.device, in `format`, in training mode

  // Training images [begin, end), normalized, on the device, in the memory format.
  torch::Tensor TrainImages(int64_t begin, int64_t end) const;
  // What an inference pass is timed on: the first `batch` training images
  // (repeated to fill a batch larger than the split), as TrainImages gives them.
  torch::Tensor InferenceInput(int batch) const;
};

// Loads runtime.plugins, builds the task, its data and its network on `dev`.
// With `phases`, the time goes to its "model" and "data" phases. Throws on a
// spec whose model cannot be built (SpecError, PluginError, DataError, ...).
PreparedModel PrepareModel(const TrialSpec& spec, const DeviceInfo& dev, PhaseTimes* phases = nullptr);

}  // namespace frontier
