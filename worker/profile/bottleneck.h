// The bottleneck verdict of a trial: input-, compute-, memory- or
// overhead-bound, judged from its finished result, with what it rests on and
// how sure it is (docs/profiling.md gives the rules). Torch-free.
#pragma once

#include <nlohmann/json.hpp>

namespace frontier {

// The result's "bottleneck" object, judged from a finished result's
// measurements (data_wait_fraction, and the "profile" object for every class
// but input-bound; achieved_flops_per_s and peak_flops only describe). A pure
// function of the JSON.
nlohmann::json BottleneckVerdict(const nlohmann::json& result);

}  // namespace frontier
