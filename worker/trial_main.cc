// frontier-trial: runs exactly one trial and prints JSON lines (progress
// events, then one result). See docs/trial-output.md.
#include <cstring>
#include <iostream>
#include <string>

#include "worker/trial/trainer.h"

namespace {

constexpr const char* kUsage =
    "usage: frontier-trial --spec FILE [--progress-every N] [--artifact-dir DIR]\n"
    "  --spec FILE          trial spec (JSON, docs/trial-spec.md); '-' reads standard input\n"
    "  --progress-every N   a progress event every N steps (default 10, 0 = none)\n"
    "  --artifact-dir DIR   profiles (the spec's `profile` section) go to DIR/<trial_id>/\n"
    "                       (default ./artifacts; docs/profiling.md)\n"
    "exit status: 0 completed, 2 failed, 3 diverged, 64 usage error\n";

int Usage(const std::string& problem) {
  std::cerr << "frontier-trial: " << problem << "\n" << kUsage;
  return frontier::kExitUsage;
}

void Print(const nlohmann::json& event) { std::cout << event.dump() << std::endl; }

}  // namespace

int main(int argc, char** argv) {
  std::string spec_path;
  frontier::TrialOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--spec" && has_value) {
      spec_path = argv[++i];
    } else if (arg == "--progress-every" && has_value) {
      try {
        options.progress_every = std::stoi(argv[++i]);
      } catch (const std::exception&) {
        return Usage("--progress-every takes a whole number, got '" + std::string(argv[i]) + "'");
      }
      if (options.progress_every < 0) return Usage("--progress-every must be >= 0");
    } else if (arg == "--artifact-dir" && has_value) {
      options.artifact_dir = argv[++i];
      if (options.artifact_dir.empty()) return Usage("--artifact-dir takes a folder");
    } else {
      return Usage("unknown or incomplete argument '" + arg + "'");
    }
  }
  if (spec_path.empty()) return Usage("--spec is required");

  frontier::TrialSpec spec;
  try {
    if (spec_path == "-") {
      std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
      spec = frontier::ParseTrialSpecText(text);
    } else {
      spec = frontier::LoadTrialSpecFile(spec_path);
    }
  } catch (const frontier::SpecError& e) {
    Print({{"event", "result"},
           {"schema", frontier::kTrialOutputSchema},
           {"status", "failed"},
           {"error_kind", "spec"},
           {"field", e.path()},
           {"error", e.what()}});
    std::cerr << "frontier-trial: invalid spec: " << e.what() << "\n";
    return frontier::kExitFailed;
  }
  options.emit = Print;
  const nlohmann::json result = frontier::RunTrial(spec, options);
  Print(result);
  if (result.contains("error")) std::cerr << "frontier-trial: " << result["status"].get<std::string>() << ": "
                                          << result["error"].get<std::string>() << "\n";
  return frontier::ExitCodeFor(result);
}
