// The latency phase of a completed trial (docs/trial-output.md, Latency):
// eval-mode forward latency at batch 1 and at spec.latency.batch_size (the
// training batch by default), in the trial's precision and memory format,
// each pass device-synchronized; the final evaluation's passes at the
// training batch count first (measure/latency.h, TimeRepeatedly's `earlier`).
#pragma once

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"
#include "worker/trial/evaluation.h"
#include "worker/trial/prepared_model.h"

namespace frontier {

// Writes latency_ms, latency_p99_ms, latency_b1_ms, latency_b1_p99_ms and the
// `latency` section into `result`; nothing with spec.latency.repetitions 0.
// The network is back in training mode afterwards.
void MeasureLatency(const TrialSpec& spec, PreparedModel& m, const FinalPasses& final, nlohmann::json* result);

}  // namespace frontier
