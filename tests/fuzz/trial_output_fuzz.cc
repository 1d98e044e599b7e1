// A trial's standard output (trial_process.h, OutputLines): the first byte
// sets the size of the chunks it arrives in, the rest is the output. Lines
// come out within the bounds (a small line bound here, so that the fuzzer
// reaches it) and each is handled as the agent does: parsed leniently, a
// result object dumped again. A line out of bounds ends the reading.
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_entry.h"
#include "worker/agent/trial_process.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  constexpr size_t kLineBound = 512;
  const size_t chunk = 1 + data[0] % 64;
  const std::string_view output(reinterpret_cast<const char*>(data) + 1, size - 1);
  frontier::OutputLines lines(kLineBound);
  std::string line;
  const auto drain = [&](bool closed) {
    for (;;) {
      switch (lines.Take(closed, &line)) {
        case frontier::OutputLines::Next::kNone:
          return true;
        case frontier::OutputLines::Next::kOutOfBounds:
          return false;
        case frontier::OutputLines::Next::kLine:
          break;
      }
      if (line.size() > kLineBound) std::abort();
      const nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (event.is_object() && event.value("event", nlohmann::json()) == "result") event.dump();
    }
  };
  for (size_t at = 0; at < output.size(); at += chunk) {
    lines.Append(output.substr(at, chunk));
    if (!drain(false)) return 0;
  }
  drain(true);
  return 0;
}
