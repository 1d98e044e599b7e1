// Running a trial under nsys or ncu (docs/profiling.md): Nsight wraps the
// process, so the worker does it. A spec whose profile.tool is nsys or ncu
// runs wrapped in that tool when this is a cuda worker with the tool on its
// PATH; otherwise the trial runs unprofiled and the result's "profile" says
// why. The agent's part of "profile" (tool, host, worker, and the report,
// its folder and the tool's command line, or the error) is merged into the
// result line the trial printed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/agent/agent.h"

namespace frontier {

// How a trial whose spec asks for profile.tool nsys or ncu is run.
struct ProfileWrapping {
  std::vector<std::string> wrapper;  // the tool's command line before the trial's; empty: run unwrapped
  std::string report;                // the report file the tool is to write
  nlohmann::json profile;            // merged into the result's "profile"; null: nothing to add
};

// The wrapping for `spec`'s profile section; an empty one (null profile)
// when the spec asks for no tool, and no wrapper with the reason in
// profile["error"] when it cannot wrap. When it wraps, it has created the
// trial's artifact folder (TrialArtifactDir), where the report goes.
ProfileWrapping WrapForProfileTool(const AgentOptions& options, const nlohmann::json& spec,
                                   const std::string& trial_id);

// The result line with the agent's part of "profile" merged in, and an error
// when the tool wrote no report; an empty line, or one that is not a JSON
// object, is returned as it is.
std::string WithProfile(const std::string& result_json, const ProfileWrapping& wrapping);

}  // namespace frontier
