// The worker's reading of the trial protocol (docs/trial-protocol.md) apart
// from running the process: a command trial's `command` section, and the
// schema check every result line passes (frontier-trial's and a command
// trial's alike) before the agent reports it. The coordinator validated the
// spec, but the worker does not trust what it leases: a malformed section or
// result is a problem in words, never an exception.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "worker/agent/trial_process.h"

namespace frontier {

// A command trial's `command` section into `command` (program: argv; workdir,
// which must be a folder on this worker) and *limit (time_limit_s when it is
// a positive number; else left as it is); the problem when it is malformed,
// e.g. "command.argv: expected a non-empty list".
std::optional<std::string> ReadCommandSection(const nlohmann::json& section, TrialCommand* command,
                                              std::chrono::milliseconds* limit);

// What breaks the result line's schema, or nullopt: schema 1, a status, a
// completed result's step_time_ms.median > 0, a failed or diverged result's
// error. Statuses other than the three are left to the caller (unknown status).
std::optional<std::string> ResultSchemaProblem(const nlohmann::json& result);

}  // namespace frontier
