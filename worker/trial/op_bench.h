// frontier-trial --op-bench (docs/plugins.md#the-op-benchmark): times every
// registered variant of each op a spec's model calls, at the shapes the model
// gives it, forward and forward+backward.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/step_stats.h"
#include "worker/trial/ops/correctness.h"
#include "worker/trial/ops/op.h"

namespace frontier {

struct OpBenchOptions {
  int rounds = 15;  // timed rounds; each runs every variant once, in rotating order
  int warmup = 2;   // untimed rounds before them
};

// The inputs TimeVariants draws from `seed`: `fixed` (the warm-up rounds
// and the peak-memory call) and one set per timed round, and the seed of the
// output gradient (ops::UpstreamGradient of the output's shape) every
// forward+backward uses.
struct TimingDraws {
  std::vector<torch::Tensor> fixed;
  std::vector<std::vector<torch::Tensor>> rounds;
  uint64_t upstream_seed = 0;
};
TimingDraws DrawTimingInputs(const ops::OpCall& call, int rounds, uint64_t seed);

// The median of per-round `ratios` with a distribution-free interval: the
// order statistics at n/2 -+ 1.96 sqrt(n)/2 (the binomial interval of the
// median), and its achieved coverage, the probability that it holds the true
// median (it is discrete: 0.75 at 3 rounds, 0.9375 at 5, 0.984 at 7, 0.965
// at 15). {"median", "low", "high", "rounds", "coverage"}.
nlohmann::json MedianInterval(std::vector<double> ratios);
// Milliseconds' summary: {"median", "p10", "p90", "n"}.
nlohmann::json MsSummary(const SeriesStats& s);

// MiB allocated at the peak of one forward+backward call of `variant` beyond
// its inputs and upstream gradient (CPU only: the counting CPU allocator's
// bytes, InstallCountingCpuAllocator).
double PeakMb(const ops::OpCall& call, const std::string& variant, const std::vector<torch::Tensor>& inputs,
              const torch::Tensor& upstream);

// Builds the spec's model (loading its plugins), records one forward pass in
// the spec's precision, then per recorded op call: checks every variant
// (the correctness gate; an incorrect variant is reported, never timed),
// times the correct ones between synchronized points on fresh random inputs
// each round, and compares each with the reference round by round.
// Returns {"event": "op_bench", device, threads, copy_bandwidth_gb_s,
// ops: [{op, shapes, reference, variants: [{variant, correct, forward_ms,
// forward_backward_ms (median, p10, p90), speedup (median and 95% interval
// of the per-round ratios reference / variant, forward+backward),
// bytes_moved_mb, achieved_gb_s, bandwidth_share, peak_mb (CPU only: the
// most bytes one untimed forward+backward holds through the CPU allocator
// beyond its inputs, gradients of the inputs included)}]}]}. Throws on a spec
// whose model cannot be built.
nlohmann::json RunOpBench(const TrialSpec& spec, const OpBenchOptions& options);

// The op calls the spec's model makes in one forward pass (RecordOpCalls on
// a batch of its data, its plugins loaded, its threads set), with the device
// and thread count it ran with; for a command trial's spec, the calls its
// op_calls name, built from their shapes (ops::Op::call_at) in
// runtime.precision. Throws on a spec whose model cannot be built, or an
// op call its op cannot make from shapes alone.
struct SpecOpCalls {
  DeviceInfo dev;
  int threads = 0;
  std::vector<ops::OpCall> calls;
};
SpecOpCalls RecordSpecOpCalls(const TrialSpec& spec);

// The op calls of one forward pass of `net` on `batch` in `precision`
// (autocast), without gradients, in eval mode (the training flag is
// restored): what the correctness gate and the benchmark replay.
std::vector<ops::OpCall> RecordOpCalls(torch::nn::Module& net, const std::function<void()>& forward,
                                       Precision precision, const DeviceInfo& dev);

// Times the reference and `variants` of the call's op (no correctness check:
// the caller has run the gate), each round on a fresh set of random inputs
// that every variant of the round shares: {op,
// shapes, reference, variants: [{variant, forward_ms, forward_backward_ms,
// speedup_forward, speedup, bytes_moved_mb, achieved_gb_s, bandwidth_share,
// peak_mb}]}.
// The trial runner calls it for the variant it trains (result field `op`).
nlohmann::json TimeVariants(const ops::OpCall& call, const std::vector<std::string>& variants, const DeviceInfo& dev,
                            double copy_bytes_per_s, const OpBenchOptions& options, uint64_t seed);

}  // namespace frontier
