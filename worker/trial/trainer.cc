#include "worker/trial/trainer.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include <torch/torch.h>
#include <torch/version.h>

#include "worker/host.h"
#include "worker/profile/bottleneck.h"
#include "worker/trial/deploy.h"
#include "worker/trial/distributed/trial_ranks.h"
#include "worker/trial/evaluation.h"
#include "worker/trial/inference_latency.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/flop_counter.h"
#include "worker/trial/measure/phases.h"
#include "worker/trial/model/model.h"
#include "worker/trial/op_variants.h"
#include "worker/trial/ops/spot_check.h"
#include "worker/trial/plugin.h"
#include "worker/trial/prepared_model.h"
#include "worker/trial/training.h"
#include "os/monotonic.h"

namespace frontier {
namespace {

using json = nlohmann::json;
namespace dist = frontier::distributed;

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

// One trial from its spec to its result, phase by phase: the model prepared
// (prepared_model.h) and counted, its op variants gated (op_variants.h),
// trained (training.h) with its evaluations (evaluation.h), then the trained
// network's final evaluation, latency (inference_latency.h), deployment
// (deploy.h) and profile; each phase's time into the result's phases.
class TrialRun {
 public:
  TrialRun(const TrialSpec& spec, const TrialOptions& options, json* result)
      : spec_(spec), options_(options), result_(*result) {}

  void Run(int threads) {
    Prepare(threads);
    training_ = std::make_unique<Training>(spec_, options_, m_, ranks_, phases_, result_);
    training_->Run(*evaluations_, checked_variants_);
    Finish();
  }

  int steps_run() const { return training_ ? training_->steps_run() : 0; }
  PhaseTimes& phases() { return phases_; }

 private:
  // The device, the ranks, the model; its FLOPs and its op variants' gate; the device's peak.
  void Prepare(int threads) {
    const RuntimeSpec& rt = spec_.runtime;
    const DeviceInfo dev = PrepareDevice(spec_);
    result_["device"] = dev.device.str();
    result_["device_name"] = dev.name;
    if (dev.is_cuda()) result_["tf32"] = Tf32Settings();  // off (SelectDevice): fp32 is IEEE fp32, as its peak
    CheckPrecision(rt.precision, dev);
    ranks_ = dist::ConnectRanks(rt.ranks, spec_.task.batch_size, rt.batch_policy,
                                dev.is_cuda());
    if (ranks_.group) result_["rank"] = ranks_.rank;
    m_ = PrepareModel(spec_, dev, &phases_);
    evaluations_ = std::make_unique<Evaluations>(spec_, m_);
    auto since = Monotonic::now();
    result_["dataset_bytes"] = m_.data.bytes();
    m_.task->Describe(m_.data, &result_);
    const int64_t params = model::CountParameters(*m_.net);
    const torch::Tensor batch = m_.TrainImages(0, ranks_.shard.count);
    since = phases_.AddSince("model", since);
    std::string recorded_op;  // the first op the model calls, if any
    {
      ops::CallRecorder recorder;  // the op calls of one forward pass, at the model's shapes
      flops_ = CountModelFlops(m_.net, batch);
      checked_variants_ = UsesNonReferenceVariants(recorder.calls());
      if (!recorder.calls().empty()) recorded_op = recorder.calls().front().op;
    }
    since = phases_.AddSince("flops", since);
    if (checked_variants_) {
      GateOpVariants(spec_, m_, batch, &result_);
      phases_.AddSince("gate", since);
    } else if (!recorded_op.empty()) {
      result_["op"] = ReferenceOpResult(recorded_op);
    }
    peak_ = DevicePeakFlops(rt.precision, m_.dev,
                            options_.peak_flops_json.empty() ? std::nullopt
                                                             : std::optional(ParseGivenPeaks(options_.peak_flops_json)));
    result_["params"] = params;
    result_["flops"] = {{"forward_per_step", flops_.forward},
                        {"train_per_step", flops_.train_step},
                        {"train_per_sample", flops_.train_step / ranks_.shard.count},
                        {"forward_by_op", flops_.forward_by_op},
                        {"convention", m_.task->flop_convention()}};
    if (json moe = model::MoeRoutingSummary(*m_.net); !moe.empty()) result_["flops"]["moe"] = moe;  // of that forward
    result_["peak_flops"] = peak_.ToJson();
    if (ranks_.rank == 0) {  // rank 0 speaks for the trial
      options_.emit({{"event", "start"}, {"trial_id", spec_.trial_id}, {"device", m_.dev.device.str()},
                     {"device_name", m_.dev.name}, {"threads", threads}, {"params", params},
                     {"train_flops_per_step", flops_.train_step}, {"peak_flops_per_s", peak_.flops_per_s},
                     {"peak_flops_source", peak_.source}, {"ranks", rt.ranks}});
    }
  }

  // The trained network's phases (a completed trial's), then the figures that need them all.
  void Finish() {
    const SeriesStats steps = training_->StatisticsInto(flops_.train_step, peak_.flops_per_s);
    evaluations_->CurveInto(&result_);
    const bool completed = training_->completed();
    auto since = Monotonic::now();
    if (completed) evaluations_->Final(&result_);
    since = phases_.AddSince("eval", since);
    if (completed) MeasureLatency(spec_, m_, evaluations_->final_passes(), &result_);
    since = phases_.AddSince("latency", since);
    // Before the profiled steps, which train on: the deployed network is the evaluated one.
    if (completed && spec_.deploy.enabled && ranks_.rank == 0) {
      result_["deploy"] = MeasureOnboard(spec_, m_, flops_.forward / std::max<int64_t>(1, ranks_.shard.count));
    }
    since = phases_.AddSince("deploy", since);
    training_->Profile();
    phases_.AddSince("profile", since);
    training_->RanksInto(steps);
    result_["bottleneck"] = BottleneckVerdict(result_);
  }

  const TrialSpec& spec_;
  const TrialOptions& options_;
  json& result_;

  PhaseTimes phases_;
  dist::TrialRanks ranks_;
  PreparedModel m_;
  ModelFlops flops_;
  PeakFlops peak_;
  bool checked_variants_ = false;  // the model calls a non-reference op variant
  std::unique_ptr<Evaluations> evaluations_;
  std::unique_ptr<Training> training_;  // last: its data parallelism holds ranks_'s group and m_'s parameters
};

}  // namespace

int ExitCodeFor(const json& result) {
  const std::string status = result.value("status", "failed");
  if (status == "completed") return kExitCompleted;
  if (status == "diverged") return kExitDiverged;
  return kExitFailed;
}

json RunTrial(const TrialSpec& spec, const TrialOptions& options) {
  const auto wall_start = Monotonic::now();
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
    run.Run(threads);
  } catch (const std::exception& e) {
    result["status"] = "failed";
    result["error_kind"] = ErrorKind(e);
    result["error"] = FirstLineOf(e);
    result["steps_run"] = run.steps_run();
  }
  result["wall_time_s"] = SecondsSince(wall_start);
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
