#include "worker/trial/inference_latency.h"

#include "worker/trial/measure/latency.h"

namespace frontier {

void MeasureLatency(const TrialSpec& spec, PreparedModel& m, const FinalPasses& final, nlohmann::json* result) {
  const LatencySpec& latency = spec.latency;
  if (latency.repetitions <= 0) return;
  const RuntimeSpec& rt = spec.runtime;
  const int batch = latency.batch_size > 0 ? latency.batch_size : spec.task.batch_size;
  LatencyPlan plan;
  plan.warmup = latency.warmup;
  plan.repetitions = latency.repetitions;
  const auto measure = [&](int b, const std::vector<double>& earlier) {
    const torch::Tensor x = m.InferenceInput(b);
    return TimeRepeatedly(
        [&] {
          {
            AutocastScope autocast(rt.precision, m.dev);
            m.net->forward(x);
          }
          Synchronize(m.dev);
        },
        plan, earlier);
  };
  // The final evaluation ran the same eval-mode forward at the training batch on the validation and
  // test images: its passes come first (the first plan.warmup of them are the warm-up), and passes of
  // the latency's own run only for the repetitions they leave.
  const bool at_training_batch = batch == spec.task.batch_size && batch > 1;
  const std::vector<double> earlier = at_training_batch ? final.forward_s : std::vector<double>{};
  const size_t from_evaluation = TimedFromEarlier(plan, earlier.size());
  m.net->eval();
  SeriesStats one, many;
  {
    torch::NoGradGuard no_grad;  // not InferenceMode: its tensors must not reach the profiled steps
    one = measure(1, {});
    many = batch == 1 ? one : measure(batch, earlier);
  }
  m.net->train();
  nlohmann::json& r = *result;
  r["latency_ms"] = many.median * 1e3;
  r["latency_p99_ms"] = many.p99 * 1e3;
  r["latency_b1_ms"] = one.median * 1e3;
  r["latency_b1_p99_ms"] = one.p99 * 1e3;
  r["latency"] = {{"mode", "eval, no autograd, forward only"},
                  {"precision", rt.precision},
                  {"memory_format", rt.memory_format},
                  {"device", m.dev.device.str()},
                  {"synchronized", m.dev.is_cuda() ? "cuda: after every pass" : "cpu: synchronous"},
                  {"batch_1", LatencyJson(1, one, plan.warmup)},
                  {"batch", LatencyJson(batch, many, plan.warmup)}};
  r["latency"]["batch_1"]["input"] = "repeated training images";
  r["latency"]["batch"]["input"] = EvaluationPassesInput(plan, earlier.size(), final.val_passes, many.n);
  r["latency"]["batch"]["from_evaluation"] = from_evaluation;
}

}  // namespace frontier
