// A trial's artifact folder on this worker: where it is (the folder
// frontier-trial writes a trial's profile to, given to every trial as
// FRONTIER_ARTIFACT_DIR), and, in trial_artifacts.cc, Agent::UploadArtifacts,
// which sends its regular files to the coordinator's artifact store
// (AgentOptions::upload_artifacts) after the trial's process ended and before
// its result is reported, so that they outlive this worker; not when the
// trial never started or lost its lease, or the worker is stopping or past
// its drain deadline.
#pragma once

#include <filesystem>
#include <string>

namespace frontier {

// <artifact_dir>/<TrialFolderName(trial_id)>, absolute and normalized
// (worker/host.h's rule, which the runner uses too); an empty artifact_dir
// is ./artifacts, frontier-trial's default.
std::filesystem::path TrialArtifactDir(const std::string& artifact_dir, const std::string& trial_id);

}  // namespace frontier
