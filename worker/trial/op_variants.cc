#include "worker/trial/op_variants.h"

#include <algorithm>

#include "worker/trial/op_bench.h"

namespace frontier {
namespace {

using json = nlohmann::json;

// Random input sets the correctness gate draws per op call (besides the op's edge cases).
constexpr int kGateDraws = 3;
// Timed rounds of the trial's op variant against its reference (result field `op`): the fewest whose
// median interval covers at least 95% (MedianInterval: 0.984 at 7; 0.9375 at 5).
constexpr int kOpTimingRounds = 7;

[[noreturn]] void FailIncorrect(const ops::VariantCheck& failed, json* result) {
  (*result)["incorrect"] = failed.ToJson();
  throw IncorrectVariant(failed.op + " variant '" + failed.variant + "' " + failed.problem + " (" + failed.where +
                         "; reference '" + failed.reference + "', " + failed.shapes + ")");
}

// The first non-reference op call's variant against its reference at the
// model's shapes (the op benchmark's timing, a few rounds). Outside step and
// train time, like the gate.
void TimeOpVariant(const std::vector<ops::OpCall>& calls, const PreparedModel& m, uint64_t seed, json* result) {
  for (const ops::OpCall& call : calls) {
    if (call.variant == ops::OpRegistry().At(call.op).reference) continue;
    OpBenchOptions options;
    options.rounds = kOpTimingRounds;
    options.warmup = 1;
    const json timed = TimeVariants(call, {call.variant}, m.dev, MeasureCopyBandwidth(m.dev), options, seed);
    json op = {{"op", call.op}, {"variant", call.variant}, {"reference", timed["reference"]},
               {"shapes", timed["shapes"]}, {"rounds", kOpTimingRounds}};
    for (const json& v : timed["variants"]) {
      const std::string prefix = v["variant"] == call.variant ? "" : "reference_";
      op[prefix + "forward_backward_ms"] = v["forward_backward_ms"]["median"];
      op[prefix + "forward_ms"] = v["forward_ms"]["median"];
      if (prefix.empty()) {
        op["speedup"] = v["speedup"]["median"];
        op["speedup_interval"] = {v["speedup"]["low"], v["speedup"]["high"]};
        op["speedup_coverage"] = v["speedup"]["coverage"];
        if (v.contains("bandwidth_share")) op["bandwidth_share"] = v["bandwidth_share"];
      }
    }
    (*result)["op"] = op;
    return;
  }
}

}  // namespace

bool UsesNonReferenceVariants(const std::vector<ops::OpCall>& calls) {
  return std::any_of(calls.begin(), calls.end(), [](const ops::OpCall& call) {
    return call.variant != ops::OpRegistry().At(call.op).reference;
  });
}

void GateOpVariants(const TrialSpec& spec, PreparedModel& m, const torch::Tensor& batch, json* result) {
  const std::vector<ops::OpCall> calls =
      RecordOpCalls(*m.net, [&] { m.net->forward(batch); }, spec.runtime.precision, m.dev);
  const ops::GateResult gate = ops::RunGate(calls, kGateDraws, static_cast<uint64_t>(spec.seed));
  (*result)["correctness"] = gate.ToJson();
  if (const ops::VariantCheck* failed = gate.failure()) FailIncorrect(*failed, result);
  TimeOpVariant(calls, m, static_cast<uint64_t>(spec.seed), result);
}

json ReferenceOpResult(const std::string& op) {
  const std::string& reference = ops::OpRegistry().At(op).reference;
  return {{"op", op}, {"variant", reference}, {"reference", reference}, {"speedup", 1.0}};
}

void RecordSpotChecks(ops::SpotCheck& spot_check, int step, json* result) {
  for (const ops::VariantCheck& check : spot_check.Check()) {
    json entry = check.ToJson();
    entry["step"] = step;
    entry.erase("deterministic");  // a repeated call's finding: there is none here
    (*result)["spot_checks"].push_back(entry);
    if (!check.passed) FailIncorrect(check, result);
  }
}

}  // namespace frontier
