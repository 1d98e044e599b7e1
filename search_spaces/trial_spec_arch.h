// The `arch` section of a trial spec as trial_spec_arch.cc reads it; internal
// to search_spaces/ (ParseTrialSpec in trial_spec.cc calls it). Resolving the
// arch against an input (ResolveArch, InputShapeOf) is public: trial_spec.h.
#pragma once

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"

namespace frontier::spec_reading {

// Reads `arch` (stem, stages with their blocks, attention and moe, norm,
// activation, multipliers, dropout, bev, ops) into `a`, whose fields keep
// their defaults where the JSON leaves them out. Throws SpecError naming the
// field (`arch.stages[1].kernel`) for an unknown field, a wrong type, a value
// out of range, or a combination one section alone rules out (gqa heads,
// moe top_k, bev depth range and pooling). Registry names beyond the
// built-ins pass only while ObjectReader::PluginNamesAllowed() is set.
// Checks that need the input's shape are ResolveArch's.
void ParseArch(const nlohmann::json& j, ArchSpec& a);

}  // namespace frontier::spec_reading
