// A search-space file (search_space.h): refused with a SpaceError, or parsed
// into a space whose baseline makes a trial spec and whose grid size can be
// asked. Any other exception escaping is a finding.
#include <string>

#include "search_spaces/search_space.h"
#include "tests/fuzz/fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const frontier::SearchSpace space = frontier::ParseSearchSpace(text, "fuzz.yaml");
    frontier::MakeTrialSpec(space, frontier::Config::object(), 1, "t");
    frontier::GridSize(space);
    frontier::ParseStoredSearchSpace(text, "fuzz.yaml");
  } catch (const frontier::SpaceError&) {
  }
  return 0;
}
