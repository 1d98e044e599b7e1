#include "worker/trial/trainer.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <thread>

#include <torch/torch.h>
#include <torch/version.h>

#include "worker/trial/data/dataset.h"
#include "worker/trial/measure/bottleneck.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/flop_counter.h"
#include "worker/trial/measure/profiler.h"
#include "worker/trial/measure/step_stats.h"
#include "worker/trial/model/model.h"
#include "worker/trial/tasks/task.h"

namespace frontier {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

json StatsJson(const SeriesStats& s, double scale) {
  return {{"n", s.n},
          {"median", s.median * scale},
          {"p10", s.p10 * scale},
          {"p90", s.p90 * scale},
          {"mean", s.mean * scale},
          {"min", s.min * scale},
          {"max", s.max * scale},
          {"cv", s.cv}};
}

struct EvalResult {
  double loss = 0;
  double quality = 0;  // the task's quality metric
};

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
  if (IsOutOfMemory(e)) return "out_of_memory";
  return "runtime";
}

// First line of a LibTorch message (the rest is a C++ backtrace).
std::string Message(const std::exception& e) {
  std::string what = e.what();
  if (auto* c10 = dynamic_cast<const c10::Error*>(&e)) what = c10->what_without_backtrace();
  const auto nl = what.find('\n');
  return nl == std::string::npos ? what : what.substr(0, nl);
}

EvalResult Evaluate(model::NetworkImpl& net, const Task& task, const Dataset& data, const Split& split,
                    int batch_size, const DeviceInfo& dev, const RuntimeSpec& rt, at::MemoryFormat format) {
  torch::NoGradGuard no_grad;
  net.eval();
  double loss_sum = 0;
  const std::unique_ptr<QualityMeter> quality = task.NewQualityMeter();
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
    loss_sum += task.Loss(logits, y).item<double>() * (end - begin);
    quality->Add(logits, y);
  }
  net.train();
  return {loss_sum / split.size(), quality->Value(split.size())};
}

// One trial from its spec to its result: Setup builds what the trial needs,
// Train runs the loop, Finish turns the measurements into the result.
class TrialRun {
 public:
  TrialRun(const TrialSpec& spec, const TrialOptions& options, json* result)
      : spec_(spec), task_spec_(spec.task), rt_(spec.runtime), options_(options), result_(*result) {}

  void Setup(int threads) {
    torch::manual_seed(spec_.seed);
    dev_ = SelectDevice(rt_.device);
    result_["device"] = dev_.device.str();
    result_["device_name"] = dev_.name;
    CheckPrecision(rt_.precision, dev_);
    if (dev_.is_cuda()) torch::cuda::manual_seed_all(spec_.seed);
    format_ =
        rt_.memory_format == "channels_last" ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;

    const ResolvedArch arch = ResolveArch(spec_.arch, task_spec_);
    task_ = MakeTask(task_spec_);
    data_ = task_->LoadData(spec_, arch);
    result_["dataset_bytes"] = data_.bytes();
    net_ = task_->BuildNetwork(arch, task_spec_);
    net_->to(dev_.device);
    task_->Describe(data_, &result_);
    model::SetMemoryFormat(*net_, format_);
    const int64_t params = model::CountParameters(*net_);
    flops_ = CountModelFlops(
        net_, Normalize(data_, data_.train.images.slice(0, 0, task_spec_.batch_size), dev_.device, format_));
    peak_ = DevicePeakFlops(rt_.precision, dev_,
                            options_.peak_flops_json.empty() ? std::nullopt
                                                             : std::optional(ParseGivenPeaks(options_.peak_flops_json)));
    result_["params"] = params;
    result_["flops"] = {{"forward_per_step", flops_.forward},
                        {"train_per_step", flops_.train_step},
                        {"train_per_sample", flops_.train_step / task_spec_.batch_size},
                        {"forward_by_op", flops_.forward_by_op},
                        {"convention", task_->flop_convention()}};
    result_["peak_flops"] = peak_.ToJson();
    options_.emit({{"event", "start"},
                   {"trial_id", spec_.trial_id},
                   {"device", dev_.device.str()},
                   {"device_name", dev_.name},
                   {"threads", threads},
                   {"params", params},
                   {"train_flops_per_step", flops_.train_step},
                   {"peak_flops_per_s", peak_.flops_per_s},
                   {"peak_flops_source", peak_.source}});
  }

  void Train() {
    std::vector<torch::Tensor> parameters = net_->parameters();
    auto optimizer = MakeOptimizer(task_spec_.optimizer, parameters);
    LossScaler scaler(rt_.precision == "fp16");
    BatchSampler sampler(data_, task_spec_.batch_size, task_spec_.augment, static_cast<uint64_t>(spec_.seed));
    MemoryTracker memory(dev_);
    memory.Start();
    net_->train();

    StepProfiler profiler(spec_.profile, task_spec_.warmup_steps, options_.artifact_dir, spec_.trial_id,
                          dev_.is_cuda());
    for (int step = 0; step < task_spec_.steps; ++step) {
      profiler.BeforeStep(step);
      const auto data_start = Clock::now();
      auto [images, labels] = sampler.Next();
      torch::Tensor x = Normalize(data_, images, dev_.device, format_);
      torch::Tensor y = labels.to(dev_.device);
      Synchronize(dev_);
      const auto t0 = Clock::now();

      const double lr = LearningRateAt(task_spec_, step);
      SetLearningRate(*optimizer, lr);
      optimizer->zero_grad();
      torch::Tensor loss;
      {
        AutocastScope autocast(rt_.precision, dev_);
        loss = task_->TrainingLoss(net_->forward(x), y, data_, sampler.LastIndices());
      }
      scaler.Scale(loss).backward();
      const bool apply = scaler.Unscale(parameters);
      if (apply && task_spec_.grad_clip > 0)
        torch::nn::utils::clip_grad_norm_(parameters, task_spec_.grad_clip);
      if (apply) optimizer->step();
      Synchronize(dev_);
      const auto t1 = Clock::now();
      profiler.AfterStep(step);

      const double step_s = Seconds(t0, t1), wait_s = Seconds(data_start, t0);
      if (profiler.Covers(step)) {
        profiled_times_.push_back(step_s);
      } else {
        step_times_.push_back(step_s);
        data_waits_.push_back(wait_s);
      }
      train_time_ += step_s;
      steps_run_ = step + 1;
      last_loss_ = loss.item<double>();
      if (!std::isfinite(last_loss_)) {
        status_ = "diverged";
        result_["error"] = "loss became " + std::to_string(last_loss_) + " at step " + std::to_string(step);
        break;
      }
      if (options_.progress_every > 0 &&
          (steps_run_ % options_.progress_every == 0 || steps_run_ == task_spec_.steps)) {
        EmitProgress(lr, step_s, wait_s);
      }
      const bool eval_point = (task_spec_.eval_every > 0 && steps_run_ % task_spec_.eval_every == 0) ||
                              steps_run_ == task_spec_.steps;
      if (eval_point) EvaluateValidation();
    }
    result_["peak_memory_mb"] = memory.PeakBytes() / (1024.0 * 1024.0);
    result_["peak_memory_kind"] = memory.kind();
    result_["process_peak_rss_mb"] = MemoryTracker::PeakResidentBytes() / (1024.0 * 1024.0);
    if (scaler.scale() != 65536.0) loss_scale_ = scaler.scale();
    profile_ = profiler.Finish();
  }

  void Finish() {
    const size_t skip = std::min<size_t>(task_spec_.warmup_steps, step_times_.size());
    const SeriesStats steps = Summarize({step_times_.begin() + skip, step_times_.end()});
    const SeriesStats waits = Summarize({data_waits_.begin() + skip, data_waits_.end()});
    result_["status"] = status_;
    result_["steps_run"] = steps_run_;
    result_["warmup_steps"] = task_spec_.warmup_steps;
    result_["step_time_ms"] = StatsJson(steps, 1e3);
    result_["data_wait_ms"] = StatsJson(waits, 1e3);
    result_["data_wait_fraction"] = steps.sum + waits.sum > 0 ? waits.sum / (steps.sum + waits.sum) : 0.0;
    if (steps.n > 0) {
      const double achieved = flops_.train_step / steps.median;
      result_["throughput"] = {
          {"samples_per_s", task_spec_.batch_size / steps.median},
          {"end_to_end_samples_per_s", steps.n * task_spec_.batch_size / (steps.sum + waits.sum)}};
      result_["achieved_flops_per_s"] = achieved;
      result_["mfu"] = achieved / peak_.flops_per_s;
    } else {
      result_["throughput"] = nullptr;
      result_["mfu"] = nullptr;
    }
    result_["train_time_s"] = train_time_;
    result_["final_train_loss"] = last_loss_;
    result_["evals"] = evals_;
    if (task_spec_.target) {
      result_["target"] = {{"metric", task_spec_.target->metric}, {"value", task_spec_.target->value}};
      result_["time_to_target_s"] = time_to_target_ ? json(*time_to_target_) : json(nullptr);
      result_["steps_to_target"] = steps_to_target_ ? json(*steps_to_target_) : json(nullptr);
    }
    if (status_ == "completed") {
      if (!evaluated_) last_eval_ = EvaluateOn(data_.val);
      const EvalResult test = EvaluateOn(data_.test);
      const std::string quality = task_->quality();
      result_["val_loss"] = last_eval_.loss;
      result_["val_" + quality] = last_eval_.quality;
      result_["test_loss"] = test.loss;
      result_["test_" + quality] = test.quality;
    }
    if (loss_scale_) result_["loss_scale"] = *loss_scale_;
    if (!profile_.is_null()) {
      result_["profile"] = profile_;
      result_["profile"]["profiled_step_time_ms"] = StatsJson(Summarize(profiled_times_), 1e3);
    }
    result_["bottleneck"] = BottleneckVerdict(result_);
  }

  int steps_run() const { return steps_run_; }

 private:
  EvalResult EvaluateOn(const Split& split) const {
    return Evaluate(*net_, *task_, data_, split, task_spec_.batch_size, dev_, rt_, format_);
  }

  void EmitProgress(double lr, double step_s, double wait_s) const {
    std::vector<double> measured(
        step_times_.begin() + std::min<size_t>(task_spec_.warmup_steps, step_times_.size()),
        step_times_.end());
    options_.emit({{"event", "progress"},
                   {"step", steps_run_},
                   {"loss", last_loss_},
                   {"lr", lr},
                   {"step_time_ms", step_s * 1e3},
                   {"median_step_time_ms", Summarize(measured).median * 1e3},
                   {"data_wait_ms", wait_s * 1e3}});
  }

  void EvaluateValidation() {
    last_eval_ = EvaluateOn(data_.val);
    evaluated_ = true;
    json e = {{"event", "eval"},
              {"step", steps_run_},
              {"val_loss", last_eval_.loss},
              {"val_" + task_->quality(), last_eval_.quality},
              {"train_time_s", train_time_}};
    options_.emit(e);
    e.erase("event");
    evals_.push_back(e);
    if (task_spec_.target && !time_to_target_ && ReachedTarget(*task_spec_.target, last_eval_)) {
      time_to_target_ = train_time_;
      steps_to_target_ = steps_run_;
    }
  }

  const TrialSpec& spec_;
  const TaskSpec& task_spec_;
  const RuntimeSpec& rt_;
  const TrialOptions& options_;
  json& result_;

  DeviceInfo dev_;
  at::MemoryFormat format_ = at::MemoryFormat::Contiguous;
  std::unique_ptr<Task> task_;
  Dataset data_;
  std::shared_ptr<model::NetworkImpl> net_;
  ModelFlops flops_;
  PeakFlops peak_;

  std::vector<double> step_times_, data_waits_;  // seconds, every step outside the profiled ones
  std::vector<double> profiled_times_;           // kept out of step_times_: the profiler slows them down
  int steps_run_ = 0;
  double train_time_ = 0;  // summed step time so far
  double last_loss_ = 0;
  std::string status_ = "completed";
  json evals_ = json::array();
  EvalResult last_eval_;
  bool evaluated_ = false;
  std::optional<double> time_to_target_;
  std::optional<int> steps_to_target_;
  std::optional<double> loss_scale_;
  json profile_;
};

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
  const int threads = spec.runtime.threads > 0
                          ? spec.runtime.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  const std::string allocator = ConfigureHostAllocator();

  json result = {{"event", "result"},
                 {"schema", kTrialOutputSchema},
                 {"trial_id", spec.trial_id},
                 {"seed", spec.seed},
                 {"threads", threads},
                 {"torch_version", TORCH_VERSION},
                 {"host_allocator", allocator},
                 {"precision", spec.runtime.precision},
                 {"memory_format", spec.runtime.memory_format},
                 {"batch_size", spec.task.batch_size},
                 {"dataset", spec.task.dataset}};
  TrialRun run(spec, options, &result);
  try {
    run.Setup(threads);
    run.Train();
    run.Finish();
  } catch (const std::exception& e) {
    result["status"] = "failed";
    result["error_kind"] = ErrorKind(e);
    result["error"] = Message(e);
    result["steps_run"] = run.steps_run();
  }
  result["wall_time_s"] = Seconds(wall_start, Clock::now());
  return result;
}

}  // namespace frontier
