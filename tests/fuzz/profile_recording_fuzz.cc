// A command trial's profile recording, the SDK's profile_calls.json
// (worker/profile/profile_recording.h): parsed with bounds as the worker
// reads it, refused or read as a recording, which is then summarized (calls
// nested by their intervals, shares, the trace) as the worker summarizes it.
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>

#include "search_spaces/input_bounds.h"
#include "tests/fuzz/fuzz_entry.h"
#include "worker/profile/profile_recording.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json document;
  try {
    document = frontier::ParseBoundedJson(text, 1 << 20);
  } catch (const std::exception&) {
    return 0;
  }
  frontier::RecordingLimits limits;
  limits.max_calls = 2000;
  try {
    const frontier::ProfileSummary summary = frontier::SummarizeProfile(frontier::RecordingFromJson(document, limits));
    summary.profile.dump();
    summary.trace.dump();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
