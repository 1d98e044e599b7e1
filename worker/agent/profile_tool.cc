#include "worker/agent/profile_tool.h"

#include <filesystem>
#include <system_error>

#include "worker/agent/result_line.h"
#include "worker/agent/trial_artifacts.h"
#include "worker/host.h"

namespace frontier {

using nlohmann::json;

ProfileWrapping WrapForProfileTool(const AgentOptions& options, const json& spec,
                                   const std::string& trial_id) {
  ProfileWrapping wrapping;
  const auto profile = spec.find("profile");
  if (profile == spec.end() || !profile->is_object()) return wrapping;
  const std::string tool = StringField(*profile, "tool");
  if (tool != "nsys" && tool != "ncu") return wrapping;
  const int steps = profile->value("steps", 0);
  wrapping.profile = {{"tool", tool}, {"host", HostName()}, {"worker", options.host}};
  if (options.device != DeviceKind::kCuda) {
    wrapping.profile["error"] = tool + " profiles CUDA work; worker " + options.host + " runs trials on " +
                                NameOf(options.device) + ", so the trial ran unprofiled";
    return wrapping;
  }
  const std::string program = FindOnPath(tool);
  if (program.empty()) {
    wrapping.profile["error"] =
        tool + " not found on PATH of worker " + options.host + "; the trial ran unprofiled";
    return wrapping;
  }
  const std::filesystem::path dir = TrialArtifactDir(options.artifact_dir, trial_id);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    wrapping.profile["error"] = "cannot create " + dir.string() + " on worker " + options.host + ": " +
                                error.message() + "; the trial ran unprofiled";
    return wrapping;
  }
  const std::string output = (dir / "trace").string();
  if (tool == "nsys") {
    wrapping.wrapper = {program, "profile", "--output=" + output, "--force-overwrite=true",
                        "--trace=cuda,nvtx,osrt"};
    wrapping.report = output + ".nsys-rep";
  } else {
    wrapping.wrapper = {program, "--output", output, "--force-overwrite", "--target-processes", "all"};
    if (steps > 0) {
      // Only the kernels of the profiled steps: frontier-trial marks each with this NVTX range.
      for (const char* arg : {"--nvtx", "--nvtx-include", "frontier.profiled_step/"})
        wrapping.wrapper.push_back(arg);
    } else {
      for (const char* arg : {"--launch-count", "200"}) wrapping.wrapper.push_back(arg);
    }
    wrapping.report = output + ".ncu-rep";
  }
  std::string command;
  for (const std::string& arg : wrapping.wrapper) command += (command.empty() ? "" : " ") + arg;
  wrapping.profile["artifact_dir"] = dir.string();
  wrapping.profile["report"] = wrapping.report;
  wrapping.profile["command"] = command;
  return wrapping;
}

std::string WithProfile(const std::string& result_json, const ProfileWrapping& wrapping) {
  if (wrapping.profile.is_null() || result_json.empty()) return result_json;
  json result = json::parse(result_json, nullptr, /*allow_exceptions=*/false);
  if (!result.is_object()) return result_json;
  json& profile = result["profile"];
  if (!profile.is_object()) profile = json::object();
  for (const auto& [key, value] : wrapping.profile.items()) profile[key] = value;
  if (!wrapping.report.empty() && !std::filesystem::exists(wrapping.report) && !profile.contains("error")) {
    profile["error"] =
        wrapping.profile.value("tool", "the profiler") + " wrote no report at " + wrapping.report;
  }
  return result.dump();
}

}  // namespace frontier
