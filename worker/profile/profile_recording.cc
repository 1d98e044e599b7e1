#include "worker/profile/profile_recording.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "search_spaces/input_bounds.h"
#include "worker/host.h"
#include "worker/profile/bottleneck.h"
#include "worker/profile/lab_calls.h"

namespace frontier {
namespace {

using json = nlohmann::json;

[[noreturn]] void Refuse(const std::string& field, const std::string& problem) {
  throw std::runtime_error("profile recording: " + field + " " + problem);
}

double Number(const json& object, const char* key, const std::string& where, bool required = true,
              double fallback = -1) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    if (required) Refuse(where + "." + key, "is missing");
    return fallback;
  }
  if (!it->is_number() || !std::isfinite(it->get<double>())) Refuse(where + "." + key, "is not a finite number");
  return it->get<double>();
}

// A time in microseconds within [0, 1e15] (about 30 years); an optional one missing is -1.
double Time(const json& object, const char* key, const std::string& where, bool required = true) {
  const double value = Number(object, key, where, required, -1);
  if (!required && value == -1) return -1;
  if (value < 0 || value > 1e15) Refuse(where + "." + key, "is not a time in [0, 1e15] microseconds");
  return value;
}

// An integer-valued field within [low, high].
int Int(const json& object, const char* key, const std::string& where, int low, int high, bool required = true,
        int fallback = 0) {
  const double value = Number(object, key, where, required, fallback);
  if (value < low || value > high || value != std::floor(value)) {
    Refuse(where + "." + key, "is not an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "]");
  }
  return static_cast<int>(value);
}

std::string Text(const json& object, const char* key, const std::string& where, size_t max_bytes,
                 bool required = false) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) {
    if (required) Refuse(where + "." + key, "is missing");
    return "";
  }
  if (!it->is_string()) Refuse(where + "." + key, "is not a string");
  const std::string& text = it->get_ref<const std::string&>();
  if (text.size() > max_bytes) Refuse(where + "." + key, "is longer than " + std::to_string(max_bytes) + " bytes");
  return text;
}

const json& Array(const json& object, const char* key, const std::string& where, size_t max_size) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_array()) Refuse(where + "." + key, "is not an array");
  if (it->size() > max_size) {
    Refuse(where + "." + key, "has " + std::to_string(it->size()) + " entries, more than " +
                                  std::to_string(max_size));
  }
  return *it;
}

std::vector<std::vector<int64_t>> Shapes(const json& call, const std::string& where, const RecordingLimits& limits) {
  std::vector<std::vector<int64_t>> shapes;
  if (!call.contains("shapes") || call["shapes"].is_null()) return shapes;
  const json& list = Array(call, "shapes", where, limits.max_shapes);
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + ".shapes[" + std::to_string(i) + "]";
    if (!list[i].is_array()) Refuse(at, "is not an array");
    if (list[i].size() > limits.max_dims) Refuse(at, "has more than " + std::to_string(limits.max_dims) + " dimensions");
    std::vector<int64_t> shape;
    for (const json& d : list[i]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 40)) {
        Refuse(at, "holds a dimension that is not an integer in [0, 2^40]");
      }
      shape.push_back(d.get<int64_t>());
    }
    shapes.push_back(std::move(shape));
  }
  return shapes;
}

}  // namespace

ProfileRecording RecordingFromJson(const json& document, const RecordingLimits& limits) {
  if (!document.is_object()) Refuse("the document", "is not a JSON object");
  if (!document.contains("schema") || document["schema"] != 1) Refuse("schema", "is not 1");
  ProfileRecording r;
  r.process = "command trial";
  r.tool = Text(document, "tool", "recording", 32);
  if (r.tool.empty()) r.tool = "libtorch";
  r.profiler = Text(document, "profiler", "recording", 256, /*required=*/true);
  r.host = Text(document, "host", "recording", 256);
  r.trial_id = Text(document, "trial_id", "recording", 256);
  r.error = Text(document, "error", "recording", 4096);
  constexpr int kMaxInt = 2147483647;
  r.pid = Int(document, "pid", "recording", 0, kMaxInt, false, 0);
  r.first = Int(document, "first", "recording", 0, kMaxInt);
  r.count = Int(document, "count", "recording", 0, kMaxInt);
  const std::string basis = Text(document, "basis", "recording", 16, /*required=*/true);
  if (basis == "wall") {
    r.basis = TimeBasis::kWall;
  } else if (basis == "cuda") {
    r.basis = TimeBasis::kCuda;
  } else if (basis == "thread_cpu") {
    r.basis = TimeBasis::kThreadCpu;
  } else {
    Refuse("basis", "is \"" + Abbreviated(basis, 16) + "\", not wall, cuda or thread_cpu");
  }
  const json& steps = Array(document, "steps", "recording", limits.max_steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string at = "steps[" + std::to_string(i) + "]";
    if (!steps[i].is_object()) Refuse(at, "is not an object");
    ProfiledStep s;
    s.step = Int(steps[i], "step", at, 0, kMaxInt);
    s.start_us = Time(steps[i], "start_us", at);
    s.end_us = Time(steps[i], "end_us", at);
    s.thread_cpu_us = Time(steps[i], "thread_cpu_us", at, false);
    if (s.end_us < s.start_us) Refuse(at, "ends before it starts");
    if (r.basis == TimeBasis::kThreadCpu && s.thread_cpu_us < 0) Refuse(at + ".thread_cpu_us", "is missing");
    r.steps.push_back(s);
  }
  const json& calls = Array(document, "calls", "recording", limits.max_calls);
  r.calls.reserve(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = "calls[" + std::to_string(i) + "]";
    const json& c = calls[i];
    if (!c.is_object()) Refuse(at, "is not an object");
    ProfiledCall call;
    call.name = Text(c, "name", at, limits.max_name_bytes, /*required=*/true);
    if (const std::optional<InputFault> fault = FindEncodingFault(call.name)) Refuse(at + ".name", Describe(*fault));
    const double thread = Number(c, "thread", at, false, 0);
    if (thread < 0 || thread > 9.0e15) Refuse(at + ".thread", "is not a thread id in [0, 9e15]");
    call.thread = static_cast<uint64_t>(thread);
    call.start_us = Time(c, "start_us", at);
    call.end_us = Time(c, "end_us", at);
    call.cpu_us = Time(c, "cpu_us", at, false);
    call.cuda_us = Time(c, "cuda_us", at, false);
    call.dtype = Text(c, "dtype", at, 64);
    call.shapes = Shapes(c, at, limits);
    if (r.basis == TimeBasis::kThreadCpu && call.cpu_us < 0) Refuse(at + ".cpu_us", "is missing");
    r.calls.push_back(std::move(call));
  }
  return r;
}

std::optional<ProfileRecording> ReadRecording(const std::filesystem::path& folder, const RecordingLimits& limits) {
  // Opened without following a link or blocking on a FIFO: a regular file within the bound.
  std::optional<std::string> text;
  try {
    text = ReadRegularFile((folder / kProfileCallsFile).string(), static_cast<int64_t>(limits.max_bytes));
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("profile recording: ") + e.what());
  }
  if (!text) return std::nullopt;
  json document;
  try {
    document = ParseBoundedJson(*text, limits.max_bytes);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("profile recording: ") + kProfileCallsFile + " is not JSON: " + e.what());
  }
  return RecordingFromJson(document, limits);
}

std::string WithSummarizedProfile(const std::string& result_json, const std::filesystem::path& folder) {
  json result = json::parse(result_json, nullptr, /*allow_exceptions=*/false);
  if (!result.is_object()) return result_json;
  json& profile = result["profile"];
  if (profile.is_object() && profile.value("recorded", json()) == kProfileCallsFile) {
    try {
      std::optional<ProfileRecording> recording = ReadRecording(folder);
      if (!recording) throw std::runtime_error(std::string("the SDK's ") + kProfileCallsFile + " is not in " + folder.string());
      ProfileSummary summary = SummarizeProfile(*recording);
      summary.profile["lab_calls"] = LabOpCalls(*recording);  // for `frontier ops optimize --from-trial`
      WriteProfileArtifacts(folder, &summary);
      // What the SDK said of its recording's cost stays beside the summary; nothing else of the trial's.
      for (const char* key : {"cost_s", "slowdown", "profiled_step_time_ms", "recorded", "recorded_calls"}) {
        if (!profile.contains(key)) continue;
        const json& value = profile[key];
        const bool numbers = value.is_object() && std::all_of(value.begin(), value.end(),
                                                               [](const json& v) { return v.is_number(); });
        if (value.is_number() || value.is_string() || numbers) summary.profile[key] = value;
      }
      profile = std::move(summary.profile);
    } catch (const std::exception& e) {
      profile = {{"tool", "libtorch"}, {"error", Abbreviated(e.what(), 2048)}};
    }
  } else if (profile.is_null()) {
    result.erase("profile");
  }
  // The verdict by frontier-trial's rules; a profile the program wrote itself in a shape the rules
  // cannot read is left out of it, and said so.
  try {
    result["bottleneck"] = BottleneckVerdict(result);
  } catch (const std::exception& e) {
    json without = result;
    without.erase("profile");
    result["bottleneck"] = BottleneckVerdict(without);
    if (result.contains("profile") && result["profile"].is_object()) {
      result["profile"]["error"] = "not judged: " + Abbreviated(e.what(), 512);
    }
  }
  return result.dump();
}

}  // namespace frontier
