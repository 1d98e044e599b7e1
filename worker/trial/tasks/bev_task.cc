// The bev task (docs/bev.md): bev-synthetic scenes, a BevNet, per-cell
// binary cross-entropy on the occupancy logits (plus the depth loss of
// depth-supervised LSS), occupancy IoU.
#include "worker/trial/data/bev_scene.h"
#include "worker/trial/tasks/bev_model.h"
#include "worker/trial/tasks/task.h"

namespace frontier {
namespace {

// Weight of occupied cells in the BEV loss: Simple-BEV's value (occupied cells
// are a few percent of the grid; without it early models predict all-empty).
constexpr double kBevPositiveWeight = 2.13;

// IoU = TP / (TP + FP + FN) over every cell of the split (0 if none).
class IouMeter final : public QualityMeter {
 public:
  void Add(const torch::Tensor& logits, const torch::Tensor& labels) override {
    torch::Tensor predicted = logits.gt(0), occupied = labels.gt(0);
    intersection_ += predicted.logical_and(occupied).sum().item<int64_t>();
    union_ += predicted.logical_or(occupied).sum().item<int64_t>();
  }
  double Value(int64_t) const override {
    return union_ > 0 ? static_cast<double>(intersection_) / union_ : 0.0;
  }

 private:
  int64_t intersection_ = 0, union_ = 0;
};

class BevTask final : public Task {
 public:
  std::string quality() const override { return "iou"; }
  std::string flop_convention() const override {
    return "conv+linear+matmul MACs x2; train step = 3 x forward; BEV pooling, grid sampling and the LSS "
           "outer "
           "product count 0 (no MACs)";
  }

  Dataset LoadData(const TrialSpec& spec, const ResolvedArch& arch) override {
    // Depth supervision: depth targets at the resolution the view transform lifts.
    const auto seed = static_cast<uint64_t>(spec.seed);
    return model::DepthSupervised(arch.bev)
               ? LoadTaskDataset(spec.task, seed, arch.bev.lift_height, arch.bev.lift_width)
               : LoadTaskDataset(spec.task, seed);
  }

  std::shared_ptr<model::NetworkImpl> BuildNetwork(const ResolvedArch& arch, const TaskSpec& task) override {
    bev_ = arch.bev;
    net_ = std::make_shared<model::BevNetImpl>(arch, bev::MakeRig(task.bev));
    return net_;
  }

  void Describe(const Dataset& data, nlohmann::json* result) const override {
    nlohmann::json& r = *result;
    r["dataset_generate_s"] = data.generate_s;
    r["bev"] = {{"view_transform", bev_.spec.view_transform}, {"grid", bev_.grid}, {"neck", bev_.spec.neck}};
    if (bev_.spec.view_transform == "lss") {
      const bev::PoolPlan& plan = net_->pool_plan();
      r["bev"]["pooling"] = bev_.spec.pooling;
      r["bev"]["depth_loss_weight"] = bev_.spec.depth_loss_weight;
      r["bev"]["frustum_points"] = plan.points;
      r["bev"]["points_in_grid"] = plan.valid_points.numel();
      r["bev"]["occupied_cells"] = plan.interval_cells.numel();
    }
  }

  torch::Tensor Loss(const torch::Tensor& logits, const torch::Tensor& labels) const override {
    const torch::Tensor pos_weight =
        torch::full({1}, kBevPositiveWeight, logits.options().dtype(torch::kFloat));
    return torch::binary_cross_entropy_with_logits(logits.to(torch::kFloat), labels.to(torch::kFloat), {},
                                                   pos_weight);
  }

  torch::Tensor TrainingLoss(const torch::Tensor& logits, const torch::Tensor& labels, const Dataset& data,
                             const torch::Tensor& indices) override {
    torch::Tensor loss = Loss(logits, labels);
    if (net_->depth_supervised()) loss = loss + net_->DepthLoss(data.train.depth.index_select(0, indices));
    return loss;
  }

  std::unique_ptr<QualityMeter> NewQualityMeter() const override { return std::make_unique<IouMeter>(); }

 private:
  ResolvedBev bev_;
  std::shared_ptr<model::BevNetImpl> net_;
};

}  // namespace

std::unique_ptr<Task> MakeBevTask() { return std::make_unique<BevTask>(); }

}  // namespace frontier
