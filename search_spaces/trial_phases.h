// The phases a trial's wall time is split into (docs/trial-output.md,
// Phases): one list for the trial that measures them
// (worker/trial/measure/phases.h) and the report that sums them
// (server/report, goodput). A result's `phases` holds NAME_s for each, then
// other_s (the time no phase claimed) and wall_s.
#pragma once

#include <array>
#include <string_view>

namespace frontier {

// In the order a trial goes through them. start: from the process's start to
// the trial's first line of work (exec, loading LibTorch and the other
// libraries, reading the spec); data: reading or generating the dataset;
// model: plugins, building the network, moving it to the device; flops: the
// FLOP-count pass; gate: the correctness gate, the op timing of a
// non-reference variant and the spot-checked training steps; warmup: the training steps before the measured ones;
// train: the measured training steps (those step time, throughput and MFU
// come from), their data waits included; eval: validation and test
// evaluation; latency: inference latency; deploy: the onboard formats
// (calibration, their evaluation and latency); profile: the profiled steps
// and writing their traces.
inline constexpr std::array<std::string_view, 11> kTrialPhases = {
    "start", "data", "model", "flops", "gate", "warmup", "train", "eval", "latency", "deploy", "profile"};

}  // namespace frontier
