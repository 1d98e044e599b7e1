#include "worker/trial/distributed/trial_ranks.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

namespace frontier::distributed {

TrialRanks ConnectRanks(int ranks, long long batch, BatchPolicy policy, bool cuda) {
  TrialRanks r;
  r.shard = ShardOf(batch, 0, 1, policy);
  if (ranks == 1) return r;
  std::string problem;
  const std::optional<Rendezvous> rendezvous = RendezvousFromEnvironment(&problem);
  if (!rendezvous) {
    throw DistributedError(!problem.empty()
                               ? problem
                               : "runtime.ranks is " + std::to_string(ranks) +
                                     " but this process has no rendezvous in its environment (FRONTIER_RANK, "
                                     "FRONTIER_WORLD_SIZE and FRONTIER_RENDEZVOUS, or torchrun's or srun's "
                                     "variables): frontier-worker starts a trial's ranks (docs/distributed.md)");
  }
  if (rendezvous->world_size != ranks) {
    throw DistributedError("runtime.ranks is " + std::to_string(ranks) + " but the environment says " +
                           std::to_string(rendezvous->world_size) + " ranks");
  }
  r.rank = rendezvous->rank;
  r.group = ProcessGroup::Connect(*rendezvous, cuda ? Backend::kNccl : Backend::kGloo);
  r.shard = ShardOf(batch, r.rank, ranks, policy);
  return r;
}

GatheredFigures GatherRankFigures(ProcessGroup& group, const RankFigures& mine) {
  const std::vector<double> values = {mine.step_s,         mine.allreduce_s, mine.exposed_s,
                                      mine.unpack_s,       mine.samples_per_s, mine.mfu,
                                      mine.peak_memory_mb, static_cast<double>(mine.rows_per_step)};
  const std::vector<std::vector<double>> ranks = group.AllGather(values, "the ranks' figures");
  GatheredFigures out;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::vector<double>& f = ranks[r];
    out.allreduce_s = std::max(out.allreduce_s, f[1]);
    out.exposed_s = std::max(out.exposed_s, f[2]);
    out.per_rank.push_back({{"rank", r},
                            {"step_time_ms", f[0] * 1e3},
                            {"allreduce_ms", f[1] * 1e3},
                            {"exposed_ms", f[2] * 1e3},
                            {"unpack_ms", f[3] * 1e3},
                            {"samples_per_s", f[4]},
                            {"mfu", f[5]},
                            {"peak_memory_mb", f[6]},
                            {"rows_per_step", static_cast<int64_t>(f[7])}});
  }
  return out;
}

}  // namespace frontier::distributed
