#include "worker/trial/op_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "worker/trial/data/dataset.h"
#include "worker/trial/measure/cpu_allocator.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/step_stats.h"
#include "worker/trial/ops/correctness.h"
#include "worker/trial/ops/op.h"
#include "worker/trial/prepared_model.h"
#include "os/monotonic.h"

namespace frontier {
namespace {

using json = nlohmann::json;

// One timed call: forward, or forward + backward with `upstream`, between
// synchronized points. Returns milliseconds.
double TimeCall(const ops::OpCall& call, const std::string& variant, const std::vector<torch::Tensor>& inputs,
                const torch::Tensor& upstream, bool backward, const DeviceInfo& dev) {
  std::vector<torch::Tensor> leaves;
  for (const torch::Tensor& t : inputs) leaves.push_back(t.detach().requires_grad_(backward && t.is_floating_point()));
  torch::Tensor out;
  Synchronize(dev);
  const auto start = Monotonic::now();
  if (backward) {
    out = call.run(variant, leaves);
    out.backward(upstream.to(out.options()));
  } else {
    torch::NoGradGuard no_grad;
    out = call.run(variant, leaves);
  }
  Synchronize(dev);
  return MillisecondsSince(start);  // `out` lives until the clock has stopped
}

// Every variant of the call's op, checked by the gate (correct ones timed).
json BenchCall(const ops::OpCall& call, const DeviceInfo& dev, double copy_bytes_per_s,
               const OpBenchOptions& options, uint64_t seed) {
  const ops::Op& op = ops::OpRegistry().At(call.op);
  std::vector<std::string> correct;
  std::map<std::string, json> checks;
  for (const std::string& variant : op.variants()) {
    if (variant == op.reference) continue;
    ops::OpCall as = call;
    as.variant = variant;
    const ops::VariantCheck check = ops::CheckVariant(as, 3, seed);
    checks[variant] = check.ToJson();
    if (check.passed) correct.push_back(variant);
  }
  json timed = TimeVariants(call, correct, dev, copy_bytes_per_s, options, seed);
  json variants = json::array();
  for (const std::string& variant : op.variants()) {
    json v = {{"variant", variant}, {"correct", variant == op.reference || checks[variant]["passed"].get<bool>()}};
    if (variant != op.reference) v["correctness"] = checks[variant];
    for (const json& t : timed["variants"]) {
      if (t["variant"] == variant) v.update(t);
    }
    variants.push_back(v);
  }
  timed["variants"] = variants;
  return timed;
}

}  // namespace

json MsSummary(const SeriesStats& s) {
  return {{"median", s.median}, {"p10", s.p10}, {"p90", s.p90}, {"n", s.n}};
}

json MedianInterval(std::vector<double> ratios) {
  std::sort(ratios.begin(), ratios.end());
  const int n = static_cast<int>(ratios.size());
  const double half = 1.96 * std::sqrt(static_cast<double>(n)) / 2;
  const int lo = std::max(0, static_cast<int>(std::floor(n / 2.0 - half)));
  const int hi = std::min(n - 1, static_cast<int>(std::ceil(n / 2.0 + half)) - 1);
  // P(x_(lo+1) <= median <= x_(hi+1)) (1-based order statistics) = P(lo < B <= hi), B ~ Binomial(n, 1/2).
  const double log_all = std::lgamma(n + 1.0) - n * std::log(2.0);  // log(n! / 2^n)
  double coverage = 0;
  for (int k = lo + 1; k <= hi; ++k) coverage += std::exp(log_all - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0));
  return {{"median", Summarize(ratios).median}, {"low", ratios[lo]}, {"high", ratios[hi]}, {"rounds", n},
          {"coverage", coverage}};
}

double PeakMb(const ops::OpCall& call, const std::string& variant, const std::vector<torch::Tensor>& inputs,
              const torch::Tensor& upstream) {
  std::vector<torch::Tensor> leaves;
  for (const torch::Tensor& t : inputs) leaves.push_back(t.detach().requires_grad_(t.is_floating_point()));
  const torch::Tensor grad = upstream.to(inputs.at(0).scalar_type());
  const int64_t start = ResetCpuAllocatedPeak();
  {
    const torch::Tensor out = call.run(variant, leaves);
    out.backward(grad);
  }
  return static_cast<double>(CountedCpuBytes().peak - start) / (1 << 20);
}

std::vector<ops::OpCall> RecordOpCalls(torch::nn::Module& net, const std::function<void()>& forward,
                                       Precision precision, const DeviceInfo& dev) {
  ops::CallRecorder recorder;
  torch::NoGradGuard no_grad;
  const bool was_training = net.is_training();
  net.eval();
  {
    AutocastScope autocast(precision, dev);
    forward();
  }
  net.train(was_training);
  return recorder.calls();
}

TimingDraws DrawTimingInputs(const ops::OpCall& call, int rounds, uint64_t seed) {
  const ops::Op& op = ops::OpRegistry().At(call.op);
  at::Generator generator = at::detail::createCPUGenerator(seed);
  TimingDraws draws;
  draws.fixed = ops::RandomInputs(op, call, generator);
  for (int r = 0; r < rounds; ++r) draws.rounds.push_back(ops::RandomInputs(op, call, generator));
  draws.upstream_seed = seed * 1000003 + 999983;
  return draws;
}

json TimeVariants(const ops::OpCall& call, const std::vector<std::string>& variants, const DeviceInfo& dev,
                  double copy_bytes_per_s, const OpBenchOptions& options, uint64_t seed) {
  const ops::Op& op = ops::OpRegistry().At(call.op);
  const TimingDraws draws = DrawTimingInputs(call, options.rounds, seed);
  // Forward+backward on inputs of their own each round, not the forward's: a variant that keeps results by
  // their inputs' content gains nothing from the forward timed just before.
  const TimingDraws backward_draws = DrawTimingInputs(call, options.rounds, seed * 1000003 + 17);
  const std::vector<torch::Tensor>& inputs = draws.fixed;
  torch::Tensor upstream;
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor out = call.run(op.reference, inputs);
    upstream = ops::UpstreamGradient(out.sizes(), draws.upstream_seed).to(torch::kFloat).to(out.device());
  }
  std::vector<std::string> timed{op.reference};
  for (const std::string& v : variants) {
    if (v != op.reference) timed.push_back(v);
  }
  std::map<std::string, std::vector<double>> fwd, total;
  for (int round = -options.warmup; round < options.rounds; ++round) {
    // Fresh inputs each round (drawn untimed): a variant that keeps results
    // across calls gains nothing.
    const std::vector<torch::Tensor>& drawn = round < 0 ? inputs : draws.rounds[static_cast<size_t>(round)];
    const std::vector<torch::Tensor>& drawn_backward =
        round < 0 ? inputs : backward_draws.rounds[static_cast<size_t>(round)];
    for (size_t k = 0; k < timed.size(); ++k) {  // rotating order: no variant always runs first
      const std::string& v = timed[(k + static_cast<size_t>(std::max(round, 0))) % timed.size()];
      const double f = TimeCall(call, v, drawn, upstream, false, dev);
      const double t = TimeCall(call, v, drawn_backward, upstream, true, dev);
      if (round < 0) continue;
      fwd[v].push_back(f);
      total[v].push_back(t);
    }
  }
  json out = json::array();
  for (const std::string& variant : timed) {
    const SeriesStats f = Summarize(fwd[variant]), t = Summarize(total[variant]);
    json v = {{"variant", variant}, {"forward_ms", MsSummary(f)}, {"forward_backward_ms", MsSummary(t)}};
    std::vector<double> ratios, forward_ratios;
    for (size_t r = 0; r < total[variant].size(); ++r) {
      ratios.push_back(total[op.reference][r] / total[variant][r]);
      forward_ratios.push_back(fwd[op.reference][r] / fwd[variant][r]);
    }
    v["speedup_forward"] = MedianInterval(forward_ratios);
    v["speedup"] = MedianInterval(ratios);
    if (!dev.is_cuda() && InstallCountingCpuAllocator())
      v["peak_mb"] = PeakMb(call, variant, inputs, upstream);
    if (call.bytes_moved) {
      const double bytes = call.bytes_moved(true);
      v["bytes_moved_mb"] = bytes / (1 << 20);
      v["achieved_gb_s"] = bytes / (t.median / 1e3) / 1e9;
      v["bandwidth_share"] = bytes / (t.median / 1e3) / copy_bytes_per_s;
    }
    out.push_back(v);
  }
  return {{"op", call.op}, {"shapes", call.Shapes()}, {"reference", op.reference}, {"variants", out}};
}

SpecOpCalls RecordSpecOpCalls(const TrialSpec& spec) {
  SpecOpCalls recorded;
  recorded.threads = spec.runtime.threads > 0 ? spec.runtime.threads : DefaultCpuThreads();
  SetCpuThreads(recorded.threads);
  recorded.dev = PrepareDevice(spec);
  CheckPrecision(spec.runtime.precision, recorded.dev);
  if (spec.command.enabled) {
    // A command trial's model is its own program: the calls are the ones its recorded operators named.
    const torch::Dtype dtype = DtypeOf(spec.runtime.precision);
    for (const LabOpCall& c : spec.op_calls) {
      const ops::Op& op = ops::OpRegistry().At(c.op);
      if (!op.call_at) {
        throw std::runtime_error("op_calls: " + c.op + "'s calls need a frontier-trial model (its context is more "
                                 "than its input shapes)");
      }
      std::vector<torch::Tensor> inputs;
      for (const auto& shape : c.shapes) {
        inputs.push_back(torch::zeros(shape, torch::TensorOptions().dtype(dtype).device(recorded.dev.device)));
      }
      recorded.calls.push_back(op.call_at(inputs));
    }
    return recorded;
  }
  const PreparedModel m = PrepareModel(spec, recorded.dev);
  const torch::Tensor batch = m.TrainImages(0, spec.task.batch_size);
  recorded.calls = RecordOpCalls(*m.net, [&] { m.net->forward(batch); }, spec.runtime.precision, recorded.dev);
  return recorded;
}

json RunOpBench(const TrialSpec& spec, const OpBenchOptions& options) {
  const SpecOpCalls recorded = RecordSpecOpCalls(spec);
  const DeviceInfo& dev = recorded.dev;
  const std::vector<ops::OpCall>& calls = recorded.calls;
  const double copy = MeasureCopyBandwidth(dev);
  json ops_json = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    ops_json.push_back(BenchCall(calls[i], dev, copy, options, static_cast<uint64_t>(spec.seed) + i));
  }
  return {{"event", "op_bench"},
          {"device", dev.device.str()},
          {"device_name", dev.name},
          {"threads", recorded.threads},
          {"precision", spec.runtime.precision},
          {"rounds", options.rounds},
          {"copy_bandwidth_gb_s", copy / 1e9},
          {"ops", ops_json}};
}

}  // namespace frontier
