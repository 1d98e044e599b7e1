#include "worker/agent/rank_launch.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <utility>

#include <spdlog/fmt/fmt.h>

#include "worker/agent/placement.h"
#include "worker/agent/rank_group.h"
#include "worker/host.h"
#include "os/cpus.h"

namespace frontier {

using nlohmann::json;

int RanksOf(const json& spec, const char* field) {
  const json runtime = spec.value("runtime", json::object());
  const json ranks = runtime.is_object() ? runtime.value(field, json(1)) : json(1);
  return ranks.is_number_integer() && ranks.get<int64_t>() >= 1 && ranks.get<int64_t>() <= 1024
             ? ranks.get<int>()
             : 1;
}

size_t ThreadsPerRank(const std::vector<int>& cpus, int ranks) {
  const SlotCpus split = SplitCpus(cpus.empty() ? UsableCpus() : cpus, ranks);
  size_t fewest = split.slots.empty() ? 1 : split.slots[0].size();
  for (const auto& group : split.slots) fewest = std::min(fewest, group.size());
  return std::max<size_t>(1, fewest);
}

std::unique_ptr<TrialProcess> StartRanks(TrialLauncher& launcher, const AgentOptions& options,
                                         const TrialCommand& command, const RankPlan& plan,
                                         const std::vector<int>& cpus, std::string* error) {
  if (plan.ranks <= 1) return launcher.Start(command, error);
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
  if (options.rank_launcher == "srun") {
    // srun starts the tasks (SLURM_PROCID, SLURM_NTASKS) across the allocation, task 0 on its first
    // node, where this worker runs; its standard output is rank 0's.
    int port = 0;
    try {
      port = FreeTcpPort("0.0.0.0");  // rank 0's TCPStore listens on every interface
    } catch (const std::exception& e) {
      *error = std::string("no TCP port for the ranks' rendezvous: ") + e.what();
      return nullptr;
    }
    const std::string host = options.rendezvous_host.empty() ? HostName() : options.rendezvous_host;
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
    return launcher.Start(srun, error);
  }
  const SlotCpus split = SplitCpus(cpus.empty() ? UsableCpus() : cpus, plan.ranks);
  std::vector<std::string> gpus = options.visible_devices;
  for (int g = static_cast<int>(gpus.size()); g < plan.ranks && options.visible_devices.empty(); ++g) {
    gpus.push_back(std::to_string(g));
  }
  if (options.device == DeviceKind::kCuda && static_cast<int>(gpus.size()) < plan.ranks) {
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
    if (options.device == DeviceKind::kCuda) variables.emplace_back("CUDA_VISIBLE_DEVICES", gpus[r]);
    TrialCommand rank = with(command, variables);
    if (options.device != DeviceKind::kCuda) {
      rank.cpus = split.slots[r];
      rank = with(rank, {{"FRONTIER_CPUS", FormatCpuList(rank.cpus)}});
    }
    // The trial's limit, shared (never 0, which would mean none).
    if (command.memory_limit_mb > 0)
      rank.memory_limit_mb = std::max<int64_t>(1, command.memory_limit_mb / plan.ranks);
    if (r > 0) rank.wrapper.clear();  // a profiler wraps rank 0 only
    rank.exec = true;  // each rank's environment stays in /proc/PID/environ, where tools find a rank
    std::unique_ptr<TrialProcess> process = launcher.Start(rank, error);
    if (!process) {
      *error = fmt::format("rank {} of {}: {}", r, plan.ranks, *error);
      return nullptr;  // the ranks started so far are killed with their processes
    }
    ranks.push_back(std::move(process));
  }
  return std::make_unique<RankGroup>(std::move(ranks));
}

}  // namespace frontier
