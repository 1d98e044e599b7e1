// The bottleneck verdict of a trial: input-, compute- or memory-bound, judged
// from its finished result (docs/profiling.md gives the rules). Torch-free.
#pragma once

#include <nlohmann/json.hpp>

namespace frontier {

// The result's "bottleneck" object, judged from a finished result's
// measurements (data_wait_fraction, achieved_flops_per_s, peak_flops, and the
// "profile" object if any). A pure function of the JSON.
nlohmann::json BottleneckVerdict(const nlohmann::json& result);

}  // namespace frontier
