// A command trial's profile as the Python SDK records it (torch's autograd
// profiler, docs/byo-model.md#profiling): the file `profile_calls.json` it
// leaves in the trial's artifact folder, read here with bounds, so the worker
// summarizes it with frontier-trial's own code (profile_summary.h) and judges
// it by the same verdict rules (bottleneck.h). The file is the trial's
// output: hostile input, refused with a reason that names the field.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "worker/profile/profile_summary.h"

namespace frontier {

// The SDK's recording file, in a trial's artifact folder.
inline constexpr const char* kProfileCallsFile = "profile_calls.json";

// Bounds on a recording (a few profiled steps of a model has thousands of calls).
struct RecordingLimits {
  size_t max_bytes = 32u << 20;
  size_t max_calls = 200000;
  size_t max_steps = 1000;
  size_t max_shapes = 64;       // input shapes of one call
  size_t max_dims = 16;         // dimensions of one shape
  size_t max_name_bytes = 512;  // an operator's name
};

// The recording in `document` (schema 1, docs/byo-model.md#profiling);
// throws std::runtime_error naming the field and what is wrong with it.
ProfileRecording RecordingFromJson(const nlohmann::json& document, const RecordingLimits& limits = {});

// The recording in `folder`/profile_calls.json: nullopt when there is no such
// regular file (a symbolic link is not followed); throws std::runtime_error
// when it is too large, not JSON, or not a recording.
std::optional<ProfileRecording> ReadRecording(const std::filesystem::path& folder,
                                              const RecordingLimits& limits = {});

// A command trial's result line, judged: when its "profile" says the SDK
// recorded one ("recorded": "profile_calls.json"), "profile" becomes the
// summary of the recording in `folder` (its trace and operator table written
// beside it; a recording that cannot be read leaves "profile.error" saying
// why), and "bottleneck" becomes BottleneckVerdict of the result as amended,
// by frontier-trial's rules. A line that is not a JSON object comes back as
// it is.
std::string WithSummarizedProfile(const std::string& result_json, const std::filesystem::path& folder);

}  // namespace frontier
