// The Task interface: what a trial learns, as the trainer sees it. A task
// owns its data, the network's head, the loss and the quality metric; the
// trainer (worker/trial/trainer.cc, training.cc) runs every task through this interface
// and knows none of them. Tasks are registered by name with the datasets they
// serve (TaskRegistry); the trial spec's task.dataset chooses one:
//   classification  fashion-mnist, synthetic  (tasks/classification.cc)
//   bev             bev-synthetic             (tasks/bev_task.cc, docs/bev.md)
// A new task is one class and one entry in task.cc's list (and its dataset
// in the spec's validation).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"
#include "worker/trial/data/dataset.h"
#include "worker/trial/model/model.h"
#include "worker/trial/registry.h"

namespace frontier {

// Accumulates a task's quality over the batches of one evaluation split.
class QualityMeter {
 public:
  virtual ~QualityMeter() = default;
  // One batch: fp32 logits as the network gives them, labels as the split holds them.
  virtual void Add(const torch::Tensor& logits, const torch::Tensor& labels) = 0;
  // The quality over the `samples` samples added so far.
  virtual double Value(int64_t samples) const = 0;
};

// One trial's task, made fresh per trial by MakeTask (it may keep what it
// built, e.g. its network). Not thread-safe.
class Task {
 public:
  virtual ~Task() = default;

  // The quality metric's name: the result keys val_<quality> and
  // test_<quality>, and val_<quality> of eval events (docs/trial-output.md).
  virtual std::string quality() const = 0;
  // The result's flops.convention: what the FLOP count includes.
  virtual std::string flop_convention() const = 0;

  // The trial's train / val / test splits. Throws DataError.
  virtual Dataset LoadData(const TrialSpec& spec, const ResolvedArch& arch) = 0;
  // The network, on the CPU, initialized from LibTorch's current seed.
  virtual std::shared_ptr<model::NetworkImpl> BuildNetwork(const ResolvedArch& arch,
                                                           const TaskSpec& task) = 0;
  // Adds the task's own keys to the result once data and network exist.
  virtual void Describe(const Dataset& data, nlohmann::json* result) const = 0;

  // Mean loss of a batch's logits against its labels.
  virtual torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& labels) const = 0;
  // The loss a training step minimizes, called right after the training
  // forward that gave `logits`, under the step's autocast: Loss plus what
  // else the task supervises. `indices`: the batch's training-split indices.
  virtual torch::Tensor TrainingLoss(const torch::Tensor& logits, const torch::Tensor& labels,
                                     const Dataset& data, const torch::Tensor& indices) {
    return Loss(logits, labels);
  }
  virtual std::unique_ptr<QualityMeter> NewQualityMeter() const = 0;
};

// A registered task: the datasets it serves and how to make one.
struct TaskEntry {
  std::vector<std::string> datasets;
  std::unique_ptr<Task> (*make)() = nullptr;
};
Registry<TaskEntry>& TaskRegistry();

// The registered task that serves task.dataset. Throws SpecError
// ("task.dataset") when none does.
std::unique_ptr<Task> MakeTask(const TaskSpec& task);

// The built-in tasks (TaskRegistry's "classification" and "bev").
std::unique_ptr<Task> MakeClassificationTask();
std::unique_ptr<Task> MakeBevTask();

}  // namespace frontier
