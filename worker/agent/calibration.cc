// Agent::Calibrate (agent.h, AgentOptions::calibrate): before the worker
// registers, `frontier-trial --calibrate` runs once on slot 0's device and
// cores, holding the host lock exclusively (it waits until no trial runs on
// this host, and gives up on a drain). Its line becomes calibration_ (the
// peaks sent in RegisterWorker) and peak_flops_env_ (FRONTIER_PEAK_FLOPS for
// every trial). A calibration that fails, times out or finds no peaks is
// logged and leaves both empty: each trial then measures its own peak; a GPU
// that the datasheet table knows for every dtype needs none.
//
// A CPU trial at another thread count than the calibration's (a space that
// says `threads: 1` on a worker whose slots have 2 cores) cannot use that
// peak; rather than have every such trial measure its own (0.44 s of each
// 60-step trial), Agent::PeaksFor measures the trial's precision at its
// thread count once, on the slot's cores while the trial holds its place
// (the host lock shared, its cores claimed), and keeps it for the next.
#include "worker/agent/agent.h"

#include <mutex>
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

namespace {

// FRONTIER_PEAK_FLOPS from a calibration line: its peaks, where they come from, when and at how many threads.
json PeakEnvironment(const json& line, const std::string& device, const std::string& device_name) {
  json env = line.at("peaks");
  std::string source = "calibrated";
  const json sources = line.value("sources", json::object());
  for (const auto& [dtype, value] : env.items()) {
    if (sources.is_object() && sources.contains(dtype) && sources[dtype].is_string()) {
      source = sources[dtype].get<std::string>();
    }
  }
  const std::string measured_name = StringField(line, "device_name");
  env["source"] = source;
  env["measured_at"] = StringField(line, "measured_at");
  env["threads"] = ThreadsField(line, "threads");
  env["device"] = device;
  env["device_name"] = measured_name.empty() ? device_name : measured_name;
  return env;
}

}  // namespace

std::optional<json> Agent::MeasurePeaks(const std::vector<std::string>& dtypes, int threads,
                                        const std::vector<int>& cpus, std::string* error) {
  TrialCommand command;
  command.calibration = CalibrationRequest{NameOf(options_.device), options_.device == DeviceKind::kCpu ? threads : 0, dtypes};
  command.cpus = cpus;
  if (options_.device == DeviceKind::kCuda) {
    command.environment.emplace_back("CUDA_VISIBLE_DEVICES",
                                     options_.visible_devices.empty() ? "0" : options_.visible_devices[0]);
  }
  const milliseconds started = Now();
  std::unique_ptr<TrialProcess> process = launcher_->Start(command, error);
  if (!process) return std::nullopt;
  json line;
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
    *error = "timed out after " + Seconds(options_.calibration_timeout) + " s";
  } else if (!line.is_object() || !line["peaks"].is_object()) {
    *error = "no calibration line (" + exit->Describe() + "); stderr: " + process->StderrTail();
  } else if (line["peaks"].empty() &&
             !(line.contains("table") && line["table"].is_object() && !line["table"].empty())) {
    *error = "no peaks: " + line.value("errors", json::object()).dump();
  }
  if (!error->empty()) return std::nullopt;
  return line;
}

void Agent::Calibrate() {
  const auto give_up = [this] { return GivingUp(Retry::kUntilDrain); };
  HostLock host_lock(options_.host_lock);
  const std::unique_ptr<HostLock::Hold> hold = host_lock.Exclusive(give_up, [&] {
    spdlog::info("calibration waits until no trial runs on this host (lock {})", host_lock.path());
  });
  if (!hold) return;  // drained while waiting
  std::vector<std::string> dtypes = options_.calibration_dtypes;
  if (dtypes.empty())
    dtypes = options_.device == DeviceKind::kCuda ? std::vector<std::string>{"fp32", "bf16", "fp16"}
                                       : std::vector<std::string>{"fp32", "bf16"};
  const std::vector<int> cpus = options_.slot_cpus.empty() ? std::vector<int>() : options_.slot_cpus[0];
  const milliseconds started = Now();
  std::string error;
  std::optional<json> line = MeasurePeaks(dtypes, options_.threads_per_trial, cpus, &error);
  if (!line) {
    spdlog::warn("calibration failed: {}; each trial measures its own peak", error);
    return;
  }
  if ((*line)["peaks"].empty()) {  // a GPU the datasheet table knows for every dtype
    spdlog::info("no calibration needed: the datasheet table has {} for {}", (*line)["table"].dump(),
                 options_.device_name);
    return;
  }
  std::string summary;
  for (const auto& [dtype, value] : (*line)["peaks"].items()) {
    summary +=
        fmt::format("{}{} {:.1f} GFLOP/s", summary.empty() ? "" : ", ", dtype,
                    value.is_number() ? value.get<double>() / 1e9 : 0.0);
  }
  const json env = PeakEnvironment(*line, NameOf(options_.device), options_.device_name);
  calibration_ = std::move(*line);
  peak_flops_env_ = env.dump();
  {
    std::lock_guard<std::mutex> lock(peaks_mutex_);
    peaks_by_threads_[env["threads"].get<int>()] = env;
  }
  spdlog::info("calibrated peaks on {} ({} thread(s){}): {} in {} s", NameOf(options_.device), env["threads"].get<int>(),
               cpus.empty() ? "" : ", CPUs " + FormatCpuList(cpus), summary, Seconds(Now() - started));
}

std::string Agent::PeaksFor(const std::string& precision, int threads, const std::vector<int>& cpus) {
  if (peak_flops_env_.empty() || options_.device != DeviceKind::kCpu || threads <= 0) return peak_flops_env_;
  std::lock_guard<std::mutex> lock(peaks_mutex_);  // a second slot at the same count waits for this measurement
  json& peaks = peaks_by_threads_[threads];
  if (!peaks.is_object()) peaks = json::object();
  if (peaks.contains(precision)) return peaks.dump();
  if (failed_peaks_.count({threads, precision}) > 0) return peak_flops_env_;
  std::string error;
  const milliseconds started = Now();
  const std::optional<json> line = MeasurePeaks({precision}, threads, cpus, &error);
  if (!line || !(*line)["peaks"].contains(precision) || !(*line)["peaks"][precision].is_number() ||
      ThreadsField(*line, "threads") != threads) {
    spdlog::warn("calibrating {} at {} thread(s) failed: {}; such trials measure their own peak", precision, threads,
                 error.empty() ? "no such peak in its line" : error);
    failed_peaks_.insert({threads, precision});
    return peak_flops_env_;
  }
  const json env = PeakEnvironment(*line, NameOf(options_.device), options_.device_name);
  peaks.update(env);
  spdlog::info("calibrated the {} peak at {} thread(s) for trials that run so many: {:.1f} GFLOP/s in {} s", precision,
               threads, env[precision].get<double>() / 1e9, Seconds(Now() - started));
  return peaks.dump();
}

}  // namespace frontier
