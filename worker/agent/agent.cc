// The agent's life (agent.h): construction, Run (calibrate, register, one
// thread per slot), drain and stop, each slot's lease-run-report loop
// (RunSlot, counted against max_trials) and RunTrial: a leased trial from its
// spec (the worker's device and threads filled in, written to work_dir) to
// the process started (its command, environment, CPUs, GPU, memory limit,
// host lock and core claim, its ranks through rank_launch.h) and, after
// Supervise, its result amended (out of memory, profile, placement), its
// artifacts uploaded and its end reported.
#include "worker/agent/agent.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "worker/agent/placement.h"
#include "worker/agent/profile_tool.h"
#include "worker/profile/profile_recording.h"
#include "worker/agent/rank_launch.h"
#include "worker/agent/result_line.h"
#include "worker/agent/trial_artifacts.h"
#include "worker/agent/trial_protocol.h"
#include "worker/agent/worker_metrics.h"
#include "worker/host.h"
#include "os/cpus.h"

namespace frontier {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// Fills in what the worker knows and the coordinator left open: the device,
// and the thread count when the spec says 0 ("all cores" would oversubscribe
// a machine running several slots).
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
  if (device == runtime.end() || *device == "auto") runtime["device"] = NameOf(options.device);
}

std::string SpecFileName(const std::string& trial_id, int attempt) {
  std::string name;
  for (char c : trial_id)
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return name + "-attempt" + std::to_string(attempt) + ".json";
}

std::string JoinArgs(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& arg : args) text += (text.empty() ? "" : " ") + arg;
  return text;
}

}  // namespace

Agent::Agent(AgentOptions options, std::unique_ptr<v1::WorkerService::StubInterface> stub,
             std::unique_ptr<TrialLauncher> launcher, std::shared_ptr<MonotonicClock> clock)
    : options_(std::move(options)),
      stub_(std::move(stub)),
      launcher_(std::move(launcher)),
      clock_(clock ? std::move(clock) : std::make_shared<SteadyClock>()) {}

milliseconds Agent::Now() const { return milliseconds(clock_->NowMs()); }

std::string Agent::Seconds(milliseconds duration) { return fmt::format("{:g}", duration.count() / 1000.0); }

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
    if (options_.rank_launcher != "srun" && options_.device != DeviceKind::kCuda && runtime.is_object() &&
        runtime.value("threads", json(0)) == 0) {
      // Each rank's threads: its share of the slot's cores (the smallest share, one spec for all ranks).
      runtime["threads"] = ThreadsPerRank(cpus, plan.ranks);
    }
  }
  const std::string spec_path = options_.work_dir + "/" + SpecFileName(lease.trial_id, lease.attempt);
  // A new file: an earlier trial in this shared folder may have left a link or a FIFO at this name.
  if (const std::string problem = WriteNewFile(spec_path, spec.dump(2) + "\n"); !problem.empty()) {
    Report(lease, Outcome{Outcome::Kind::kFail, "the spec file: " + problem, /*retryable=*/true, ""});
    return;
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
                         {"FRONTIER_DEVICE", NameOf(options_.device)},
                         {"FRONTIER_THREADS", threads.is_number_integer() ? threads.dump() : "0"},
                         {"FRONTIER_ARTIFACT_DIR", artifacts.string()},
                         {"FRONTIER_STOP_FILE", launch.stop_file},
                         {"FRONTIER_PROGRESS_EVERY", std::to_string(options_.progress_every)}};
  if (!options_.cpu_memory_library.empty()) {
    command.environment.emplace_back("FRONTIER_CPU_MEMORY_LIB", options_.cpu_memory_library);
  }
  // A command trial's heap under frontier-trial's policy from its exec on (host.h), unless the
  // worker's own environment sets GLIBC_TUNABLES (a user's setting is kept).
  if (spec.contains("command") && !std::getenv("GLIBC_TUNABLES")) {
    command.environment.emplace_back("GLIBC_TUNABLES", HostAllocatorTunables());
  }
  command.cpus = cpus;
  command.memory_limit_mb = options_.memory_limit_mb;
  command.address_space_limit = options_.device != DeviceKind::kCuda;
  if (!cpus.empty()) command.environment.emplace_back("FRONTIER_CPUS", FormatCpuList(cpus));
  if (options_.memory_limit_mb > 0) {
    command.environment.emplace_back("FRONTIER_MEMORY_LIMIT_MB", std::to_string(options_.memory_limit_mb));
  }
  std::remove(launch.stop_file.c_str());
  if (options_.device == DeviceKind::kCuda) {
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
  if (options_.device == DeviceKind::kCuda) {
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
                       options_.device == DeviceKind::kCuda ? gpu
                       : cpus.empty()            ? UsableCpus()
                                                 : cpus,
                       options_.device == DeviceKind::kCuda ? ".gpu" : ".cpu");
  // The peaks at the trial's thread count, measured now on its claimed cores if no calibration had them.
  const std::string precision = StringField(runtime, "precision");
  const std::string peaks =
      PeaksFor(precision.empty() ? "fp32" : precision, ThreadsField(runtime, "threads"), cpus);
  if (!peaks.empty()) command.environment.emplace_back("FRONTIER_PEAK_FLOPS", peaks);
  std::string error;
  if (plan.ranks > 1 && options_.rank_launcher != "srun") {
    plan.rendezvous_file = std::filesystem::absolute(spec_path + ".rendezvous", ignored).string();
    std::remove(plan.rendezvous_file.c_str());
  }
  std::unique_ptr<TrialProcess> process = StartRanks(*launcher_, options_, command, plan, cpus, &error);
  const bool started = process != nullptr;
  Outcome outcome = started ? Supervise(lease, launch, *process)
                            : Outcome{Outcome::Kind::kFail, error, /*retryable=*/true, ""};
  if (started) ClassifyOutOfMemory(*process, &outcome);
  outcome.result_json = WithProfile(outcome.result_json, wrapping);
  // A command trial's profile, recorded by the SDK, summarized and judged by frontier-trial's rules.
  if (spec.contains("command") && !outcome.result_json.empty()) {
    outcome.result_json = WithSummarizedProfile(outcome.result_json, artifacts);
  }
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

std::string DetectDeviceName(DeviceKind device) {
  if (device == DeviceKind::kCuda) {
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
