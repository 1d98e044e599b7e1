#include "worker/trial/trial_command.h"

#include <iostream>
#include <iterator>

#include "worker/trial/measure/device.h"
#include "worker/trial/op_bench.h"

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
  if (!options.peak_flops_json.empty()) {
    try {
      ParseGivenPeaks(options.peak_flops_json);
    } catch (const std::exception& e) {
      err << "frontier-trial: --peak-flops / FRONTIER_PEAK_FLOPS: " << e.what() << "\n";
      return kExitUsage;
    }
  }
  options.emit = print;
  const nlohmann::json result = RunTrial(spec, options);
  // Rank 0 speaks for a data-parallel trial; the other ranks' standard
  // output stays empty (under srun every task's output is the trial's).
  const int rank = result.value("rank", 0);
  if (rank == 0) print(result);
  const std::string who = rank == 0 ? "frontier-trial: " : "frontier-trial: rank " + std::to_string(rank) + ": ";
  if (result.contains("error")) {
    err << who << result["status"].get<std::string>() << ": " << result["error"].get<std::string>() << "\n";
  } else if (rank != 0) {
    err << who << result["status"].get<std::string>() << "\n";
  }
  return ExitCodeFor(result);
}

int RunOpBenchSpec(const std::string& spec_path, int rounds, std::istream& in, std::ostream& out, std::ostream& err) {
  try {
    TrialSpec spec;
    if (spec_path == "-") {
      spec = ParseTrialSpecText(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
    } else {
      spec = LoadTrialSpecFile(spec_path);
    }
    OpBenchOptions options;
    options.rounds = rounds;
    out << RunOpBench(spec, options).dump() << std::endl;
  } catch (const c10::Error& e) {
    err << "frontier-trial: op benchmark failed: " << e.what_without_backtrace() << "\n";
    return kExitFailed;
  } catch (const std::exception& e) {
    err << "frontier-trial: op benchmark failed: " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitCompleted;
}

int RunCalibration(const CalibrateOptions& options, std::ostream& out, std::ostream& err) {
  if (options.device != "cpu" && options.device != "cuda") {
    err << "frontier-trial: --device takes cpu or cuda, not '" << options.device << "'\n";
    return kExitUsage;
  }
  for (const std::string& dtype : options.dtypes) {
    if (dtype != "fp32" && dtype != "bf16" && dtype != "fp16") {
      err << "frontier-trial: --dtypes takes fp32, bf16 and fp16, not '" << dtype << "'\n";
      return kExitUsage;
    }
  }
  try {
    const DeviceInfo device = SelectDevice(options.device);
    const GemmBudget budget{0.5, device.is_cuda() ? int64_t{8192} : int64_t{2048}};
    out << Calibrate(device, options.dtypes, options.threads, budget).dump() << std::endl;
  } catch (const std::exception& e) {
    err << "frontier-trial: calibration failed: " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitCompleted;
}

}  // namespace frontier
