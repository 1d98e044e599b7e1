#include "worker/trial/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include <torch/torch.h>
#include <torch/version.h>

#include "worker/trial/data/dataset.h"
#include "worker/trial/deploy.h"
#include "worker/trial/distributed/data_parallel.h"
#include "worker/profile/bottleneck.h"
#include "worker/host.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/flop_counter.h"
#include "worker/trial/measure/latency.h"
#include "worker/trial/measure/phases.h"
#include "worker/trial/optimizer.h"
#include "worker/trial/measure/profiler.h"
#include "worker/trial/measure/step_stats.h"
#include "worker/trial/model/model.h"
#include "worker/trial/op_bench.h"
#include "worker/trial/ops/correctness.h"
#include "worker/trial/ops/spot_check.h"
#include "worker/trial/plugin.h"
#include "worker/trial/tasks/task.h"

namespace frontier {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace dist = frontier::distributed;

// Random input sets the correctness gate draws per op call (besides the op's edge cases).
constexpr int kGateDraws = 3;
// Timed rounds of the trial's op variant against its reference (result field `op`).
constexpr int kOpTimingRounds = 5;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

json StatsJson(const SeriesStats& s, double scale) {
  return {{"n", s.n},          {"median", s.median * scale}, {"p10", s.p10 * scale}, {"p90", s.p90 * scale},
          {"mean", s.mean * scale}, {"min", s.min * scale},       {"max", s.max * scale}, {"cv", s.cv}};
}

struct EvalResult {
  double loss = 0;
  double quality = 0;  // the task's quality metric
};

void SetLearningRate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

bool ReachedTarget(const TargetSpec& target, const EvalResult& e) {
  return target.metric == "val_loss" ? e.loss <= target.value : e.quality >= target.value;
}

// A non-reference op variant the correctness gate found wrong.
class IncorrectVariant : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string ErrorKind(const std::exception& e) {
  if (dynamic_cast<const SpecError*>(&e)) return "spec";
  if (dynamic_cast<const PluginError*>(&e)) return "plugin";
  if (dynamic_cast<const IncorrectVariant*>(&e)) return "incorrect";
  if (dynamic_cast<const DataError*>(&e)) return "data";
  if (dynamic_cast<const UnsupportedPrecision*>(&e)) return "precision";
  if (IsOutOfMemory(e)) return "out_of_memory";
  if (dynamic_cast<const dist::DistributedError*>(&e)) return "distributed";
  return "runtime";
}

// With `forward_s`, each full batch's forward pass (device-synchronized) is timed into it: the
// final evaluation's passes are the latency at the training batch (MeasureLatency).
EvalResult Evaluate(model::NetworkImpl& net, const Task& task, const Dataset& data, const Split& split,
                    int batch_size, const DeviceInfo& dev, const RuntimeSpec& rt, at::MemoryFormat format,
                    std::vector<double>* forward_s = nullptr) {
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
    const bool timed = forward_s != nullptr && end - begin == batch_size;
    const auto start = Clock::now();
    {
      AutocastScope autocast(rt.precision, dev);
      logits = net.forward(x);
    }
    if (timed) {
      Synchronize(dev);
      forward_s->push_back(Seconds(start, Clock::now()));
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
    if (dev_.is_cuda()) result_["tf32"] = Tf32Settings();  // off (SelectDevice): fp32 is IEEE fp32, as its peak
    CheckPrecision(rt_.precision, dev_);
    if (dev_.is_cuda()) torch::cuda::manual_seed_all(spec_.seed);
    ConnectRanks();
    format_ =
        rt_.memory_format == "channels_last" ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;

    auto since = PhaseTimes::Clock::now();
    LoadPlugins(rt_.plugins);
    const ResolvedArch arch = ResolveArch(spec_.arch, task_spec_);
    task_ = MakeTask(task_spec_);
    since = phases_.AddSince("model", since);
    data_ = task_->LoadData(spec_, arch);
    result_["dataset_bytes"] = data_.bytes();
    since = phases_.AddSince("data", since);
    net_ = task_->BuildNetwork(arch, task_spec_);
    net_->to(dev_.device);
    task_->Describe(data_, &result_);
    model::SetMemoryFormat(*net_, format_);
    const int64_t params = model::CountParameters(*net_);
    const torch::Tensor batch = Normalize(data_, data_.train.images.slice(0, 0, shard_.count), dev_.device, format_);
    since = phases_.AddSince("model", since);
    std::string recorded_op;  // the first op the model calls, if any
    {
      ops::CallRecorder recorder;  // the op calls of one forward pass, at the model's shapes
      flops_ = CountModelFlops(net_, batch);
      checked_variants_ = UsesNonReferenceVariants(recorder.calls());
      if (!recorder.calls().empty()) recorded_op = recorder.calls().front().op;
    }
    since = phases_.AddSince("flops", since);
    if (checked_variants_) {
      CheckOpVariants(batch);
      phases_.AddSince("gate", since);
    } else if (!recorded_op.empty()) {  // the reference itself: 1 by definition, nothing timed
      result_["op"] = {{"op", recorded_op}, {"variant", ops::OpRegistry().At(recorded_op).reference},
                       {"reference", ops::OpRegistry().At(recorded_op).reference}, {"speedup", 1.0}};
    }
    peak_ = DevicePeakFlops(rt_.precision, dev_,
                            options_.peak_flops_json.empty() ? std::nullopt
                                                             : std::optional(ParseGivenPeaks(options_.peak_flops_json)));
    result_["params"] = params;
    result_["flops"] = {{"forward_per_step", flops_.forward},
                        {"train_per_step", flops_.train_step},
                        {"train_per_sample", flops_.train_step / shard_.count},
                        {"forward_by_op", flops_.forward_by_op},
                        {"convention", task_->flop_convention()}};
    if (json moe = model::MoeRoutingSummary(*net_); !moe.empty()) result_["flops"]["moe"] = moe;  // of that forward
    result_["peak_flops"] = peak_.ToJson();
    Emit({{"event", "start"}, {"trial_id", spec_.trial_id}, {"device", dev_.device.str()},
          {"device_name", dev_.name}, {"threads", threads}, {"params", params},
          {"train_flops_per_step", flops_.train_step}, {"peak_flops_per_s", peak_.flops_per_s},
          {"peak_flops_source", peak_.source}, {"ranks", rt_.ranks}});
  }

  static bool UsesNonReferenceVariants(const std::vector<ops::OpCall>& calls) {
    return std::any_of(calls.begin(), calls.end(), [](const ops::OpCall& call) {
      return call.variant != ops::OpRegistry().At(call.op).reference;
    });
  }

  // The correctness gate: every non-reference op variant a forward pass in the
  // trial's precision uses, against its reference, before anything is timed.
  void CheckOpVariants(const torch::Tensor& batch) {
    const std::vector<ops::OpCall> calls = RecordOpCalls(*net_, [&] { net_->forward(batch); }, rt_.precision, dev_);
    const ops::GateResult gate = ops::RunGate(calls, kGateDraws, static_cast<uint64_t>(spec_.seed));
    result_["correctness"] = gate.ToJson();
    if (const ops::VariantCheck* failed = gate.failure()) FailIncorrect(*failed);
    TimeOpVariant(calls);
  }

  [[noreturn]] void FailIncorrect(const ops::VariantCheck& failed) {
    result_["incorrect"] = failed.ToJson();
    throw IncorrectVariant(failed.op + " variant '" + failed.variant + "' " + failed.problem + " (" + failed.where +
                           "; reference '" + failed.reference + "', " + failed.shapes + ")");
  }

  // A spot-checked step's watched calls against the reference (ops/spot_check.h); a wrong one fails the trial.
  void SpotCheck(int step) {
    for (const ops::VariantCheck& check : spot_check_->Check()) {
      json entry = check.ToJson();
      entry["step"] = step;
      entry.erase("deterministic");  // a repeated call's finding: there is none here
      result_["spot_checks"].push_back(entry);
      if (!check.passed) FailIncorrect(check);
    }
  }

  // The first non-reference op call's variant against its reference at the
  // model's shapes (the op benchmark's timing, a few rounds): the result's
  // `op`, whose speed-up and bandwidth share are metrics (op_speedup,
  // op_bandwidth_share). Outside step and train time, like the gate.
  void TimeOpVariant(const std::vector<ops::OpCall>& calls) {
    for (const ops::OpCall& call : calls) {
      if (call.variant == ops::OpRegistry().At(call.op).reference) continue;
      OpBenchOptions options;
      options.rounds = kOpTimingRounds;
      options.warmup = 1;
      const json timed = TimeVariants(call, {call.variant}, dev_, MeasureCopyBandwidth(dev_), options,
                                      static_cast<uint64_t>(spec_.seed));
      json op = {{"op", call.op}, {"variant", call.variant}, {"reference", timed["reference"]},
                 {"shapes", timed["shapes"]}, {"rounds", kOpTimingRounds}};
      for (const json& v : timed["variants"]) {
        const std::string prefix = v["variant"] == call.variant ? "" : "reference_";
        op[prefix + "forward_backward_ms"] = v["forward_backward_ms"]["median"];
        op[prefix + "forward_ms"] = v["forward_ms"]["median"];
        if (prefix.empty()) {
          op["speedup"] = v["speedup"]["median"];
          op["speedup_interval"] = {v["speedup"]["low"], v["speedup"]["high"]};
          if (v.contains("bandwidth_share")) op["bandwidth_share"] = v["bandwidth_share"];
        }
      }
      result_["op"] = op;
      return;
    }
  }

  void Train() {
    parameters_ = net_->parameters();
    if (group_) {  // rank 0's initial parameters and buffers on every rank, then the gradient hooks
      dist::DataParallelOptions options;
      options.bucket_cap_mb = rt_.bucket_cap_mb;
      options.overlap = rt_.overlap;
      options.batch_policy = *dist::ParseBatchPolicy(rt_.batch_policy);
      dp_ = std::make_unique<dist::DataParallel>(*group_, parameters_, net_->buffers(), options);
    }
    optimizer_ = MakeOptimizer(task_spec_.optimizer, parameters_);
    scaler_ = std::make_unique<LossScaler>(rt_.precision == "fp16");
    // Every rank draws the same global batches (same seed) and trains on its rows of them.
    sampler_ = std::make_unique<BatchSampler>(data_, static_cast<int>(shard_.global), task_spec_.augment,
                                              static_cast<uint64_t>(spec_.seed));
    MemoryTracker memory(dev_);
    memory.Start();
    net_->train();

    // By default the profiled steps come after the last training step (Finish
    // runs them); a spec's profile.start puts them among the training steps.
    profiler_ = std::make_unique<StepProfiler>(spec_.profile, task_spec_.steps, options_.artifact_dir,
                                               spec_.trial_id, dev_.is_cuda());
    std::vector<int> measured;  // the spot-checked steps are drawn among the measured ones that are not profiled
    for (int step = task_spec_.warmup_steps; step < task_spec_.steps && checked_variants_; ++step) {
      if (!profiler_->Covers(step)) measured.push_back(step);
    }
    const int spots = std::min<int>(rt_.spot_checks, static_cast<int>(measured.size()) / 2);  // half stay measured
    const std::set<int> spot_steps = ops::DrawSpotCheckSteps(measured, spots, spec_.seed);
    if (!spot_steps.empty()) {
      spot_check_ = std::make_unique<ops::SpotCheck>();
      result_["spot_checks"] = json::array();
    }
    for (int step = 0; step < task_spec_.steps; ++step) {
      auto since = PhaseTimes::Clock::now();
      const bool spot = spot_steps.count(step) > 0;
      if (spot) {  // kept out of the peak memory too: the copies and the float64 reference
        memory.Pause();
        spot_check_->Arm("training step " + std::to_string(step));
      }
      const StepResult s = RunStep(step);
      if (spot) {  // kept out of the step statistics: the watched calls' copies slow it down
        SpotCheck(step);
        memory.Resume();
        since = phases_.AddSince("gate", since);
      } else if (profiler_->Covers(step)) {
        profiled_times_.push_back(s.step_s);
        since = phases_.AddSince("profile", since);
      } else {
        const bool warmup = step_times_.size() < static_cast<size_t>(task_spec_.warmup_steps);
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
      if (options_.progress_every > 0 &&
          (steps_run_ % options_.progress_every == 0 || steps_run_ == task_spec_.steps)) {
        EmitProgress(s.lr, s.step_s, s.wait_s);
      }
      const bool eval_point = (task_spec_.eval_every > 0 && steps_run_ % task_spec_.eval_every == 0) ||
                              steps_run_ == task_spec_.steps;
      if (eval_point) {
        EvaluateValidation();
        phases_.AddSince("eval", since);
      }
    }
    result_["peak_memory_mb"] = memory.PeakBytes() / (1024.0 * 1024.0);
    result_["peak_memory_kind"] = memory.kind();
    result_["process_peak_rss_mb"] = MemoryTracker::PeakResidentBytes() / (1024.0 * 1024.0);
    if (scaler_->scale() != 65536.0) loss_scale_ = scaler_->scale();
  }

  void Finish() {
    const size_t skip = std::min<size_t>(task_spec_.warmup_steps, step_times_.size());
    const SeriesStats steps = Summarize({step_times_.begin() + skip, step_times_.end()});
    const SeriesStats waits = Summarize({data_waits_.begin() + skip, data_waits_.end()});
    result_["status"] = status_;
    result_["steps_run"] = steps_run_;
    result_["warmup_steps"] = task_spec_.warmup_steps;
    result_["step_time_ms"] = StatsJson(steps, 1e3);
    result_["ranks"] = rt_.ranks;
    result_["data_wait_ms"] = StatsJson(waits, 1e3);
    result_["data_wait_fraction"] = steps.sum + waits.sum > 0 ? waits.sum / (steps.sum + waits.sum) : 0.0;
    if (steps.n > 0) {
      const double achieved = flops_.train_step / steps.median;
      // Global rows per (slowest rank's) step; per rank: that over the ranks.
      const double rows = static_cast<double>(shard_.global);
      result_["throughput"] = {{"samples_per_s", rows / steps.median},
                               {"per_rank_samples_per_s", rows / rt_.ranks / steps.median},
                               {"end_to_end_samples_per_s", steps.n * rows / (steps.sum + waits.sum)}};
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
    auto since = PhaseTimes::Clock::now();
    if (status_ == "completed") {
      if (!evaluated_) last_eval_ = EvaluateOn(data_.val, /*final=*/true);
      final_val_passes_ = final_forward_s_.size();
      const EvalResult test = EvaluateOn(data_.test, /*final=*/true);
      const std::string quality = task_->quality();
      result_["val_loss"] = last_eval_.loss;
      result_["val_" + quality] = last_eval_.quality;
      result_["test_loss"] = test.loss;
      result_["test_" + quality] = test.quality;
    }
    if (loss_scale_) result_["loss_scale"] = *loss_scale_;
    since = phases_.AddSince("eval", since);
    if (status_ == "completed") MeasureLatency();
    since = phases_.AddSince("latency", since);
    // Before the profiled steps, which train on: the deployed network is the evaluated one.
    if (status_ == "completed" && spec_.deploy.enabled && rank_ == 0) MeasureOnboard();
    since = phases_.AddSince("deploy", since);
    std::string profile_error;
    if (status_ == "completed" && spec_.profile.start < 0) profile_error = RunProfiledSteps();
    const json profile = profiler_->Finish();
    phases_.AddSince("profile", since);
    if (!profile.is_null()) {
      result_["profile"] = profile;
      result_["profile"]["profiled_step_time_ms"] = StatsJson(Summarize(profiled_times_), 1e3);
      if (!profile_error.empty()) result_["profile"]["error"] = profile_error;
    }
    AggregateRanks(skip, steps);
    result_["bottleneck"] = BottleneckVerdict(result_);
  }

  int steps_run() const { return steps_run_; }
  PhaseTimes& phases() { return phases_; }

 private:
  struct StepResult {
    double step_s = 0;      // the slowest rank's (this one's with one rank)
    double own_step_s = 0;  // this rank's
    double wait_s = 0, loss = 0, lr = 0;
    dist::CommFigures comms;  // the gradient all-reduce; zeros with one rank
  };

  void Emit(const json& event) const {
    if (rank_ == 0) options_.emit(event);  // rank 0 speaks for the trial
  }

  // With runtime.ranks > 1: this process's rank from its environment (the
  // worker, srun or torchrun set it), the process group, this rank's rows of
  // each global batch. With one rank: the whole batch.
  void ConnectRanks() {
    const dist::BatchPolicy policy = *dist::ParseBatchPolicy(rt_.batch_policy);
    shard_ = dist::ShardOf(task_spec_.batch_size, 0, 1, policy);
    if (rt_.ranks == 1) return;
    std::string problem;
    const std::optional<dist::Rendezvous> rendezvous = dist::RendezvousFromEnvironment(&problem);
    if (!rendezvous) {
      throw dist::DistributedError(
          !problem.empty() ? problem
                           : "runtime.ranks is " + std::to_string(rt_.ranks) +
                                 " but this process has no rendezvous in its environment (FRONTIER_RANK, "
                                 "FRONTIER_WORLD_SIZE and FRONTIER_RENDEZVOUS, or torchrun's or srun's "
                                 "variables): frontier-worker starts a trial's ranks (docs/distributed.md)");
    }
    if (rendezvous->world_size != rt_.ranks) {
      throw dist::DistributedError("runtime.ranks is " + std::to_string(rt_.ranks) + " but the environment says " +
                                   std::to_string(rendezvous->world_size) + " ranks");
    }
    rank_ = rendezvous->rank;
    result_["rank"] = rank_;
    group_ = dist::ProcessGroup::Connect(*rendezvous, dev_.is_cuda() ? dist::Backend::kNccl : dist::Backend::kGloo);
    shard_ = dist::ShardOf(task_spec_.batch_size, rank_, rt_.ranks, policy);
  }

  // The result's "distributed" section and comms metrics: each rank's
  // medians over the measured steps, gathered on every rank (a collective),
  // written by rank 0 (docs/distributed.md).
  void AggregateRanks(size_t skip, const SeriesStats& steps) {
    if (!group_) {
      result_["comms_ms"] = 0.0;
      result_["comms_exposed_ms"] = 0.0;
      result_["comms_exposed_share"] = 0.0;
      return;
    }
    const auto median_of = [&](auto field) {
      std::vector<double> values;
      for (size_t i = skip; i < comms_.size(); ++i) values.push_back(field(comms_[i]));
      return Summarize(values).median;
    };
    const double allreduce = median_of([](const dist::CommFigures& c) { return c.allreduce_s; });
    const double exposed = median_of([](const dist::CommFigures& c) { return c.exposed_s; });
    const double step = steps.n > 0 ? steps.median : 0.0;
    const SeriesStats own = Summarize({own_step_times_.begin() + std::min(skip, own_step_times_.size()),
                                       own_step_times_.end()});
    const double mfu = result_.value("mfu", json()).is_number() ? result_["mfu"].get<double>() : 0.0;
    const std::vector<double> mine = {own.median,
                                      allreduce,
                                      exposed,
                                      median_of([](const dist::CommFigures& c) { return c.unpack_s; }),
                                      step > 0 ? shard_.count / step : 0.0,
                                      mfu,
                                      result_.value("peak_memory_mb", 0.0),
                                      static_cast<double>(shard_.count)};
    const std::vector<std::vector<double>> ranks = group_->AllGather(mine, "the ranks' figures");
    json per_rank = json::array();
    double worst_allreduce = 0, worst_exposed = 0;
    for (size_t r = 0; r < ranks.size(); ++r) {
      const std::vector<double>& f = ranks[r];
      worst_allreduce = std::max(worst_allreduce, f[1]);
      worst_exposed = std::max(worst_exposed, f[2]);
      per_rank.push_back({{"rank", r},
                          {"step_time_ms", f[0] * 1e3},
                          {"allreduce_ms", f[1] * 1e3},
                          {"exposed_ms", f[2] * 1e3},
                          {"unpack_ms", f[3] * 1e3},
                          {"samples_per_s", f[4]},
                          {"mfu", f[5]},
                          {"peak_memory_mb", f[6]},
                          {"rows_per_step", static_cast<int64_t>(f[7])}});
    }
    int in_backward = 0;
    if (!comms_.empty()) in_backward = comms_.back().buckets_launched_in_backward;
    const double share = step > 0 ? worst_exposed / step : 0.0;
    result_["comms_ms"] = worst_allreduce * 1e3;
    result_["comms_exposed_ms"] = worst_exposed * 1e3;
    result_["comms_exposed_share"] = share;
    result_["distributed"] = {{"ranks", rt_.ranks},
                              {"nodes", rt_.nodes},
                              {"backend", group_->backend_name()},
                              {"batch_policy", rt_.batch_policy},
                              {"global_batch", shard_.global},
                              {"bucket_cap_mb", rt_.bucket_cap_mb},
                              {"overlap", rt_.overlap},
                              {"buckets", dp_->bucket_count()},
                              {"buckets_launched_in_backward", in_backward},
                              {"allreduce_bytes_per_step", dp_->gradient_bytes()},
                              {"step_time_ms", step * 1e3},
                              {"allreduce_ms", worst_allreduce * 1e3},
                              {"exposed_ms", worst_exposed * 1e3},
                              {"exposed_share", share},
                              {"figures", "medians over the measured steps; allreduce_ms and exposed_ms the "
                                          "largest rank's, step_time_ms the slowest rank's"},
                              {"per_rank", per_rank}};
  }

  // One optimizer step: the batch (its data wait), then forward, backward and
  // update between device-synchronized points; profiled when the profiler covers it.
  StepResult RunStep(int step) {
    const auto data_start = Clock::now();
    if (options_.before_batch) options_.before_batch(step);
    auto [images, labels] = sampler_->Next();
    torch::Tensor indices = sampler_->LastIndices();
    if (group_) {  // this rank's rows of the global batch
      images = images.slice(0, shard_.begin, shard_.begin + shard_.count);
      labels = labels.slice(0, shard_.begin, shard_.begin + shard_.count);
      indices = indices.slice(0, shard_.begin, shard_.begin + shard_.count);
    }
    torch::Tensor x = Normalize(data_, images, dev_.device, format_);
    torch::Tensor y = labels.to(dev_.device);
    Synchronize(dev_);
    profiler_->BeforeStep(step);
    const auto t0 = Clock::now();

    StepResult r;
    r.lr = LearningRateAt(task_spec_, step);
    SetLearningRate(*optimizer_, r.lr);
    optimizer_->zero_grad();
    torch::Tensor loss;
    {
      AutocastScope autocast(rt_.precision, dev_);
      loss = task_->TrainingLoss(net_->forward(x), y, data_, indices);
      // moe blocks' weighted load-balancing loss: trained on, part of the step's
      // loss, never of val_loss (evaluation runs in eval mode, which stores none).
      if (const torch::Tensor aux = model::TakeAuxiliaryLoss(*net_); aux.defined()) loss = loss + aux;
    }
    if (dp_) dp_->BeforeBackward(shard_.weight);
    scaler_->Scale(loss).backward();
    if (dp_) r.comms = dp_->AfterBackward();  // .grad now holds the global batch's gradient on every rank
    const bool apply = scaler_->Unscale(parameters_);
    if (apply && task_spec_.grad_clip > 0) torch::nn::utils::clip_grad_norm_(parameters_, task_spec_.grad_clip);
    if (apply) optimizer_->step();
    Synchronize(dev_);
    const auto t1 = Clock::now();
    profiler_->AfterStep(step);
    r.step_s = r.own_step_s = Seconds(t0, t1);
    r.wait_s = Seconds(data_start, t0);
    r.loss = loss.item<double>();
    if (group_) {  // one collective a step: the slowest rank's time, the global batch's loss
      const auto ranks = group_->AllGather({r.step_s, r.loss * shard_.weight}, "step " + std::to_string(step));
      r.step_s = 0;
      r.loss = 0;
      for (const std::vector<double>& f : ranks) {
        r.step_s = std::max(r.step_s, f[0]);
        r.loss += f[1];
      }
    }
    return r;
  }

  // The default profile: spec.profile.steps more steps after training and
  // evaluation, so that no training figure includes them. Returns the error,
  // if any: a profiling problem never fails the trial.
  std::string RunProfiledSteps() {
    try {
      for (int i = 0; i < spec_.profile.steps; ++i) {
        profiled_times_.push_back(RunStep(task_spec_.steps + i).step_s);
      }
    } catch (const std::exception& e) {
      return "the profiled steps after training failed: " + FirstLineOf(e);
    }
    return "";
  }

  // What an inference pass is timed on: the first `batch` training images (repeated to fill a batch larger
  // than the split), normalized, on the device, in the trial's memory format.
  torch::Tensor InferenceInput(int batch) const {
    const torch::Tensor& images = data_.train.images;
    const torch::Tensor index = torch::arange(batch, torch::kLong) % images.size(0);
    return Normalize(data_, images.index_select(0, index), dev_.device, format_);
  }

  // Eval-mode forward latency at batch 1 and at spec.latency.batch_size (the
  // training batch by default), in the trial's precision and memory format,
  // each pass device-synchronized (docs/trial-output.md, Latency).
  void MeasureLatency() {
    const LatencySpec& spec = spec_.latency;
    if (spec.repetitions <= 0) return;
    const int batch = spec.batch_size > 0 ? spec.batch_size : task_spec_.batch_size;
    LatencyPlan plan;
    plan.warmup = spec.warmup;
    plan.repetitions = spec.repetitions;
    const auto measure = [&](int b, const std::vector<double>& earlier) {
      const torch::Tensor x = InferenceInput(b);
      return TimeRepeatedly(
          [&] {
            {
              AutocastScope autocast(rt_.precision, dev_);
              net_->forward(x);
            }
            Synchronize(dev_);
          },
          plan, earlier);
    };
    // The final evaluation ran the same eval-mode forward at the training batch on the validation and
    // test images: its passes come first (the first plan.warmup of them are the warm-up), and passes of
    // the latency's own run only for the repetitions they leave.
    const bool at_training_batch = batch == task_spec_.batch_size && batch > 1;
    const std::vector<double> earlier = at_training_batch ? final_forward_s_ : std::vector<double>{};
    const size_t from_evaluation = TimedFromEarlier(plan, earlier.size());
    net_->eval();
    SeriesStats one, many;
    {
      torch::NoGradGuard no_grad;  // not InferenceMode: its tensors must not reach the profiled steps
      one = measure(1, {});
      many = batch == 1 ? one : measure(batch, earlier);
    }
    net_->train();
    result_["latency_ms"] = many.median * 1e3;
    result_["latency_p99_ms"] = many.p99 * 1e3;
    result_["latency_b1_ms"] = one.median * 1e3;
    result_["latency_b1_p99_ms"] = one.p99 * 1e3;
    result_["latency"] = {{"mode", "eval, no autograd, forward only"},
                          {"precision", rt_.precision},
                          {"memory_format", rt_.memory_format},
                          {"device", dev_.device.str()},
                          {"synchronized", dev_.is_cuda() ? "cuda: after every pass" : "cpu: synchronous"},
                          {"batch_1", LatencyJson(1, one, plan.warmup)},
                          {"batch", LatencyJson(batch, many, plan.warmup)}};
    result_["latency"]["batch_1"]["input"] = "repeated training images";
    result_["latency"]["batch"]["input"] =
        EvaluationPassesInput(plan, earlier.size(), final_val_passes_, many.n);
    result_["latency"]["batch"]["from_evaluation"] = from_evaluation;
  }

  // The network as it would ship, in each of the deploy section's formats (deploy.h), on the trial's
  // device; calibrated on the first calibration_batches x batch_size training images.
  void MeasureOnboard() {
    const DeploySpec& spec = spec_.deploy;
    const int batch = task_spec_.batch_size;
    const int64_t calibration = std::min<int64_t>(data_.train.size(), int64_t{spec.calibration_batches} * batch);
    RuntimeSpec fp32 = rt_;
    fp32.precision = "fp32";  // a deployed network runs in its format, never under the training's autocast
    DeployHooks hooks;
    hooks.quality_metric = "val_" + task_->quality();
    hooks.input = [&](int b) { return InferenceInput(b).to(torch::kFloat); };
    hooks.calibrate = [&] {
      for (int64_t begin = 0; begin < calibration; begin += batch) {
        const torch::Tensor images = data_.train.images.slice(0, begin, std::min(calibration, begin + batch));
        net_->forward(Normalize(data_, images, dev_.device, format_).to(torch::kFloat));
      }
    };
    hooks.quality = [&](model::NetworkImpl& network) {
      return Evaluate(network, *task_, data_, data_.val, batch, dev_, fp32, format_).quality;
    };
    hooks.synchronize = [&] { Synchronize(dev_); };
    hooks.forward_flops_per_sample = flops_.forward / std::max<int64_t>(1, shard_.count);
    hooks.cpu = !dev_.is_cuda();
    hooks.calibration_samples = calibration;
    result_["deploy"] = MeasureDeploy(*net_, spec, hooks);
  }

  // `final`: the trained network's evaluation, whose forward passes are timed (final_forward_s_).
  EvalResult EvaluateOn(const Split& split, bool final = false) {
    return Evaluate(*net_, *task_, data_, split, task_spec_.batch_size, dev_, rt_, format_,
                    final ? &final_forward_s_ : nullptr);
  }

  void EmitProgress(double lr, double step_s, double wait_s) const {
    std::vector<double> measured(
        step_times_.begin() + std::min<size_t>(task_spec_.warmup_steps, step_times_.size()),
        step_times_.end());
    Emit({{"event", "progress"},
                   {"step", steps_run_},
                   {"loss", last_loss_},
                   {"lr", lr},
                   {"step_time_ms", step_s * 1e3},
                   {"median_step_time_ms", Summarize(measured).median * 1e3},
                   {"data_wait_ms", wait_s * 1e3}});
  }

  void EvaluateValidation() {
    last_eval_ = EvaluateOn(data_.val, /*final=*/steps_run_ == task_spec_.steps);
    evaluated_ = true;
    json e = {{"event", "eval"},
              {"step", steps_run_},
              {"val_loss", last_eval_.loss},
              {"val_" + task_->quality(), last_eval_.quality},
              {"train_time_s", train_time_}};
    Emit(e);
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

  std::vector<torch::Tensor> parameters_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<BatchSampler> sampler_;
  std::unique_ptr<StepProfiler> profiler_;
  bool checked_variants_ = false;             // the model calls a non-reference op variant
  std::unique_ptr<ops::SpotCheck> spot_check_;
  int rank_ = 0;
  dist::Shard shard_;
  std::unique_ptr<dist::ProcessGroup> group_;
  std::unique_ptr<dist::DataParallel> dp_;  // after group_: destroyed before it
  std::vector<double> own_step_times_;       // this rank's step times (step_times_: the slowest rank's)
  std::vector<dist::CommFigures> comms_;     // per measured step

  std::vector<double> step_times_, data_waits_;  // seconds, every step outside the profiled ones
  std::vector<double> profiled_times_;           // kept out of step_times_: the profiler slows them down
  int steps_run_ = 0;
  double train_time_ = 0;  // summed step time so far, profiled steps left out
  double last_loss_ = 0;
  std::string status_ = "completed";
  json evals_ = json::array();
  EvalResult last_eval_;
  bool evaluated_ = false;
  std::vector<double> final_forward_s_;  // the final evaluation's full-batch forward passes, seconds
  size_t final_val_passes_ = 0;          // how many of them were the validation split's (the first ones)
  std::optional<double> time_to_target_;
  std::optional<int> steps_to_target_;
  std::optional<double> loss_scale_;
  PhaseTimes phases_;
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
  const int threads = spec.runtime.threads > 0 ? spec.runtime.threads : DefaultCpuThreads();
  SetCpuThreads(threads);
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
    result["error"] = FirstLineOf(e);
    result["steps_run"] = run.steps_run();
  }
  result["wall_time_s"] = Seconds(wall_start, Clock::now());
  run.phases().Add("start", options.process_start_s);
  result["phases"] = run.phases().ToJson(options.process_start_s + result["wall_time_s"].get<double>());
  return result;
}

std::string FirstLineOf(const std::exception& e) {
  std::string what = e.what();
  if (auto* c10 = dynamic_cast<const c10::Error*>(&e)) what = c10->what_without_backtrace();
  const auto nl = what.find('\n');
  return nl == std::string::npos ? what : what.substr(0, nl);
}

}  // namespace frontier
