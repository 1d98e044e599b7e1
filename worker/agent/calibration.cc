// Agent::Calibrate (agent.h, AgentOptions::calibrate): before the worker
// registers, `frontier-trial --calibrate` runs once on slot 0's device and
// cores, holding the host lock exclusively (it waits until no trial runs on
// this host, and gives up on a drain). Its line becomes calibration_ (the
// peaks sent in RegisterWorker) and peak_flops_env_ (FRONTIER_PEAK_FLOPS for
// every trial). A calibration that fails, times out or finds no peaks is
// logged and leaves both empty: each trial then measures its own peak; a GPU
// that the datasheet table knows for every dtype needs none.
#include "worker/agent/agent.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "worker/agent/placement.h"
#include "worker/agent/result_line.h"

namespace frontier {

using nlohmann::json;
using std::chrono::milliseconds;

void Agent::Calibrate() {
  const auto give_up = [this] { return GivingUp(Retry::kUntilDrain); };
  HostLock host_lock(options_.host_lock);
  const std::unique_ptr<HostLock::Hold> hold = host_lock.Exclusive(give_up, [&] {
    spdlog::info("calibration waits until no trial runs on this host (lock {})", host_lock.path());
  });
  if (!hold) return;  // drained while waiting
  std::vector<std::string> dtypes = options_.calibration_dtypes;
  if (dtypes.empty())
    dtypes = options_.device == "cuda" ? std::vector<std::string>{"fp32", "bf16", "fp16"}
                                       : std::vector<std::string>{"fp32", "bf16"};
  std::string list;
  for (const std::string& dtype : dtypes) list += (list.empty() ? "" : ",") + dtype;
  TrialCommand command;
  command.trial_arguments = {"--calibrate", "--device", options_.device, "--dtypes", list};
  if (options_.device == "cpu" && options_.threads_per_trial > 0) {
    command.trial_arguments.push_back("--threads");
    command.trial_arguments.push_back(std::to_string(options_.threads_per_trial));
  }
  if (!options_.slot_cpus.empty()) command.cpus = options_.slot_cpus[0];
  if (options_.device == "cuda") {
    command.environment.emplace_back("CUDA_VISIBLE_DEVICES",
                                     options_.visible_devices.empty() ? "0" : options_.visible_devices[0]);
  }
  const milliseconds started = Now();
  std::string error;
  std::unique_ptr<TrialProcess> process = launcher_->Start(command, &error);
  json line;
  if (process) {
    std::string text;
    TrialProcess::ReadStatus read;
    while (Now() - started < options_.calibration_timeout &&
           (read = process->ReadLine(kSupervisePoll, &text)) != TrialProcess::ReadStatus::kEnd) {
      if (read != TrialProcess::ReadStatus::kLine) continue;
      json event = json::parse(text, nullptr, /*allow_exceptions=*/false);
      if (event.is_object() && StringField(event, "event") == "calibration") line = std::move(event);
    }
    const std::optional<ProcessExit> exit = process->Wait(options_.kill_grace);
    if (!exit) {
      process->Terminate(options_.kill_grace);
      error = "timed out after " + Seconds(options_.calibration_timeout) + " s";
    } else if (!line.is_object() || !line["peaks"].is_object()) {
      error = "no calibration line (" + exit->Describe() + "); stderr: " + process->StderrTail();
    } else if (line["peaks"].empty() &&
               !(line.contains("table") && line["table"].is_object() && !line["table"].empty())) {
      error = "no peaks: " + line.value("errors", json::object()).dump();
    }
  }
  if (!error.empty() || !line.is_object()) {
    spdlog::warn("calibration failed: {}; each trial measures its own peak", error);
    return;
  }
  if (line["peaks"].empty()) {  // a GPU the datasheet table knows for every dtype
    spdlog::info("no calibration needed: the datasheet table has {} for {}", line["table"].dump(),
                 options_.device_name);
    return;
  }
  json peaks = line["peaks"];
  std::string source = "calibrated";
  std::string summary;
  for (const auto& [dtype, value] : peaks.items()) {
    if (line["sources"].contains(dtype)) source = line["sources"][dtype].get<std::string>();
    summary +=
        fmt::format("{}{} {:.1f} GFLOP/s", summary.empty() ? "" : ", ", dtype, value.get<double>() / 1e9);
  }
  json env = peaks;
  env["source"] = source;
  env["measured_at"] = line.value("measured_at", "");
  env["threads"] = line.value("threads", 0);
  env["device"] = options_.device;
  env["device_name"] = line.value("device_name", options_.device_name);
  calibration_ = std::move(line);
  peak_flops_env_ = env.dump();
  spdlog::info("calibrated peaks on {} ({} thread(s){}): {} in {} s", options_.device,
               env["threads"].get<int>(), command.cpus.empty() ? "" : ", CPUs " + FormatCpuList(command.cpus),
               summary, Seconds(Now() - started));
}

}  // namespace frontier
