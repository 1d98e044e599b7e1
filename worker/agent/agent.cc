#include "worker/agent/agent.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "worker/agent/placement.h"
#include "worker/agent/rank_group.h"
#include "worker/agent/worker_metrics.h"
#include "worker/host.h"

namespace frontier {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// The longest a trial's supervisor goes without checking for a stop, a drain or its timeout.
constexpr milliseconds kSupervisePoll{100};
// Deadline of the single report attempt made for a trial killed by RequestStop.
constexpr milliseconds kStopReportDeadline{1000};
// UploadArtifact's chunks: the coordinator's limit per chunk (server/store/artifact_store.h).
constexpr size_t kArtifactChunkBytes = size_t{1} << 20;
constexpr milliseconds kDefaultHeartbeatInterval{10000};

std::chrono::system_clock::time_point DeadlineIn(milliseconds timeout) {
  return std::chrono::system_clock::now() + timeout;
}

milliseconds JitteredBackoff(milliseconds backoff) {
  thread_local std::mt19937_64 random{std::random_device{}()};
  const int64_t half = std::max<int64_t>(1, backoff.count() / 2);
  return milliseconds(half + std::uniform_int_distribution<int64_t>(0, half)(random));
}

std::string Seconds(milliseconds duration) { return fmt::format("{:g}", duration.count() / 1000.0); }

// Fills in what the worker knows and the coordinator left open: the device,
// and the thread count when the spec says 0 ("all cores" would oversubscribe
// a machine running several slots).
// runtime.ranks when it is a number from 1 up, else 1 (frontier-trial fails a bad value with its path).
int RanksOf(const json& spec, const char* field = "ranks") {
  const json runtime = spec.value("runtime", json::object());
  const json ranks = runtime.is_object() ? runtime.value(field, json(1)) : json(1);
  return ranks.is_number_integer() && ranks.get<int64_t>() >= 1 && ranks.get<int64_t>() <= 1024
             ? ranks.get<int>()
             : 1;
}

void PrepareSpec(const AgentOptions& options, json* spec) {
  json& runtime = (*spec)["runtime"];
  if (runtime.is_null()) runtime = json::object();
  if (!runtime.is_object()) return;  // frontier-trial fails it with the field's path
  const auto threads = runtime.find("threads");
  if (options.threads_per_trial > 0 && (threads == runtime.end() || *threads == 0)) {
    // threads_per_trial is the trial's: its ranks share it.
    runtime["threads"] = std::max(1, options.threads_per_trial / RanksOf(*spec));
  }
  const auto device = runtime.find("device");
  if (device == runtime.end() || *device == "auto") runtime["device"] = options.device;
}

std::string SpecFileName(const std::string& trial_id, int attempt) {
  std::string name;
  for (char c : trial_id)
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return name + "-attempt" + std::to_string(attempt) + ".json";
}

// The number at `pointer` in `document`, formatted, or "n/a".
std::string NumberAt(const json& document, const char* pointer, const char* format) {
  const json::json_pointer path(pointer);
  if (!document.contains(path) || !document.at(path).is_number()) return "n/a";
  return fmt::format(fmt::runtime(format), document.at(path).get<double>());
}

std::string StringField(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The folder frontier-trial writes a trial's profile to (the rule of
// worker/host.h's TrialFolderName, which the runner uses too).
std::filesystem::path TrialArtifactDir(const std::string& artifact_dir, const std::string& trial_id) {
  std::error_code ignored;
  return (std::filesystem::absolute(artifact_dir.empty() ? "artifacts" : artifact_dir, ignored) /
          TrialFolderName(trial_id))
      .lexically_normal();
}

// A command trial's `command` section (docs/trial-protocol.md) into `command`;
// the problem when it is malformed (the coordinator validated it, but the
// worker does not trust what it leases).
std::optional<std::string> ReadCommandSection(const json& section, TrialCommand* command,
                                              milliseconds* limit) {
  if (!section.is_object()) return "command: expected an object";
  const auto argv = section.find("argv");
  if (argv == section.end() || !argv->is_array() || argv->empty())
    return "command.argv: expected a non-empty list";
  for (const json& arg : *argv) {
    if (!arg.is_string() || arg.get<std::string>().empty())
      return "command.argv: every entry must be a non-empty string";
    command->program.push_back(arg.get<std::string>());
  }
  command->workdir = StringField(section, "workdir");
  std::error_code error;
  if (!command->workdir.empty() && !std::filesystem::is_directory(command->workdir, error)) {
    return "command.workdir: " + command->workdir + " is not a folder on this worker";
  }
  const auto time_limit = section.find("time_limit_s");
  if (time_limit != section.end() && time_limit->is_number() && time_limit->get<double>() > 0) {
    *limit = milliseconds(static_cast<int64_t>(time_limit->get<double>() * 1000));
  }
  return std::nullopt;
}

// At most `limit` bytes of `text` for a message, "..." marking a cut.
std::string Abbreviate(const std::string& text, size_t limit) {
  return text.size() <= limit ? text : text.substr(0, limit) + "...";
}

std::string JoinArgs(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& arg : args) text += (text.empty() ? "" : " ") + arg;
  return text;
}

// What breaks the result line's schema (docs/trial-protocol.md), or nullopt.
// Statuses other than the three are left to the caller (unknown status).
std::optional<std::string> ResultSchemaProblem(const json& result) {
  const auto schema = result.find("schema");
  if (schema == result.end() || *schema != 1)
    return "schema is " + (schema == result.end() ? std::string("missing") : schema->dump()) + ", expected 1";
  const std::string status = StringField(result, "status");
  if (status.empty()) return std::string("no status");
  if (status == "completed") {
    const json::json_pointer median("/step_time_ms/median");
    if (!result.contains(median) || !result.at(median).is_number() ||
        !(result.at(median).get<double>() > 0)) {
      return std::string("a completed result needs step_time_ms.median > 0");
    }
  }
  if ((status == "failed" || status == "diverged") && StringField(result, "error").empty()) {
    return "a " + status + " result needs an error";
  }
  return std::nullopt;
}

// How a trial whose spec asks for profile.tool nsys or ncu is run.
struct ProfileWrapping {
  std::vector<std::string> wrapper;  // the tool's command line before the trial's; empty: run unwrapped
  std::string report;                // the report file the tool is to write
  json profile;                      // merged into the result's "profile"; null: nothing to add
};

ProfileWrapping WrapForProfileTool(const AgentOptions& options, const json& spec,
                                   const std::string& trial_id) {
  ProfileWrapping wrapping;
  const auto profile = spec.find("profile");
  if (profile == spec.end() || !profile->is_object()) return wrapping;
  const std::string tool = StringField(*profile, "tool");
  if (tool != "nsys" && tool != "ncu") return wrapping;
  const int steps = profile->value("steps", 0);
  wrapping.profile = {{"tool", tool}, {"host", HostName()}, {"worker", options.host}};
  if (options.device != "cuda") {
    wrapping.profile["error"] = tool + " profiles CUDA work; worker " + options.host + " runs trials on " +
                                options.device + ", so the trial ran unprofiled";
    return wrapping;
  }
  const std::string program = FindOnPath(tool);
  if (program.empty()) {
    wrapping.profile["error"] =
        tool + " not found on PATH of worker " + options.host + "; the trial ran unprofiled";
    return wrapping;
  }
  const std::filesystem::path dir = TrialArtifactDir(options.artifact_dir, trial_id);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    wrapping.profile["error"] = "cannot create " + dir.string() + " on worker " + options.host + ": " +
                                error.message() + "; the trial ran unprofiled";
    return wrapping;
  }
  const std::string output = (dir / "trace").string();
  if (tool == "nsys") {
    wrapping.wrapper = {program, "profile", "--output=" + output, "--force-overwrite=true",
                        "--trace=cuda,nvtx,osrt"};
    wrapping.report = output + ".nsys-rep";
  } else {
    wrapping.wrapper = {program, "--output", output, "--force-overwrite", "--target-processes", "all"};
    if (steps > 0) {
      // Only the kernels of the profiled steps: frontier-trial marks each with this NVTX range.
      for (const char* arg : {"--nvtx", "--nvtx-include", "frontier.profiled_step/"})
        wrapping.wrapper.push_back(arg);
    } else {
      for (const char* arg : {"--launch-count", "200"}) wrapping.wrapper.push_back(arg);
    }
    wrapping.report = output + ".ncu-rep";
  }
  std::string command;
  for (const std::string& arg : wrapping.wrapper) command += (command.empty() ? "" : " ") + arg;
  wrapping.profile["artifact_dir"] = dir.string();
  wrapping.profile["report"] = wrapping.report;
  wrapping.profile["command"] = command;
  return wrapping;
}

// The result line with the agent's part of "profile" merged in.
std::string WithProfile(const std::string& result_json, const ProfileWrapping& wrapping) {
  if (wrapping.profile.is_null() || result_json.empty()) return result_json;
  json result = json::parse(result_json, nullptr, /*allow_exceptions=*/false);
  if (!result.is_object()) return result_json;
  json& profile = result["profile"];
  if (!profile.is_object()) profile = json::object();
  for (const auto& [key, value] : wrapping.profile.items()) profile[key] = value;
  if (!wrapping.report.empty() && !std::filesystem::exists(wrapping.report) && !profile.contains("error")) {
    profile["error"] =
        wrapping.profile.value("tool", "the profiler") + " wrote no report at " + wrapping.report;
  }
  return result.dump();
}

// The result line with where the trial ran: {"placement": {"worker", "slot",
// "cpus", "pinned", "shared_cores"}}. shared_cores: another slot or another
// trial on this host ran on one of these cores meanwhile (or may have: an
// unpinned slot of a worker with several slots).
std::string WithPlacement(const std::string& result_json, const AgentOptions& options, int slot,
                          const std::vector<int>& cpus, bool claim_shared) {
  if (result_json.empty()) return result_json;
  json result = json::parse(result_json, nullptr, /*allow_exceptions=*/false);
  if (!result.is_object()) return result_json;
  const bool pinned = !cpus.empty();
  result["placement"] = {{"worker", options.host},
                         {"slot", slot},
                         {"device", options.device},
                         {"cpus", FormatCpuList(pinned ? cpus : UsableCpus())},
                         {"pinned", pinned},
                         {"shared_cores", claim_shared || options.cpus_shared ||
                                              (!pinned && options.slots > 1 && options.device == "cpu")}};
  return result.dump();
}

// Evidence of an allocation failure in a crashed trial's error (its stderr tail).
bool MentionsAllocationFailure(const std::string& text) {
  for (const char* sign :
       {"std::bad_alloc", "can't allocate memory", "Cannot allocate memory", "out of memory"}) {
    if (text.find(sign) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

// How long a call keeps retrying.
enum class Agent::Retry {
  kOnce,        // one attempt (heartbeats, progress: the next one is coming anyway)
  kUntilDrain,  // until a drain or stop is requested (registration, leasing)
  kUntilStop,   // until a stop, or a drain's deadline passes (results, failures)
};

struct Agent::Lease {
  std::string trial_id;
  int attempt = 0;
  std::string spec_json;
};

// How one trial runs: what to call it in messages, its stop file, its time limit.
// A data-parallel trial's ranks and the nodes they span (runtime.ranks/nodes).
struct Agent::RankPlan {
  int ranks = 1;
  int nodes = 1;
  std::string rendezvous_file;  // the local launcher's FileStore, removed after the trial
};

struct Agent::Launch {
  std::string what;       // "frontier-trial" or "the command `python3 train.py`"
  std::string stop_file;  // created when the trial is asked to stop
  milliseconds timeout;
  // A line that is not a JSON object fails the trial: a command trial's own
  // program, unless a profiler wrapper (which prints to stdout) runs it.
  bool strict_output = false;
};

// How a trial ended, as the coordinator is to hear it.
struct Agent::Outcome {
  enum class Kind {
    kComplete,   // CompleteTrial(result_json): completed or diverged
    kFail,       // FailTrial(error, retryable, result_json)
    kLeaseLost,  // nothing: the coordinator already re-queued the trial
  };
  Kind kind = Kind::kFail;
  std::string error;
  bool retryable = true;
  std::string result_json;  // the result line exactly as frontier-trial printed it, if it did
};

Agent::Agent(AgentOptions options, std::unique_ptr<v1::WorkerService::StubInterface> stub,
             std::unique_ptr<TrialLauncher> launcher, std::shared_ptr<MonotonicClock> clock)
    : options_(std::move(options)),
      stub_(std::move(stub)),
      launcher_(std::move(launcher)),
      clock_(clock ? std::move(clock) : std::make_shared<SteadyClock>()) {}

milliseconds Agent::Now() const { return milliseconds(clock_->NowMs()); }

Agent::~Agent() = default;

std::string Agent::worker_id() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return worker_id_;
}

void Agent::RequestDrain() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (draining_) return;
  draining_ = true;
  drain_deadline_ = Now() + options_.drain_timeout;
  for (grpc::ClientContext* context : pending_leases_) context->TryCancel();
  wake_.notify_all();
  spdlog::info("draining: no new trials; running trials get {} s to finish", Seconds(options_.drain_timeout));
}

void Agent::RequestStop() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;
  draining_ = true;
  stopping_ = true;
  for (grpc::ClientContext* context : pending_leases_) context->TryCancel();
  wake_.notify_all();
  spdlog::warn("stopping now: killing running trials");
}

bool Agent::GivingUp(Retry retry) const {
  std::lock_guard<std::mutex> lock(mutex_);
  switch (retry) {
    case Retry::kOnce:
      return true;
    case Retry::kUntilDrain:
      return draining_;
    case Retry::kUntilStop:
      return stopping_ || (draining_ && Now() >= drain_deadline_);
  }
  return true;
}

bool Agent::SleepUnless(Retry retry, milliseconds delay) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, delay, [&] { return retry == Retry::kUntilDrain ? draining_ : stopping_; });
  }
  return !GivingUp(retry);
}

template <typename Rpc>
grpc::Status Agent::Call(const char* name, Retry retry, milliseconds deadline, Rpc&& rpc, bool reregister) {
  milliseconds backoff = options_.retry_initial_backoff;
  int failures = 0;
  for (;;) {
    grpc::ClientContext context;
    context.set_deadline(DeadlineIn(deadline));
    const bool cancellable = retry == Retry::kUntilDrain;
    if (cancellable) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (draining_) return grpc::Status(grpc::StatusCode::CANCELLED, "worker draining");
      pending_leases_.insert(&context);
    }
    const std::string worker_id = this->worker_id();
    grpc::Status status = rpc(&context, worker_id);
    if (cancellable) {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_leases_.erase(&context);
    }
    if (status.ok()) {
      if (failures > 0) spdlog::info("{}: coordinator reachable again", name);
      return status;
    }

    const grpc::StatusCode code = status.error_code();
    if (reregister && (code == grpc::StatusCode::NOT_FOUND || code == grpc::StatusCode::UNAUTHENTICATED)) {
      spdlog::warn("{}: the coordinator does not know worker {} ({}); registering again", name, worker_id,
                   status.error_message());
      Reregister(worker_id);
      reregister = false;
      continue;
    }
    const bool transient =
        code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!transient || GivingUp(retry)) return status;
    const milliseconds delay = JitteredBackoff(backoff);
    if (failures++ % 10 == 0) {
      spdlog::warn("{}: coordinator unreachable ({}: {}); retrying in {} ms", name, static_cast<int>(code),
                   status.error_message(), delay.count());
    }
    if (!SleepUnless(retry, delay)) return status;
    backoff = std::min(backoff * 2, options_.retry_max_backoff);
  }
}

grpc::Status Agent::Register(Retry retry) {
  v1::RegisterWorkerRequest request;
  request.set_host(options_.host);
  request.set_device(options_.device);
  request.set_device_name(options_.device_name);
  request.set_device_count(options_.slots);
  request.set_version(kWorkerVersion);
  if (calibration_.is_object()) {
    for (const auto& [dtype, peak] : calibration_["peaks"].items()) {
      if (peak.is_number()) (*request.mutable_peak_flops())[dtype] = peak.get<double>();
    }
  }
  v1::RegisterWorkerResponse response;
  grpc::Status status = Call(
      "RegisterWorker", retry, options_.rpc_timeout,
      [&](grpc::ClientContext* context, const std::string&) {
        return stub_->RegisterWorker(context, request, &response);
      },
      /*reregister=*/false);
  if (!status.ok()) return status;

  milliseconds interval(response.heartbeat_interval_ms());
  if (interval.count() <= 0) {
    interval = response.lease_timeout_ms() > 0 ? milliseconds(response.lease_timeout_ms() / 3)
                                               : kDefaultHeartbeatInterval;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  worker_id_ = response.worker_id();
  heartbeat_interval_ = interval;
  spdlog::info("registered as {}: {} ({}), {} slot(s); lease timeout {} ms, heartbeat every {} ms",
               worker_id_, options_.device, options_.device_name, options_.slots, response.lease_timeout_ms(),
               interval.count());
  return status;
}

void Agent::Reregister(const std::string& stale_worker_id) {
  std::lock_guard<std::mutex> registration(registration_mutex_);
  if (worker_id() != stale_worker_id) return;  // another slot already registered again
  const grpc::Status status = Register(Retry::kUntilStop);
  if (!status.ok()) spdlog::error("registering again failed: {}", status.error_message());
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

grpc::Status Agent::Run() {
  if (options_.calibrate) Calibrate();
  grpc::Status status = Register(Retry::kUntilDrain);
  if (!status.ok()) {
    if (GivingUp(Retry::kUntilDrain)) return grpc::Status::OK;
    spdlog::error("the coordinator refused the registration: {}", status.error_message());
    return status;
  }
  std::vector<std::thread> slots;
  for (int slot = 0; slot < options_.slots; ++slot) slots.emplace_back([this, slot] { RunSlot(slot); });
  for (std::thread& slot : slots) slot.join();
  spdlog::info("worker {} done after {} trial(s)", worker_id(), trials_leased_);
  return grpc::Status::OK;
}

bool Agent::ReserveTrial() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (draining_ || (options_.max_trials > 0 && trials_leased_ >= options_.max_trials)) return false;
  ++trials_leased_;
  return true;
}

void Agent::ReleaseTrial() {
  std::lock_guard<std::mutex> lock(mutex_);
  --trials_leased_;
}

void Agent::RunSlot(int slot) {
  HostLock host_lock(options_.host_lock);
  std::optional<Lease> next;  // leased with the last completion (counted by ReserveTrial when asked for)
  for (;;) {
    if (next) {
      const Lease lease = *std::exchange(next, std::nullopt);
      if (GivingUp(Retry::kUntilDrain)) {
        Fail(lease, "worker shutting down", /*retryable=*/true, "");
        continue;
      }
      RunTrial(slot, lease, &next);
      continue;
    }
    if (!ReserveTrial()) break;
    // No lease while a calibration on this host waits or measures: a leased
    // trial would wait for it at the turnstile without heartbeats.
    if (!host_lock.Shared([this] { return GivingUp(Retry::kUntilDrain); })) {
      ReleaseTrial();
      continue;
    }
    v1::LeaseTrialResponse response;
    const milliseconds asked = Now();
    const grpc::Status status =
        Call("LeaseTrial", Retry::kUntilDrain, options_.lease_wait + options_.rpc_timeout,
             [&](grpc::ClientContext* context, const std::string& worker_id) {
               v1::LeaseTrialRequest request;
               request.set_worker_id(worker_id);
               request.set_wait_ms(static_cast<int32_t>(options_.lease_wait.count()));
               return stub_->LeaseTrial(context, request, &response);
             });
    if (!status.ok() || !response.has_trial()) {
      ReleaseTrial();
      if (!status.ok() && !GivingUp(Retry::kUntilDrain)) {
        spdlog::error("slot {}: LeaseTrial failed: {}", slot, status.error_message());
        SleepUnless(Retry::kUntilDrain, options_.retry_max_backoff);
      } else if (status.ok() && Now() - asked < options_.lease_wait / 10) {
        // A coordinator that answers "nothing" at once is not long-polling: do not spin on it.
        SleepUnless(Retry::kUntilDrain, options_.retry_initial_backoff);
      }
      continue;
    }
    const Lease lease{response.trial_id(), response.attempt(), response.spec_json()};
    if (GivingUp(Retry::kUntilDrain)) {
      Fail(lease, "worker shutting down", /*retryable=*/true, "");
      continue;
    }
    RunTrial(slot, lease, &next);
  }
}

void Agent::RunTrial(int slot, const Lease& lease, std::optional<Lease>* next) {
  spdlog::info("slot {}: leased {} (attempt {})", slot, lease.trial_id, lease.attempt);
  if (options_.metrics) options_.metrics->TrialStarted(slot, lease.trial_id, lease.spec_json);
  json spec = json::parse(lease.spec_json, nullptr, /*allow_exceptions=*/false);
  if (!spec.is_object()) {
    Report(lease, Outcome{Outcome::Kind::kFail, "spec_json is not a JSON object", /*retryable=*/false, ""});
    return;
  }
  PrepareSpec(options_, &spec);
  const std::vector<int> cpus =
      static_cast<size_t>(slot) < options_.slot_cpus.size() ? options_.slot_cpus[slot] : std::vector<int>();
  RankPlan plan{RanksOf(spec), RanksOf(spec, "nodes"), ""};
  if (plan.ranks > 1) {
    if (plan.nodes > 1 && options_.rank_launcher != "srun") {
      Report(lease,
             Outcome{Outcome::Kind::kFail,
                     fmt::format("runtime.nodes is {} but this worker starts a trial's ranks on its own host "
                                 "(--rank-launcher local): run a worker with --rank-launcher srun inside a "
                                 "Slurm allocation of {} nodes (docs/distributed.md)",
                                 plan.nodes, plan.nodes),
                     /*retryable=*/false, ""});
      return;
    }
    json& runtime = spec["runtime"];
    if (options_.rank_launcher != "srun" && options_.device != "cuda" && runtime.is_object() &&
        runtime.value("threads", json(0)) == 0) {
      // Each rank's threads: its share of the slot's cores (the smallest share, one spec for all ranks).
      const SlotCpus split = SplitCpus(cpus.empty() ? UsableCpus() : cpus, plan.ranks);
      size_t fewest = split.slots.empty() ? 1 : split.slots[0].size();
      for (const auto& group : split.slots) fewest = std::min(fewest, group.size());
      runtime["threads"] = std::max<size_t>(1, fewest);
    }
  }
  const std::string spec_path = options_.work_dir + "/" + SpecFileName(lease.trial_id, lease.attempt);
  {
    std::ofstream file(spec_path);
    file << spec.dump(2) << "\n";
    file.close();
    if (!file) {
      Report(lease, Outcome{Outcome::Kind::kFail,
                            "cannot write the spec file " + spec_path + ": " + std::strerror(errno),
                            /*retryable=*/true, ""});
      return;
    }
  }

  const ProfileWrapping wrapping = WrapForProfileTool(options_, spec, lease.trial_id);
  if (wrapping.profile.contains("error")) {
    spdlog::warn("trial {}: {}", lease.trial_id, wrapping.profile["error"].get<std::string>());
  }
  std::error_code ignored;
  const std::string spec_file = std::filesystem::absolute(spec_path, ignored).string();
  TrialCommand command{
      spec_file, options_.progress_every, {}, options_.artifact_dir, wrapping.wrapper, {}, {}, {}, {}, 0};
  Launch launch{"frontier-trial", spec_file + ".stop", options_.trial_timeout};
  if (spec.contains("command")) {
    if (std::optional<std::string> problem = ReadCommandSection(spec["command"], &command, &launch.timeout)) {
      std::remove(spec_path.c_str());
      Report(lease, Outcome{Outcome::Kind::kFail, "invalid command trial spec: " + *problem,
                            /*retryable=*/false, ""});
      return;
    }
    launch.what = "the command `" + JoinArgs(command.program) + "`";
    launch.strict_output = wrapping.wrapper.empty();
  }
  const json& runtime = spec["runtime"];
  const json threads = runtime.is_object() ? runtime.value("threads", json(0)) : json(0);
  const std::filesystem::path artifacts = TrialArtifactDir(options_.artifact_dir, lease.trial_id);
  std::filesystem::create_directories(artifacts, ignored);
  command.environment = {{"FRONTIER_PROTOCOL", "1"},
                         {"FRONTIER_TRIAL_SPEC", spec_file},
                         {"FRONTIER_TRIAL_ID", lease.trial_id},
                         {"FRONTIER_SEED", spec.value("seed", json(0)).dump()},
                         {"FRONTIER_DEVICE", options_.device},
                         {"FRONTIER_THREADS", threads.is_number_integer() ? threads.dump() : "0"},
                         {"FRONTIER_ARTIFACT_DIR", artifacts.string()},
                         {"FRONTIER_STOP_FILE", launch.stop_file},
                         {"FRONTIER_PROGRESS_EVERY", std::to_string(options_.progress_every)}};
  if (!peak_flops_env_.empty()) command.environment.emplace_back("FRONTIER_PEAK_FLOPS", peak_flops_env_);
  if (!options_.cpu_memory_library.empty()) {
    command.environment.emplace_back("FRONTIER_CPU_MEMORY_LIB", options_.cpu_memory_library);
  }
  command.cpus = cpus;
  command.memory_limit_mb = options_.memory_limit_mb;
  command.address_space_limit = options_.device != "cuda";
  if (!cpus.empty()) command.environment.emplace_back("FRONTIER_CPUS", FormatCpuList(cpus));
  if (options_.memory_limit_mb > 0) {
    command.environment.emplace_back("FRONTIER_MEMORY_LIMIT_MB", std::to_string(options_.memory_limit_mb));
  }
  std::remove(launch.stop_file.c_str());
  if (options_.device == "cuda") {
    const size_t i = static_cast<size_t>(slot);
    command.environment.emplace_back("CUDA_VISIBLE_DEVICES", i < options_.visible_devices.size()
                                                                 ? options_.visible_devices[i]
                                                                 : std::to_string(slot));
  }
  // No trial starts while a calibration measures this host; each claims its cores.
  HostLock host_lock(options_.host_lock);
  const std::unique_ptr<HostLock::Hold> hold =
      host_lock.Shared([this] { return GivingUp(Retry::kUntilStop); });
  if (!hold) {
    std::remove(spec_path.c_str());
    Report(lease, Outcome{Outcome::Kind::kFail, "worker shutting down", /*retryable=*/true, ""});
    return;
  }
  // A GPU trial claims its GPU (CUDA_VISIBLE_DEVICES is one index), a CPU trial its cores.
  std::vector<int> gpu;
  if (options_.device == "cuda") {
    std::string visible;
    for (const auto& [name, value] : command.environment) {
      if (name == "CUDA_VISIBLE_DEVICES") visible = value;
    }
    if (!visible.empty() && visible.size() < 7 &&
        visible.find_first_not_of("0123456789") == std::string::npos) {
      gpu = {std::stoi(visible)};
    }
  }
  const CpuClaim claim(options_.host_lock,
                       options_.device == "cuda" ? gpu
                       : cpus.empty()            ? UsableCpus()
                                                 : cpus,
                       options_.device == "cuda" ? ".gpu" : ".cpu");
  std::string error;
  if (plan.ranks > 1 && options_.rank_launcher != "srun") {
    plan.rendezvous_file = std::filesystem::absolute(spec_path + ".rendezvous", ignored).string();
    std::remove(plan.rendezvous_file.c_str());
  }
  std::unique_ptr<TrialProcess> process = StartRanks(command, plan, cpus, &error);
  const bool started = process != nullptr;
  Outcome outcome = started ? Supervise(lease, launch, *process)
                            : Outcome{Outcome::Kind::kFail, error, /*retryable=*/true, ""};
  if (started) ClassifyOutOfMemory(*process, &outcome);
  outcome.result_json = WithProfile(outcome.result_json, wrapping);
  outcome.result_json = WithPlacement(outcome.result_json, options_, slot, cpus, claim.Shared());
  if (!wrapping.wrapper.empty() && outcome.kind == Outcome::Kind::kFail && outcome.result_json.empty()) {
    outcome.error += " (run under " + wrapping.profile.value("command", std::string()) + ")";
  }
  process.reset();
  std::remove(spec_path.c_str());
  std::remove(launch.stop_file.c_str());
  if (!plan.rendezvous_file.empty()) std::remove(plan.rendezvous_file.c_str());
  if (started && outcome.kind != Outcome::Kind::kLeaseLost && !GivingUp(Retry::kUntilStop))
    UploadArtifacts(lease);
  Report(lease, outcome, next);
  // A trial binary that cannot start fails every trial: do not burn through the queue.
  if (!started) SleepUnless(Retry::kUntilDrain, options_.retry_max_backoff);
}

std::unique_ptr<TrialProcess> Agent::StartRanks(const TrialCommand& command, const RankPlan& plan,
                                                const std::vector<int>& cpus, std::string* error) {
  if (plan.ranks <= 1) return launcher_->Start(command, error);
  const auto with = [](TrialCommand c, const std::vector<std::pair<std::string, std::string>>& variables) {
    for (const auto& variable :
         variables) {  // no structured binding: C++17 lambdas cannot capture one (clang)
      const auto same = [&](const auto& v) { return v.first == variable.first; };
      c.environment.erase(std::remove_if(c.environment.begin(), c.environment.end(), same),
                          c.environment.end());
      c.environment.push_back(variable);
    }
    return c;
  };
  const std::string world = std::to_string(plan.ranks);
  if (options_.rank_launcher == "srun") {
    // srun starts the tasks (SLURM_PROCID, SLURM_NTASKS) across the allocation, task 0 on its first
    // node, where this worker runs; its standard output is rank 0's.
    int port = 0;
    try {
      port = FreeTcpPort("0.0.0.0");  // rank 0's TCPStore listens on every interface
    } catch (const std::exception& e) {
      *error = std::string("no TCP port for the ranks' rendezvous: ") + e.what();
      return nullptr;
    }
    const std::string host = options_.rendezvous_host.empty() ? HostName() : options_.rendezvous_host;
    TrialCommand srun =
        with(command, {{"FRONTIER_RENDEZVOUS", "tcp://" + host + ":" + std::to_string(port)}});
    const std::vector<std::string> prefix = {
        "srun",
        "--nodes=" + std::to_string(plan.nodes),
        "--ntasks=" + world,
        "--ntasks-per-node=" + std::to_string((plan.ranks + plan.nodes - 1) / plan.nodes),
        "--kill-on-bad-exit=1",
        "--export=ALL"};
    srun.wrapper.insert(srun.wrapper.begin(), prefix.begin(), prefix.end());
    srun.cpus.clear();  // srun places its tasks
    return launcher_->Start(srun, error);
  }
  const SlotCpus split = SplitCpus(cpus.empty() ? UsableCpus() : cpus, plan.ranks);
  std::vector<std::string> gpus = options_.visible_devices;
  for (int g = static_cast<int>(gpus.size()); g < plan.ranks && options_.visible_devices.empty(); ++g) {
    gpus.push_back(std::to_string(g));
  }
  if (options_.device == "cuda" && static_cast<int>(gpus.size()) < plan.ranks) {
    *error = fmt::format("runtime.ranks is {} but this worker has {} GPUs", plan.ranks, gpus.size());
    return nullptr;
  }
  std::vector<std::unique_ptr<TrialProcess>> ranks;
  for (int r = 0; r < plan.ranks; ++r) {
    std::vector<std::pair<std::string, std::string>> variables = {
        {"FRONTIER_RANK", std::to_string(r)},
        {"FRONTIER_WORLD_SIZE", world},
        {"FRONTIER_RENDEZVOUS", "file://" + plan.rendezvous_file},
        {"FRONTIER_GLOO_HOSTNAME", "127.0.0.1"}};
    if (options_.device == "cuda") variables.emplace_back("CUDA_VISIBLE_DEVICES", gpus[r]);
    TrialCommand rank = with(command, variables);
    if (options_.device != "cuda") {
      rank.cpus = split.slots[r];
      rank = with(rank, {{"FRONTIER_CPUS", FormatCpuList(rank.cpus)}});
    }
    // The trial's limit, shared (never 0, which would mean none).
    if (command.memory_limit_mb > 0)
      rank.memory_limit_mb = std::max<int64_t>(1, command.memory_limit_mb / plan.ranks);
    if (r > 0) rank.wrapper.clear();  // a profiler wraps rank 0 only
    std::unique_ptr<TrialProcess> process = launcher_->Start(rank, error);
    if (!process) {
      *error = fmt::format("rank {} of {}: {}", r, plan.ranks, *error);
      return nullptr;  // the ranks started so far are killed with their processes
    }
    ranks.push_back(std::move(process));
  }
  return std::make_unique<RankGroup>(std::move(ranks));
}

Agent::Outcome Agent::Supervise(const Lease& lease, const Launch& launch, TrialProcess& process) {
  const milliseconds started = Now();
  const milliseconds timeout_at = started + launch.timeout;
  milliseconds heartbeat_interval;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    heartbeat_interval = heartbeat_interval_;
  }
  milliseconds next_heartbeat = started + heartbeat_interval;
  milliseconds last_progress = started - options_.progress_interval;
  bool output_closed = false;
  bool reporting_failed = false;
  std::string result_line;
  const auto stopped = [&](const std::string& reason) {
    std::ofstream(launch.stop_file) << reason << "\n";  // the protocol's polite request, then SIGTERM
    process.Terminate(options_.kill_grace);
    return Outcome{Outcome::Kind::kFail, "stopped: " + reason, /*retryable=*/false, ""};
  };

  for (;;) {
    const milliseconds now = Now();
    bool stop_now;
    bool drain_expired;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_now = stopping_;
      drain_expired = draining_ && now >= drain_deadline_;
    }
    if (stop_now || drain_expired) {
      process.Terminate(stop_now ? milliseconds(0) : options_.kill_grace);
      return Outcome{Outcome::Kind::kFail, "worker shutting down", /*retryable=*/true, ""};
    }
    if (now >= timeout_at) {
      process.Terminate(options_.kill_grace);
      return Outcome{Outcome::Kind::kFail, launch.what + " timed out after " + Seconds(launch.timeout) + " s",
                     /*retryable=*/true, ""};
    }
    if (now >= next_heartbeat) {
      next_heartbeat = now + heartbeat_interval;
      v1::HeartbeatResponse response;
      const grpc::Status status = Call("Heartbeat", Retry::kOnce, options_.rpc_timeout,
                                       [&](grpc::ClientContext* context, const std::string& worker_id) {
                                         v1::HeartbeatRequest request;
                                         request.set_worker_id(worker_id);
                                         request.set_trial_id(lease.trial_id);
                                         request.set_attempt(lease.attempt);
                                         return stub_->Heartbeat(context, request, &response);
                                       });
      if ((status.ok() && !response.lease_valid()) || status.error_code() == grpc::StatusCode::NOT_FOUND) {
        process.Terminate(options_.kill_grace);
        return Outcome{Outcome::Kind::kLeaseLost, "lease lost", /*retryable=*/true, ""};
      }
      if (status.ok() && response.stop()) return stopped("the coordinator asked to stop the trial");
      if (!status.ok())
        spdlog::warn("trial {}: heartbeat failed: {}", lease.trial_id, status.error_message());
    }

    const milliseconds poll_from = Now();
    const milliseconds wait = std::min({next_heartbeat, timeout_at, poll_from + kSupervisePoll}) - poll_from;
    if (output_closed) {
      if (std::optional<ProcessExit> exit = process.Wait(std::max(wait, milliseconds(0)))) {
        if (result_line.empty()) {
          return Outcome{Outcome::Kind::kFail,
                         launch.what + " ended without a result (" + exit->Describe() +
                             "); stderr: " + process.StderrTail(),
                         /*retryable=*/true, ""};
        }
        const json result = json::parse(result_line);
        if (std::optional<std::string> problem = ResultSchemaProblem(result)) {
          return Outcome{Outcome::Kind::kFail,
                         launch.what + " printed a result that breaks the trial protocol: " + *problem +
                             "; stderr: " + process.StderrTail(),
                         /*retryable=*/false, ""};
        }
        const std::string status = StringField(result, "status");
        if (status == "completed" || status == "diverged") {
          return Outcome{Outcome::Kind::kComplete, "", /*retryable=*/false, result_line};
        }
        if (status == "failed") {
          // Final, not retried: a bad spec or precision, out of memory, an output the
          // trial found wrong itself (incorrect: another attempt computes the same thing),
          // and a plugin that does not load (the spec names the same file on every worker).
          const std::string kind = StringField(result, "error_kind");
          return Outcome{Outcome::Kind::kFail, StringField(result, "error"),
                         /*retryable=*/kind != "spec" && kind != "precision" && kind != "out_of_memory" &&
                             kind != "incorrect" && kind != "plugin",
                         result_line};
        }
        return Outcome{Outcome::Kind::kFail,
                       launch.what + " printed a result with unknown status '" + status + "'",
                       /*retryable=*/true, result_line};
      }
      continue;
    }

    std::string line;
    const TrialProcess::ReadStatus read = process.ReadLine(std::max(wait, milliseconds(0)), &line);
    if (read == TrialProcess::ReadStatus::kEnd) output_closed = true;
    if (read != TrialProcess::ReadStatus::kLine) continue;

    const json event = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!event.is_object() && launch.strict_output) {
      process.Terminate(options_.kill_grace);
      return Outcome{Outcome::Kind::kFail,
                     launch.what +
                         " printed a line that is not a JSON object (standard output is for the "
                         "protocol's lines; logs go to standard error): " +
                         Abbreviate(line, 200),
                     /*retryable=*/false, ""};
    }
    if (!event.is_object()) {
      spdlog::debug("trial {}: ignoring output that is not a JSON object: {}", lease.trial_id, line);
      continue;
    }
    const std::string kind = StringField(event, "event");
    if (kind == "result") result_line = line;
    if (options_.metrics) options_.metrics->TrialEvent(lease.trial_id, event);
    if (kind != "progress" && kind != "eval") continue;
    if (kind == "progress") {
      if (Now() - last_progress < options_.progress_interval) continue;
      last_progress = Now();
    }
    v1::ReportProgressResponse response;
    const grpc::Status status = Call("ReportProgress", Retry::kOnce, options_.rpc_timeout,
                                     [&](grpc::ClientContext* context, const std::string& worker_id) {
                                       v1::ReportProgressRequest request;
                                       request.set_worker_id(worker_id);
                                       request.set_trial_id(lease.trial_id);
                                       request.set_attempt(lease.attempt);
                                       request.set_event_json(line);
                                       return stub_->ReportProgress(context, request, &response);
                                     });
    if (status.ok() && response.stop()) {
      return stopped(response.reason().empty() ? "the coordinator asked to stop the trial"
                                               : response.reason());
    }
    if (status.ok() == reporting_failed) {
      reporting_failed = !status.ok();
      if (reporting_failed) {
        spdlog::warn("trial {}: progress not delivered ({}); the result will carry the evaluations",
                     lease.trial_id, status.error_message());
      }
    }
  }
}

void Agent::ClassifyOutOfMemory(const TrialProcess& process, Outcome* outcome) const {
  if (outcome->kind != Outcome::Kind::kFail) return;
  json result = outcome->result_json.empty()
                    ? json()
                    : json::parse(outcome->result_json, nullptr, /*allow_exceptions=*/false);
  const bool said_so = result.is_object() && StringField(result, "error_kind") == "out_of_memory";
  const bool crashed =
      outcome->result_json.empty() && outcome->error.find("ended without a result") != std::string::npos;
  const bool killed = crashed && process.OomKilled();
  const bool crashed_on_allocation =
      crashed && process.MemoryLimitKind() == "RLIMIT_AS" && MentionsAllocationFailure(outcome->error);
  if (!said_so && !killed && !crashed_on_allocation) return;
  std::string what = said_so ? StringField(result, "error") : outcome->error;
  if (killed) what = "killed by the kernel's OOM killer in its cgroup; " + what;
  const std::string limit = process.MemoryLimitKind().empty()
                                ? std::string()
                                : fmt::format("the worker's limit of {} MiB per trial ({})",
                                              options_.memory_limit_mb, process.MemoryLimitKind());
  if (!result.is_object()) result = {{"event", "result"}, {"schema", 1}, {"status", "failed"}};
  result["status"] = "failed";
  result["error_kind"] = "out_of_memory";
  result["error"] = "out of memory" + (limit.empty() ? std::string() : " under " + limit) + ": " + what;
  if (!limit.empty()) {
    result["memory_limit_mb"] = options_.memory_limit_mb;
    result["memory_limit_kind"] = process.MemoryLimitKind();
  }
  outcome->error = result["error"].get<std::string>();
  outcome->retryable = false;
  outcome->result_json = result.dump();
}

void Agent::Report(const Lease& lease, const Outcome& outcome, std::optional<Lease>* next) {
  switch (outcome.kind) {
    case Outcome::Kind::kLeaseLost:
      if (options_.metrics) options_.metrics->TrialEnded(lease.trial_id, "lease_lost");
      spdlog::warn("trial {} (attempt {}): lease lost; trial killed, nothing reported", lease.trial_id,
                   lease.attempt);
      return;
    case Outcome::Kind::kFail:
      if (options_.metrics) {
        std::string ended = "failed";
        if (outcome.error.rfind("stopped:", 0) == 0) ended = "stopped";
        if (outcome.error == "worker shutting down") ended = "interrupted";
        options_.metrics->TrialEnded(lease.trial_id, ended);
      }
      spdlog::warn("trial {} (attempt {}) failed ({}): {}", lease.trial_id, lease.attempt,
                   outcome.retryable ? "retryable" : "final", outcome.error);
      Fail(lease, outcome.error, outcome.retryable, outcome.result_json);
      return;
    case Outcome::Kind::kComplete:
      break;
  }
  const json result = json::parse(outcome.result_json);
  if (options_.metrics) options_.metrics->TrialEnded(lease.trial_id, StringField(result, "status"));
  spdlog::info("trial {} (attempt {}) {}: median step {} ms, val acc {}", lease.trial_id, lease.attempt,
               StringField(result, "status"), NumberAt(result, "/step_time_ms/median", "{:.2f}"),
               NumberAt(result, "/val_accuracy", "{:.4f}"));
  const milliseconds deadline = GivingUp(Retry::kUntilStop) ? kStopReportDeadline : options_.rpc_timeout;
  // The slot's next trial comes with the completion when the slot may take
  // one now: a trial leased while a calibration waits would wait for it
  // without heartbeats (the turnstile is tried once, not waited for).
  const bool lease_next = next != nullptr && !GivingUp(Retry::kUntilDrain) &&
                          HostLock(options_.host_lock).Shared([] { return true; }) != nullptr &&
                          ReserveTrial();
  v1::CompleteTrialResponse response;
  const grpc::Status status = Call("CompleteTrial", Retry::kUntilStop, deadline,
                                   [&](grpc::ClientContext* context, const std::string& id) {
                                     v1::CompleteTrialRequest request;
                                     request.set_worker_id(id);
                                     request.set_trial_id(lease.trial_id);
                                     request.set_attempt(lease.attempt);
                                     request.set_result_json(outcome.result_json);
                                     request.set_lease_next(lease_next);
                                     return stub_->CompleteTrial(context, request, &response);
                                   });
  if (lease_next && status.ok() && response.next().has_trial()) {
    *next = Lease{response.next().trial_id(), response.next().attempt(), response.next().spec_json()};
  } else if (lease_next) {
    ReleaseTrial();
  }
  if (!status.ok()) {
    spdlog::error("trial {}: result not delivered: {}", lease.trial_id, status.error_message());
  } else if (!response.accepted()) {
    spdlog::warn("trial {} (attempt {}): result rejected: {}", lease.trial_id, lease.attempt,
                 response.reason());
  }
}

void Agent::UploadArtifacts(const Lease& lease) {
  if (!options_.upload_artifacts) return;
  namespace fs = std::filesystem;
  const fs::path dir = TrialArtifactDir(options_.artifact_dir, lease.trial_id);
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_symlink(ec)) continue;  // a link's target is not the trial's to send
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  int64_t sent = 0;
  int stored = 0;
  for (const fs::path& file : files) {
    const std::string name = file.lexically_relative(dir).generic_string();
    std::ifstream in(file, std::ios::binary);
    std::string chunk(kArtifactChunkBytes, '\0');
    int64_t offset = 0;
    bool last = false;
    grpc::Status status;
    while (in && !last) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const std::streamsize got = in.gcount();
      last = in.peek() == std::char_traits<char>::eof();
      v1::UploadArtifactResponse response;
      status = Call("UploadArtifact", Retry::kOnce, options_.rpc_timeout,
                    [&](grpc::ClientContext* context, const std::string& worker_id) {
                      v1::UploadArtifactRequest request;
                      request.set_worker_id(worker_id);
                      request.set_trial_id(lease.trial_id);
                      request.set_attempt(lease.attempt);
                      request.set_name(name);
                      request.set_offset(offset);
                      request.set_data(chunk.data(), static_cast<size_t>(got));
                      request.set_last(last);
                      return stub_->UploadArtifact(context, request, &response);
                    });
      if (!status.ok()) break;
      offset += got;
    }
    if (status.ok() && last) {
      sent += offset;
      ++stored;
      continue;
    }
    if (status.ok()) {
      spdlog::warn("trial {}: artifact {} not sent: cannot read {}", lease.trial_id, name, file.string());
      continue;
    }
    spdlog::warn("trial {}: artifact {} not stored by the coordinator: {}", lease.trial_id, name,
                 status.error_message());
    // A bad name costs that file; no store, no lease or a full trial end the upload.
    if (status.error_code() != grpc::StatusCode::INVALID_ARGUMENT) break;
  }
  if (stored > 0) {
    spdlog::info("trial {}: {} of {} artifacts stored by the coordinator ({} bytes)", lease.trial_id, stored,
                 files.size(), sent);
  }
}

void Agent::Fail(const Lease& lease, const std::string& error, bool retryable,
                 const std::string& result_json) {
  const milliseconds deadline = GivingUp(Retry::kUntilStop) ? kStopReportDeadline : options_.rpc_timeout;
  v1::FailTrialResponse response;
  const grpc::Status status = Call("FailTrial", Retry::kUntilStop, deadline,
                                   [&](grpc::ClientContext* context, const std::string& id) {
                                     v1::FailTrialRequest request;
                                     request.set_worker_id(id);
                                     request.set_trial_id(lease.trial_id);
                                     request.set_attempt(lease.attempt);
                                     request.set_error(error);
                                     request.set_retryable(retryable);
                                     request.set_result_json(result_json);
                                     return stub_->FailTrial(context, request, &response);
                                   });
  if (!status.ok()) {
    spdlog::error("trial {}: failure not delivered: {}", lease.trial_id, status.error_message());
  } else if (!response.accepted()) {
    spdlog::warn("trial {} (attempt {}): failure rejected: {}", lease.trial_id, lease.attempt,
                 response.reason());
  }
}

std::shared_ptr<grpc::Channel> MakeCoordinatorChannel(const std::string& address,
                                                      milliseconds max_reconnect_backoff,
                                                      const ClientSecurity& security) {
  grpc::ChannelArguments arguments;
  const int max_ms = static_cast<int>(max_reconnect_backoff.count());
  const int initial_ms = std::min(max_ms, 1000);
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial_ms);
  arguments.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, initial_ms);
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_ms);
  return MakeClientChannel(address, security, arguments);
}

std::string DetectDeviceName(const std::string& device) {
  if (device == "cuda") {
    std::string name;
    if (FILE* pipe = popen("nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null", "r")) {
      char buffer[256];
      if (fgets(buffer, sizeof buffer, pipe) != nullptr) name = buffer;
      pclose(pipe);
    }
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    return name.empty() ? "cuda" : name;
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return "cpu: " + line.substr(colon + 2);
  }
  return "cpu";
}

}  // namespace frontier
