#include "worker/trial/trainer.h"

#include <chrono>
#include <cmath>
#include <thread>

#include <torch/torch.h>
#include <torch/version.h>

#include "worker/trial/tasks/bev_model.h"
#include "worker/trial/data/dataset.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/flop_counter.h"
#include "worker/trial/model/model.h"
#include "worker/trial/measure/profiler.h"
#include "worker/trial/measure/step_stats.h"

namespace frontier {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

json StatsJson(const SeriesStats& s, double scale) {
  return {{"n", s.n},          {"median", s.median * scale}, {"p10", s.p10 * scale}, {"p90", s.p90 * scale},
          {"mean", s.mean * scale}, {"min", s.min * scale},   {"max", s.max * scale}, {"cv", s.cv}};
}

// What the task learns and how its quality is named: classification reports
// top-1 accuracy; bev-synthetic reports BEV occupancy IoU.
struct TaskKind {
  bool bev = false;
  std::string quality;  // "accuracy" | "iou": result keys are val_<quality>, test_<quality>
};

TaskKind KindOf(const TaskSpec& task) {
  const bool bev = task.dataset == "bev-synthetic";
  return {bev, bev ? "iou" : "accuracy"};
}

// Weight of occupied cells in the BEV loss: Simple-BEV's value (occupied cells
// are a few percent of the grid; without it early models predict all-empty).
constexpr double kBevPositiveWeight = 2.13;

// Mean loss of the batch. Classification: cross-entropy over classes; BEV:
// per-cell binary cross-entropy on the occupancy logits.
torch::Tensor TaskLoss(const TaskKind& kind, const torch::Tensor& logits, const torch::Tensor& labels) {
  if (kind.bev) {
    const torch::Tensor pos_weight = torch::full({1}, kBevPositiveWeight, logits.options().dtype(torch::kFloat));
    return torch::binary_cross_entropy_with_logits(logits.to(torch::kFloat), labels.to(torch::kFloat), {},
                                                   pos_weight);
  }
  return torch::nn::functional::cross_entropy(logits.to(torch::kFloat), labels);
}

struct EvalResult {
  double loss = 0;
  double quality = 0;  // accuracy, or IoU = TP / (TP + FP + FN) over every cell of the split (0 if none)
};

EvalResult Evaluate(model::NetworkImpl& net, const TaskKind& kind, const Dataset& data, const Split& split,
                    int batch_size, const DeviceInfo& dev, const RuntimeSpec& rt, at::MemoryFormat format) {
  torch::NoGradGuard no_grad;
  net.eval();
  double loss_sum = 0;
  int64_t correct = 0, intersection = 0, uni = 0;
  // Training-sized batches: LibTorch on CPU is much slower per sample at very large batches.
  for (int64_t begin = 0; begin < split.size(); begin += batch_size) {
    const int64_t end = std::min<int64_t>(split.size(), begin + batch_size);
    torch::Tensor x = Normalize(data, split.images.slice(0, begin, end), dev.device, format);
    torch::Tensor y = split.labels.slice(0, begin, end).to(dev.device);
    torch::Tensor logits;
    {
      AutocastScope autocast(rt.precision, dev);
      logits = net.forward(x);
    }
    logits = logits.to(torch::kFloat);
    loss_sum += TaskLoss(kind, logits, y).item<double>() * (end - begin);
    if (kind.bev) {
      torch::Tensor predicted = logits.gt(0), occupied = y.gt(0);
      intersection += predicted.logical_and(occupied).sum().item<int64_t>();
      uni += predicted.logical_or(occupied).sum().item<int64_t>();
    } else {
      correct += logits.argmax(1).eq(y).sum().item<int64_t>();
    }
  }
  net.train();
  const double quality = kind.bev ? (uni > 0 ? static_cast<double>(intersection) / uni : 0.0)
                                  : static_cast<double>(correct) / split.size();
  return {loss_sum / split.size(), quality};
}

// Dynamic loss scaling for fp16 (as torch.cuda.amp.GradScaler): skip steps with
// non-finite gradients and halve the scale; double it after a run of good steps.
class LossScaler {
 public:
  explicit LossScaler(bool enabled) : enabled_(enabled) {}
  torch::Tensor Scale(const torch::Tensor& loss) const { return enabled_ ? loss * scale_ : loss; }
  // Unscales gradients in place; false when the step must be skipped.
  bool Unscale(const std::vector<torch::Tensor>& params) {
    if (!enabled_) return true;
    bool finite = true;
    for (const auto& p : params) {
      if (!p.grad().defined()) continue;
      p.grad().mul_(1.0 / scale_);
      finite = finite && torch::isfinite(p.grad()).all().item<bool>();
    }
    if (!finite) {
      scale_ /= 2;
      good_steps_ = 0;
      return false;
    }
    if (++good_steps_ == 2000) {
      scale_ *= 2;
      good_steps_ = 0;
    }
    return true;
  }
  double scale() const { return scale_; }

 private:
  bool enabled_;
  double scale_ = 65536.0;
  int good_steps_ = 0;
};

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerSpec& o,
                                                       const std::vector<torch::Tensor>& params) {
  if (o.name == "adamw") {
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(o.lr).betas({o.beta1, o.beta2}).weight_decay(o.weight_decay));
  }
  return std::make_unique<torch::optim::SGD>(
      params,
      torch::optim::SGDOptions(o.lr).momentum(o.momentum).nesterov(o.nesterov).weight_decay(o.weight_decay));
}

void SetLearningRate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

bool ReachedTarget(const TargetSpec& target, const EvalResult& e) {
  return target.metric == "val_loss" ? e.loss <= target.value : e.quality >= target.value;
}

std::string ErrorKind(const std::exception& e) {
  if (dynamic_cast<const SpecError*>(&e)) return "spec";
  if (dynamic_cast<const DataError*>(&e)) return "data";
  if (dynamic_cast<const UnsupportedPrecision*>(&e)) return "precision";
  const std::string what = e.what();
  if (what.find("out of memory") != std::string::npos || dynamic_cast<const std::bad_alloc*>(&e)) {
    return "out_of_memory";
  }
  return "runtime";
}

// First line of a LibTorch message (the rest is a C++ backtrace).
std::string Message(const std::exception& e) {
  std::string what = e.what();
  if (auto* c10 = dynamic_cast<const c10::Error*>(&e)) what = c10->what_without_backtrace();
  const auto nl = what.find('\n');
  return nl == std::string::npos ? what : what.substr(0, nl);
}

}  // namespace

double LearningRateAt(const TaskSpec& task, int step) {
  const double base = task.optimizer.lr;
  const ScheduleSpec& s = task.schedule;
  if (step < s.warmup) return base * (step + 1) / s.warmup;
  if (s.name == "constant") return base;
  const int span = std::max(1, task.steps - s.warmup - 1);
  const double progress = std::min(1.0, static_cast<double>(step - s.warmup) / span);
  return s.min_lr + 0.5 * (base - s.min_lr) * (1 + std::cos(M_PI * progress));
}

int ExitCodeFor(const json& result) {
  const std::string status = result.value("status", "failed");
  if (status == "completed") return kExitCompleted;
  if (status == "diverged") return kExitDiverged;
  return kExitFailed;
}

json RunTrial(const TrialSpec& spec, const TrialOptions& options) {
  const auto wall_start = Clock::now();
  const TaskSpec& task = spec.task;
  const RuntimeSpec& rt = spec.runtime;
  const int threads = rt.threads > 0 ? rt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  const std::string allocator = ConfigureHostAllocator();

  json result = {{"event", "result"},
                 {"schema", kTrialOutputSchema},
                 {"trial_id", spec.trial_id},
                 {"seed", spec.seed},
                 {"threads", threads},
                 {"torch_version", TORCH_VERSION},
                 {"host_allocator", allocator},
                 {"precision", rt.precision},
                 {"memory_format", rt.memory_format},
                 {"batch_size", task.batch_size},
                 {"dataset", task.dataset}};
  std::vector<double> step_times, data_waits;  // seconds, every step
  int steps_run = 0;
  try {
    torch::manual_seed(spec.seed);
    const DeviceInfo dev = SelectDevice(rt.device);
    result["device"] = dev.device.str();
    result["device_name"] = dev.name;
    CheckPrecision(rt.precision, dev);
    if (dev.is_cuda()) torch::cuda::manual_seed_all(spec.seed);
    const at::MemoryFormat format =
        rt.memory_format == "channels_last" ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;

    const ResolvedArch arch = ResolveArch(spec.arch, task);
    const TaskKind kind = KindOf(task);
    // lss with depth supervision: depth targets at the backbone's feature resolution.
    const bool depth_supervised =
        arch.bev.enabled && arch.bev.spec.view_transform == "lss" && arch.bev.spec.depth_loss_weight > 0;
    const Dataset data = depth_supervised ? LoadTaskDataset(task, static_cast<uint64_t>(spec.seed),
                                                            arch.feature_height, arch.feature_width)
                                          : LoadTaskDataset(task, static_cast<uint64_t>(spec.seed));
    result["dataset_bytes"] = data.bytes();
    if (kind.bev) result["dataset_generate_s"] = data.generate_s;

    std::shared_ptr<model::NetworkImpl> net = model::BuildNetwork(arch, task);
    net->to(dev.device);
    if (auto* bev_net = dynamic_cast<model::BevNetImpl*>(net.get())) {
      result["bev"] = {{"view_transform", arch.bev.spec.view_transform}, {"grid", arch.bev.grid}};
      if (arch.bev.spec.view_transform == "lss") {
        const bev::PoolPlan& plan = bev_net->pool_plan();
        result["bev"]["pooling"] = arch.bev.spec.pooling;
        result["bev"]["depth_loss_weight"] = arch.bev.spec.depth_loss_weight;
        result["bev"]["frustum_points"] = plan.points;
        result["bev"]["points_in_grid"] = plan.valid_points.numel();
        result["bev"]["occupied_cells"] = plan.interval_cells.numel();
      }
    }
    model::SetMemoryFormat(*net, format);
    const int64_t params = model::CountParameters(*net);
    const ModelFlops flops = CountModelFlops(
        net, Normalize(data, data.train.images.slice(0, 0, task.batch_size), dev.device, format));
    const PeakFlops peak = DevicePeakFlops(rt.precision, dev);
    result["params"] = params;
    result["flops"] = {{"forward_per_step", flops.forward},
                       {"train_per_step", flops.train_step},
                       {"train_per_sample", flops.train_step / task.batch_size},
                       {"forward_by_op", flops.forward_by_op},
                       {"convention", kind.bev ? "conv+linear+matmul MACs x2; train step = 3 x forward; BEV pooling, "
                                                 "grid sampling and the LSS outer product count 0 (no MACs)"
                                               : "conv+linear+matmul MACs x2; train step = 3 x forward"}};
    result["peak_flops"] = {{"flops_per_s", peak.flops_per_s}, {"dtype", peak.dtype}, {"source", peak.source}};
    options.emit({{"event", "start"},
                  {"trial_id", spec.trial_id},
                  {"device", dev.device.str()},
                  {"device_name", dev.name},
                  {"threads", threads},
                  {"params", params},
                  {"train_flops_per_step", flops.train_step},
                  {"peak_flops_per_s", peak.flops_per_s},
                  {"peak_flops_source", peak.source}});

    std::vector<torch::Tensor> parameters = net->parameters();
    auto optimizer = MakeOptimizer(task.optimizer, parameters);
    LossScaler scaler(rt.precision == "fp16");
    BatchSampler sampler(data, task.batch_size, task.augment, static_cast<uint64_t>(spec.seed));
    MemoryTracker memory(dev);
    memory.Start();
    net->train();

    json evals = json::array();
    EvalResult last_eval;
    bool evaluated = false;
    double train_time = 0;  // summed step time so far
    std::optional<double> time_to_target;
    std::optional<int> steps_to_target;
    std::string status = "completed";
    double last_loss = 0;

    StepProfiler profiler(spec.profile, task.warmup_steps, options.artifact_dir, spec.trial_id, dev.is_cuda());
    std::vector<double> profiled_times;  // kept out of step_times: the profiler slows them down
    for (int step = 0; step < task.steps; ++step) {
      profiler.BeforeStep(step);
      const auto data_start = Clock::now();
      auto [images, labels] = sampler.Next();
      torch::Tensor x = Normalize(data, images, dev.device, format);
      torch::Tensor y = labels.to(dev.device);
      Synchronize(dev);
      const auto t0 = Clock::now();

      const double lr = LearningRateAt(task, step);
      SetLearningRate(*optimizer, lr);
      optimizer->zero_grad();
      torch::Tensor loss;
      {
        AutocastScope autocast(rt.precision, dev);
        loss = TaskLoss(kind, net->forward(x), y);
        if (depth_supervised) {
          auto* bev_net = static_cast<model::BevNetImpl*>(net.get());
          loss = loss + bev_net->DepthLoss(data.train.depth.index_select(0, sampler.LastIndices()));
        }
      }
      scaler.Scale(loss).backward();
      const bool apply = scaler.Unscale(parameters);
      if (apply && task.grad_clip > 0) torch::nn::utils::clip_grad_norm_(parameters, task.grad_clip);
      if (apply) optimizer->step();
      Synchronize(dev);
      const auto t1 = Clock::now();
      profiler.AfterStep(step);

      const double step_s = Seconds(t0, t1), wait_s = Seconds(data_start, t0);
      if (profiler.Covers(step)) {
        profiled_times.push_back(step_s);
      } else {
        step_times.push_back(step_s);
        data_waits.push_back(wait_s);
      }
      train_time += step_s;
      steps_run = step + 1;
      last_loss = loss.item<double>();
      if (!std::isfinite(last_loss)) {
        status = "diverged";
        result["error"] = "loss became " + std::to_string(last_loss) + " at step " + std::to_string(step);
        break;
      }
      if (options.progress_every > 0 && (steps_run % options.progress_every == 0 || steps_run == task.steps)) {
        std::vector<double> measured(step_times.begin() + std::min<size_t>(task.warmup_steps, step_times.size()),
                                     step_times.end());
        options.emit({{"event", "progress"},
                      {"step", steps_run},
                      {"loss", last_loss},
                      {"lr", lr},
                      {"step_time_ms", step_s * 1e3},
                      {"median_step_time_ms", Summarize(measured).median * 1e3},
                      {"data_wait_ms", wait_s * 1e3}});
      }
      const bool eval_point = (task.eval_every > 0 && steps_run % task.eval_every == 0) || steps_run == task.steps;
      if (eval_point) {
        last_eval = Evaluate(*net, kind, data, data.val, task.batch_size, dev, rt, format);
        evaluated = true;
        json e = {{"event", "eval"},
                  {"step", steps_run},
                  {"val_loss", last_eval.loss},
                  {"val_" + kind.quality, last_eval.quality},
                  {"train_time_s", train_time}};
        options.emit(e);
        e.erase("event");
        evals.push_back(e);
        if (task.target && !time_to_target && ReachedTarget(*task.target, last_eval)) {
          time_to_target = train_time;
          steps_to_target = steps_run;
        }
      }
    }
    result["peak_memory_mb"] = memory.PeakBytes() / (1024.0 * 1024.0);
    result["peak_memory_kind"] = memory.kind();
    result["process_peak_rss_mb"] = MemoryTracker::PeakResidentBytes() / (1024.0 * 1024.0);

    const size_t skip = std::min<size_t>(task.warmup_steps, step_times.size());
    const SeriesStats steps = Summarize({step_times.begin() + skip, step_times.end()});
    const SeriesStats waits = Summarize({data_waits.begin() + skip, data_waits.end()});
    result["status"] = status;
    result["steps_run"] = steps_run;
    result["warmup_steps"] = task.warmup_steps;
    result["step_time_ms"] = StatsJson(steps, 1e3);
    result["data_wait_ms"] = StatsJson(waits, 1e3);
    result["data_wait_fraction"] = steps.sum + waits.sum > 0 ? waits.sum / (steps.sum + waits.sum) : 0.0;
    if (steps.n > 0) {
      const double achieved = flops.train_step / steps.median;
      result["throughput"] = {{"samples_per_s", task.batch_size / steps.median},
                              {"end_to_end_samples_per_s", steps.n * task.batch_size / (steps.sum + waits.sum)}};
      result["achieved_flops_per_s"] = achieved;
      result["mfu"] = achieved / peak.flops_per_s;
    } else {
      result["throughput"] = nullptr;
      result["mfu"] = nullptr;
    }
    result["train_time_s"] = train_time;
    result["final_train_loss"] = last_loss;
    result["evals"] = evals;
    if (task.target) {
      result["target"] = {{"metric", task.target->metric}, {"value", task.target->value}};
      result["time_to_target_s"] = time_to_target ? json(*time_to_target) : json(nullptr);
      result["steps_to_target"] = steps_to_target ? json(*steps_to_target) : json(nullptr);
    }
    if (status == "completed") {
      if (!evaluated) last_eval = Evaluate(*net, kind, data, data.val, task.batch_size, dev, rt, format);
      const EvalResult test = Evaluate(*net, kind, data, data.test, task.batch_size, dev, rt, format);
      result["val_loss"] = last_eval.loss;
      result["val_" + kind.quality] = last_eval.quality;
      result["test_loss"] = test.loss;
      result["test_" + kind.quality] = test.quality;
    }
    if (scaler.scale() != 65536.0) result["loss_scale"] = scaler.scale();
    const json profile = profiler.Finish();
    if (!profile.is_null()) {
      result["profile"] = profile;
      result["profile"]["profiled_step_time_ms"] = StatsJson(Summarize(profiled_times), 1e3);
    }
    result["bottleneck"] = BottleneckVerdict(result);
  } catch (const std::exception& e) {
    result["status"] = "failed";
    result["error_kind"] = ErrorKind(e);
    result["error"] = Message(e);
    result["steps_run"] = steps_run;
  }
  result["wall_time_s"] = Seconds(wall_start, Clock::now());
  return result;
}

}  // namespace frontier
