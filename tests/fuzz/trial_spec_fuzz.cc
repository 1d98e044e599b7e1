// A trial spec's JSON text (trial_spec.h): refused with a SpecError, or
// parsed into a spec whose JSON form (ToJson) parses back to itself.
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "search_spaces/trial_spec.h"
#include "tests/fuzz/fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  frontier::TrialSpec spec;
  try {
    spec = frontier::ParseTrialSpecText(text);
  } catch (const frontier::SpecError&) {
    return 0;
  }
  const nlohmann::json once = frontier::ToJson(spec);
  if (frontier::ToJson(frontier::ParseTrialSpec(once)) != once) std::abort();  // the round trip holds
  return 0;
}
