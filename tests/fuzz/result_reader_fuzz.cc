// One stored trial result as the report reads it (server/report/result_reader.h):
// the facts are read, or std::invalid_argument says why not.
#include <stdexcept>
#include <string>
#include <vector>

#include "server/report/result_reader.h"
#include "tests/fuzz/fuzz_entry.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static const std::vector<std::vector<std::string>> paths = {
      {"val_accuracy"}, {"throughput", "samples_per_s"}, {"step_time_ms", "median"}};
  frontier::ResultFacts facts;
  facts.values.assign(paths.size(), 0.0);
  try {
    frontier::ReadResultFactsText(text, paths, "val_accuracy", "t", facts);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
