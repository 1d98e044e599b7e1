// The classification task: fashion-mnist or synthetic images, a Classifier
// network, cross-entropy, top-1 accuracy.
#include "worker/trial/tasks/task.h"

namespace frontier {
namespace {

class AccuracyMeter final : public QualityMeter {
 public:
  void Add(const torch::Tensor& logits, const torch::Tensor& labels) override {
    correct_ += logits.argmax(1).eq(labels).sum().item<int64_t>();
  }
  double Value(int64_t samples) const override { return static_cast<double>(correct_) / samples; }

 private:
  int64_t correct_ = 0;
};

class ClassificationTask final : public Task {
 public:
  std::string quality() const override { return "accuracy"; }
  std::string flop_convention() const override {
    return "conv+linear+matmul MACs x2; train step = 3 x forward";
  }

  Dataset LoadData(const TrialSpec& spec, const ResolvedArch&) override {
    return LoadTaskDataset(spec.task, static_cast<uint64_t>(spec.seed));
  }
  std::shared_ptr<model::NetworkImpl> BuildNetwork(const ResolvedArch& arch, const TaskSpec&) override {
    return std::make_shared<model::ClassifierImpl>(arch);
  }
  void Describe(const Dataset&, nlohmann::json*) const override {}

  torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& labels) const override {
    return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), labels);
  }
  std::unique_ptr<QualityMeter> NewQualityMeter() const override { return std::make_unique<AccuracyMeter>(); }
};

}  // namespace

std::unique_ptr<Task> MakeClassificationTask() { return std::make_unique<ClassificationTask>(); }

}  // namespace frontier
