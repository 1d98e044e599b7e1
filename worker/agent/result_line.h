// A trial's JSON lines (docs/trial-output.md) as the agent reads and amends
// them: a field read without throwing, whatever the line holds, and the
// result line with where the trial ran added to it. Lines that are not JSON
// objects pass through unchanged.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/agent/agent.h"

namespace frontier {

// object[key] when it is a string, else "" (a missing key, another type).
std::string StringField(const nlohmann::json& object, const char* key);
// object[key] when it is a thread count (an integer from 1 to 4096), else 0.
int ThreadsField(const nlohmann::json& object, const char* key);

// The result line with where the trial ran: {"placement": {"worker", "slot",
// "device", "cpus", "pinned", "shared_cores"}}. shared_cores: another slot or
// another trial on this host ran on one of these cores meanwhile (or may
// have: an unpinned slot of a worker with several slots). An empty line, or
// one that is not a JSON object, is returned as it is.
std::string WithPlacement(const std::string& result_json, const AgentOptions& options, int slot,
                          const std::vector<int>& cpus, bool claim_shared);

}  // namespace frontier
