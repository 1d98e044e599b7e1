#include "worker/trial/training.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

#include "worker/trial/measure/device.h"
#include "worker/trial/model/model.h"
#include "worker/trial/op_variants.h"
#include "os/monotonic.h"

namespace frontier {
namespace {

using json = nlohmann::json;
namespace dist = frontier::distributed;

json StatsJson(const SeriesStats& s, double scale) {
  return {{"n", s.n},          {"median", s.median * scale}, {"p10", s.p10 * scale}, {"p90", s.p90 * scale},
          {"mean", s.mean * scale}, {"min", s.min * scale},       {"max", s.max * scale}, {"cv", s.cv}};
}

void SetLearningRate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
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

struct Training::StepResult {
  double step_s = 0;      // the slowest rank's (this one's with one rank)
  double own_step_s = 0;  // this rank's
  double wait_s = 0, loss = 0, lr = 0;
  dist::CommFigures comms;  // the gradient all-reduce; zeros with one rank
};

Training::Training(const TrialSpec& spec, const TrialOptions& options, PreparedModel& m, dist::TrialRanks& ranks,
                   PhaseTimes& phases, json& result)
    : spec_(spec), options_(options), m_(m), ranks_(ranks), phases_(phases), result_(result) {}

Training::~Training() = default;

void Training::Emit(const json& event) const {
  if (ranks_.rank == 0) options_.emit(event);  // rank 0 speaks for the trial
}

size_t Training::warmup_skip() const {
  return std::min<size_t>(spec_.task.warmup_steps, step_times_.size());
}

void Training::Run(Evaluations& evaluations, bool spot_checks) {
  const TaskSpec& task = spec_.task;
  const RuntimeSpec& rt = spec_.runtime;
  parameters_ = m_.net->parameters();
  if (ranks_.group) {  // rank 0's initial parameters and buffers on every rank, then the gradient hooks
    dist::DataParallelOptions options;
    options.bucket_cap_mb = rt.bucket_cap_mb;
    options.overlap = rt.overlap;
    options.batch_policy = rt.batch_policy;
    dp_ = std::make_unique<dist::DataParallel>(*ranks_.group, parameters_, m_.net->buffers(), options);
  }
  optimizer_ = MakeOptimizer(task.optimizer, parameters_);
  scaler_ = std::make_unique<LossScaler>(rt.precision == Precision::kFp16);
  // Every rank draws the same global batches (same seed) and trains on its rows of them.
  sampler_ = std::make_unique<BatchSampler>(m_.data, static_cast<int>(ranks_.shard.global), task.augment,
                                            static_cast<uint64_t>(spec_.seed));
  MemoryTracker memory(m_.dev);
  memory.Start();
  m_.net->train();

  // By default the profiled steps come after the last training step (Profile
  // runs them); a spec's profile.start puts them among the training steps.
  profiler_ = std::make_unique<StepProfiler>(spec_.profile, task.steps, options_.artifact_dir, spec_.trial_id,
                                             m_.dev.is_cuda());
  std::vector<int> measured;  // the spot-checked steps are drawn among the measured ones that are not profiled
  for (int step = task.warmup_steps; step < task.steps && spot_checks; ++step) {
    if (!profiler_->Covers(step)) measured.push_back(step);
  }
  const int spots = std::min<int>(rt.spot_checks, static_cast<int>(measured.size()) / 2);  // half stay measured
  const std::set<int> spot_steps = ops::DrawSpotCheckSteps(measured, spots, spec_.seed);
  if (!spot_steps.empty()) {
    spot_check_ = std::make_unique<ops::SpotCheck>();
    result_["spot_checks"] = json::array();
  }
  for (int step = 0; step < task.steps; ++step) {
    auto since = Monotonic::now();
    const bool spot = spot_steps.count(step) > 0;
    if (spot) {  // kept out of the peak memory too: the copies and the float64 reference
      memory.Pause();
      spot_check_->Arm("training step " + std::to_string(step));
    }
    const StepResult s = RunStep(step);
    if (spot) {  // kept out of the step statistics: the watched calls' copies slow it down
      RecordSpotChecks(*spot_check_, step, &result_);
      memory.Resume();
      since = phases_.AddSince("gate", since);
    } else if (profiler_->Covers(step)) {
      profiled_times_.push_back(s.step_s);
      since = phases_.AddSince("profile", since);
    } else {
      const bool warmup = step_times_.size() < static_cast<size_t>(task.warmup_steps);
      step_times_.push_back(s.step_s);
      data_waits_.push_back(s.wait_s);
      train_time_ += s.step_s;
      own_step_times_.push_back(s.own_step_s);
      comms_.push_back(s.comms);
      since = phases_.AddSince(warmup ? "warmup" : "train", since);
    }
    steps_run_ = step + 1;
    last_loss_ = s.loss;
    if (!std::isfinite(last_loss_)) {
      status_ = "diverged";
      result_["error"] = "loss became " + std::to_string(last_loss_) + " at step " + std::to_string(step);
      break;
    }
    if (options_.progress_every > 0 && (steps_run_ % options_.progress_every == 0 || steps_run_ == task.steps)) {
      EmitProgress(s.lr, s.step_s, s.wait_s);
    }
    const bool eval_point = (task.eval_every > 0 && steps_run_ % task.eval_every == 0) || steps_run_ == task.steps;
    if (eval_point) {
      Emit(evaluations.AtStep(steps_run_, train_time_));
      phases_.AddSince("eval", since);
    }
  }
  result_["peak_memory_mb"] = memory.PeakBytes() / (1024.0 * 1024.0);
  result_["peak_memory_kind"] = memory.kind();
  result_["process_peak_rss_mb"] = MemoryTracker::PeakResidentBytes() / (1024.0 * 1024.0);
  if (scaler_->scale() != 65536.0) loss_scale_ = scaler_->scale();
}

// One optimizer step: the batch (its data wait), then forward, backward and
// update between device-synchronized points; profiled when the profiler covers it.
Training::StepResult Training::RunStep(int step) {
  const dist::Shard& shard = ranks_.shard;
  const auto data_start = Monotonic::now();
  if (options_.before_batch) options_.before_batch(step);
  auto [images, labels] = sampler_->Next();
  torch::Tensor indices = sampler_->LastIndices();
  if (ranks_.group) {  // this rank's rows of the global batch
    images = images.slice(0, shard.begin, shard.begin + shard.count);
    labels = labels.slice(0, shard.begin, shard.begin + shard.count);
    indices = indices.slice(0, shard.begin, shard.begin + shard.count);
  }
  torch::Tensor x = Normalize(m_.data, images, m_.dev.device, m_.format);
  torch::Tensor y = labels.to(m_.dev.device);
  Synchronize(m_.dev);
  profiler_->BeforeStep(step);
  const auto t0 = Monotonic::now();

  StepResult r;
  r.lr = LearningRateAt(spec_.task, step);
  SetLearningRate(*optimizer_, r.lr);
  optimizer_->zero_grad();
  torch::Tensor loss;
  {
    AutocastScope autocast(spec_.runtime.precision, m_.dev);
    loss = m_.task->TrainingLoss(m_.net->forward(x), y, m_.data, indices);
    // moe blocks' weighted load-balancing loss: trained on, part of the step's
    // loss, never of val_loss (evaluation runs in eval mode, which stores none).
    if (const torch::Tensor aux = model::TakeAuxiliaryLoss(*m_.net); aux.defined()) loss = loss + aux;
  }
  if (dp_) dp_->BeforeBackward(shard.weight);
  scaler_->Scale(loss).backward();
  if (dp_) r.comms = dp_->AfterBackward();  // .grad now holds the global batch's gradient on every rank
  const bool apply = scaler_->Unscale(parameters_);
  if (apply && spec_.task.grad_clip > 0) torch::nn::utils::clip_grad_norm_(parameters_, spec_.task.grad_clip);
  if (apply) optimizer_->step();
  Synchronize(m_.dev);
  const auto t1 = Monotonic::now();
  profiler_->AfterStep(step);
  r.step_s = r.own_step_s = SecondsBetween(t0, t1);
  r.wait_s = SecondsBetween(data_start, t0);
  r.loss = loss.item<double>();
  if (ranks_.group) {  // one collective a step: the slowest rank's time, the global batch's loss
    const auto ranks = ranks_.group->AllGather({r.step_s, r.loss * shard.weight}, "step " + std::to_string(step));
    r.step_s = 0;
    r.loss = 0;
    for (const std::vector<double>& f : ranks) {
      r.step_s = std::max(r.step_s, f[0]);
      r.loss += f[1];
    }
  }
  return r;
}

void Training::EmitProgress(double lr, double step_s, double wait_s) const {
  const std::vector<double> measured(step_times_.begin() + warmup_skip(), step_times_.end());
  Emit({{"event", "progress"},
        {"step", steps_run_},
        {"loss", last_loss_},
        {"lr", lr},
        {"step_time_ms", step_s * 1e3},
        {"median_step_time_ms", Summarize(measured).median * 1e3},
        {"data_wait_ms", wait_s * 1e3}});
}

SeriesStats Training::StatisticsInto(double train_flops_per_step, double peak_flops_per_s) const {
  const size_t skip = warmup_skip();
  const SeriesStats steps = Summarize({step_times_.begin() + skip, step_times_.end()});
  const SeriesStats waits = Summarize({data_waits_.begin() + skip, data_waits_.end()});
  result_["status"] = status_;
  result_["steps_run"] = steps_run_;
  result_["warmup_steps"] = spec_.task.warmup_steps;
  result_["step_time_ms"] = StatsJson(steps, 1e3);
  result_["ranks"] = spec_.runtime.ranks;
  result_["data_wait_ms"] = StatsJson(waits, 1e3);
  result_["data_wait_fraction"] = steps.sum + waits.sum > 0 ? waits.sum / (steps.sum + waits.sum) : 0.0;
  if (steps.n > 0) {
    const double achieved = train_flops_per_step / steps.median;
    // Global rows per (slowest rank's) step; per rank: that over the ranks.
    const double rows = static_cast<double>(ranks_.shard.global);
    result_["throughput"] = {{"samples_per_s", rows / steps.median},
                             {"per_rank_samples_per_s", rows / spec_.runtime.ranks / steps.median},
                             {"end_to_end_samples_per_s", steps.n * rows / (steps.sum + waits.sum)}};
    result_["achieved_flops_per_s"] = achieved;
    result_["mfu"] = achieved / peak_flops_per_s;
  } else {
    result_["throughput"] = nullptr;
    result_["mfu"] = nullptr;
  }
  result_["train_time_s"] = train_time_;
  result_["final_train_loss"] = last_loss_;
  if (loss_scale_) result_["loss_scale"] = *loss_scale_;
  return steps;
}

void Training::Profile() {
  std::string error;
  if (completed() && spec_.profile.start < 0) {
    try {  // the default profile: more steps after training and evaluation, outside every training figure
      for (int i = 0; i < spec_.profile.steps; ++i) profiled_times_.push_back(RunStep(spec_.task.steps + i).step_s);
    } catch (const std::exception& e) {
      error = "the profiled steps after training failed: " + FirstLineOf(e);
    }
  }
  const json profile = profiler_->Finish();
  if (profile.is_null()) return;
  result_["profile"] = profile;
  result_["profile"]["profiled_step_time_ms"] = StatsJson(Summarize(profiled_times_), 1e3);
  if (!error.empty()) result_["profile"]["error"] = error;
}

// The result's "distributed" section and comms metrics: each rank's medians
// over the measured steps, gathered on every rank (a collective), written by
// rank 0 (docs/distributed.md).
void Training::RanksInto(const SeriesStats& steps) const {
  if (!ranks_.group) {
    result_["comms_ms"] = 0.0;
    result_["comms_exposed_ms"] = 0.0;
    result_["comms_exposed_share"] = 0.0;
    return;
  }
  const size_t skip = warmup_skip();
  const auto median_of = [&](auto field) {
    std::vector<double> values;
    for (size_t i = skip; i < comms_.size(); ++i) values.push_back(field(comms_[i]));
    return Summarize(values).median;
  };
  const double step = steps.n > 0 ? steps.median : 0.0;
  const RuntimeSpec& rt = spec_.runtime;
  dist::RankFigures mine;
  mine.step_s = Summarize({own_step_times_.begin() + std::min(skip, own_step_times_.size()), own_step_times_.end()})
                    .median;
  mine.allreduce_s = median_of([](const dist::CommFigures& c) { return c.allreduce_s; });
  mine.exposed_s = median_of([](const dist::CommFigures& c) { return c.exposed_s; });
  mine.unpack_s = median_of([](const dist::CommFigures& c) { return c.unpack_s; });
  mine.samples_per_s = step > 0 ? ranks_.shard.count / step : 0.0;
  mine.mfu = result_.value("mfu", json()).is_number() ? result_["mfu"].get<double>() : 0.0;
  mine.peak_memory_mb = result_.value("peak_memory_mb", 0.0);
  mine.rows_per_step = ranks_.shard.count;
  const dist::GatheredFigures all = dist::GatherRankFigures(*ranks_.group, mine);
  const int in_backward = comms_.empty() ? 0 : comms_.back().buckets_launched_in_backward;
  const double share = step > 0 ? all.exposed_s / step : 0.0;
  result_["comms_ms"] = all.allreduce_s * 1e3;
  result_["comms_exposed_ms"] = all.exposed_s * 1e3;
  result_["comms_exposed_share"] = share;
  result_["distributed"] = {{"ranks", rt.ranks},
                            {"nodes", rt.nodes},
                            {"backend", ranks_.group->backend_name()},
                            {"batch_policy", rt.batch_policy},
                            {"global_batch", ranks_.shard.global},
                            {"bucket_cap_mb", rt.bucket_cap_mb},
                            {"overlap", rt.overlap},
                            {"buckets", dp_->bucket_count()},
                            {"buckets_launched_in_backward", in_backward},
                            {"allreduce_bytes_per_step", dp_->gradient_bytes()},
                            {"step_time_ms", step * 1e3},
                            {"allreduce_ms", all.allreduce_s * 1e3},
                            {"exposed_ms", all.exposed_s * 1e3},
                            {"exposed_share", share},
                            {"figures", "medians over the measured steps; allreduce_ms and exposed_ms the "
                                        "largest rank's, step_time_ms the slowest rank's"},
                            {"per_rank", all.per_rank}};
}

}  // namespace frontier
