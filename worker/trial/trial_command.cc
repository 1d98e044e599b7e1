#include "worker/trial/trial_command.h"

#include <iostream>
#include <iterator>

namespace frontier {

int RunTrialSpec(const std::string& spec_path, TrialOptions options, std::istream& in, std::ostream& out,
                 std::ostream& err) {
  const auto print = [&out](const nlohmann::json& event) { out << event.dump() << std::endl; };
  TrialSpec spec;
  try {
    if (spec_path == "-") {
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      spec = ParseTrialSpecText(text);
    } else {
      spec = LoadTrialSpecFile(spec_path);
    }
  } catch (const SpecError& e) {
    print({{"event", "result"},
           {"schema", kTrialOutputSchema},
           {"status", "failed"},
           {"error_kind", "spec"},
           {"field", e.path()},
           {"error", e.what()}});
    err << "frontier-trial: invalid spec: " << e.what() << "\n";
    return kExitFailed;
  }
  options.emit = print;
  const nlohmann::json result = RunTrial(spec, options);
  print(result);
  if (result.contains("error")) {
    err << "frontier-trial: " << result["status"].get<std::string>() << ": "
        << result["error"].get<std::string>() << "\n";
  }
  return ExitCodeFor(result);
}

}  // namespace frontier
