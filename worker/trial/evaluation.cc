#include "worker/trial/evaluation.h"
#include "os/monotonic.h"

#include <algorithm>
#include <chrono>
#include <memory>

namespace frontier {
namespace {

using json = nlohmann::json;

bool ReachedTarget(const TargetSpec& target, const EvalResult& e) {
  return target.metric == "val_loss" ? e.loss <= target.value : e.quality >= target.value;
}

}  // namespace

EvalResult Evaluate(model::NetworkImpl& network, const PreparedModel& m, const Split& split, int batch_size,
                    const RuntimeSpec& runtime, std::vector<double>* forward_s) {
  torch::NoGradGuard no_grad;
  network.eval();
  double loss_sum = 0;
  const std::unique_ptr<QualityMeter> quality = m.task->NewQualityMeter();
  // Training-sized batches: LibTorch on CPU is much slower per sample at very large batches.
  for (int64_t begin = 0; begin < split.size(); begin += batch_size) {
    const int64_t end = std::min<int64_t>(split.size(), begin + batch_size);
    torch::Tensor x = Normalize(m.data, split.images.slice(0, begin, end), m.dev.device, m.format);
    torch::Tensor y = split.labels.slice(0, begin, end).to(m.dev.device);
    torch::Tensor logits;
    const bool timed = forward_s != nullptr && end - begin == batch_size;
    const auto start = Monotonic::now();
    {
      AutocastScope autocast(runtime.precision, m.dev);
      logits = network.forward(x);
    }
    if (timed) {
      Synchronize(m.dev);
      forward_s->push_back(SecondsSince(start));
    }
    logits = logits.to(torch::kFloat);
    loss_sum += m.task->Loss(logits, y).item<double>() * (end - begin);
    quality->Add(logits, y);
  }
  network.train();
  return {loss_sum / split.size(), quality->Value(split.size())};
}

EvalResult Evaluations::On(const Split& split, bool final) {
  return Evaluate(*m_.net, m_, split, spec_.task.batch_size, spec_.runtime, final ? &final_.forward_s : nullptr);
}

json Evaluations::AtStep(int steps_run, double train_time_s) {
  const bool final = steps_run == spec_.task.steps;
  last_ = On(m_.data.val, final);
  evaluated_final_ = evaluated_final_ || final;
  json e = {{"event", "eval"},
            {"step", steps_run},
            {"val_loss", last_.loss},
            {"val_" + m_.task->quality(), last_.quality},
            {"train_time_s", train_time_s}};
  json point = e;
  point.erase("event");
  curve_.push_back(point);
  const std::optional<TargetSpec>& target = spec_.task.target;
  if (target && !time_to_target_ && ReachedTarget(*target, last_)) {
    time_to_target_ = train_time_s;
    steps_to_target_ = steps_run;
  }
  return e;
}

void Evaluations::Final(json* result) {
  if (!evaluated_final_) last_ = On(m_.data.val, /*final=*/true);
  final_.val_passes = final_.forward_s.size();
  const EvalResult test = On(m_.data.test, /*final=*/true);
  const std::string quality = m_.task->quality();
  (*result)["val_loss"] = last_.loss;
  (*result)["val_" + quality] = last_.quality;
  (*result)["test_loss"] = test.loss;
  (*result)["test_" + quality] = test.quality;
}

void Evaluations::CurveInto(json* result) const {
  (*result)["evals"] = curve_;
  if (const std::optional<TargetSpec>& target = spec_.task.target) {
    (*result)["target"] = {{"metric", target->metric}, {"value", target->value}};
    (*result)["time_to_target_s"] = time_to_target_ ? json(*time_to_target_) : json(nullptr);
    (*result)["steps_to_target"] = steps_to_target_ ? json(*steps_to_target_) : json(nullptr);
  }
}

}  // namespace frontier
