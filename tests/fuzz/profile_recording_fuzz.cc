// A command trial's profile recording, the SDK's profile_calls.json
// (worker/profile/profile_recording.h): parsed with bounds as the worker
// reads it, refused or read as a recording, which is then summarized (calls
// nested by their intervals, shares, the trace), searched for kernel-lab
// calls and judged, as the worker does. An odd first byte makes the rest a
// command trial's result line, judged as the worker judges one.
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

#include "search_spaces/input_bounds.h"
#include "tests/fuzz/fuzz_entry.h"
#include "worker/profile/bottleneck.h"
#include "worker/profile/lab_calls.h"
#include "worker/profile/profile_recording.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 1) {
    // The input as a command trial's result line: judged as the worker judges it (no recording there).
    frontier::WithSummarizedProfile(std::string(text), "/nonexistent/frontier-fuzz");
    return 0;
  }
  nlohmann::json document;
  try {
    document = frontier::ParseBoundedJson(text, 1 << 20);
  } catch (const std::exception&) {
    return 0;
  }
  frontier::RecordingLimits limits;
  limits.max_calls = 2000;
  try {
    const frontier::ProfileRecording recording = frontier::RecordingFromJson(document, limits);
    const frontier::ProfileSummary summary = frontier::SummarizeProfile(recording);
    if (!summary.trace.empty()) (void)nlohmann::json::parse(summary.trace);  // written as text: must parse
    frontier::LabOpCalls(recording).dump();
    frontier::BottleneckVerdict({{"data_wait_fraction", 0.01}, {"profile", summary.profile}}).dump();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
