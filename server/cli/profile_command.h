// `frontier profile EXP --trial T` (docs/cli.md): re-runs one stored trial
// with profiling on, on a worker (ExperimentService.ProfileTrial: a linked
// profile run that never counts in the experiment's figures), waits for it
// and prints its profile summary and where its trace is.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "server/cli/client.h"

namespace frontier {

struct ProfileOptions {
  std::string trial;              // --trial T
  int steps = 3;                  // --steps N
  std::string tool = "libtorch";  // --tool
  int timeout_s = 600;            // --timeout S: how long to wait for a worker to run it (0: do not wait)
  std::string output = "table";   // table or json
};

// The profile run's summary: bottleneck verdict, shares by bound, top
// operators and where the trace is (table lines), from its result.
std::string ProfileSummary(const std::string& experiment_id, const std::string& run_id,
                           const nlohmann::json& result);

// Exit codes (cli.h): 0 when the run completed, 1 when it failed or is still
// queued or running after the timeout (it stays queued), 2 for steps or a
// tool the coordinator refuses, 3 for an unknown experiment or trial.
int Profile(Client& client, const std::string& experiment_id, const ProfileOptions& options);

}  // namespace frontier
