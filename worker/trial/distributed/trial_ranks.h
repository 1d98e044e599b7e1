// A data-parallel trial's ranks as its runner sees them (docs/distributed.md):
// this process's place among them, and every rank's figures gathered at the
// end for rank 0's result.
#pragma once

#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "worker/trial/distributed/data_parallel.h"

namespace frontier::distributed {

struct TrialRanks {
  int rank = 0;
  Shard shard;                          // this rank's rows of each global batch
  std::unique_ptr<ProcessGroup> group;  // null with one rank
};

// With `ranks` > 1: this process's rank from its environment (the worker,
// srun or torchrun set it), the process group (NCCL with `cuda`, Gloo
// otherwise), this rank's rows of each global batch of `batch` rows. With one
// rank: the whole batch. Throws DistributedError naming what is missing or
// does not match.
TrialRanks ConnectRanks(int ranks, long long batch, BatchPolicy policy, bool cuda);

// One rank's medians over the measured steps, seconds.
struct RankFigures {
  double step_s = 0;  // this rank's own
  double allreduce_s = 0;
  double exposed_s = 0;
  double unpack_s = 0;
  double samples_per_s = 0;
  double mfu = 0;
  double peak_memory_mb = 0;
  int64_t rows_per_step = 0;
};

struct GatheredFigures {
  double allreduce_s = 0;  // the largest rank's
  double exposed_s = 0;    // the largest rank's
  nlohmann::json per_rank = nlohmann::json::array();  // [{rank, step_time_ms, allreduce_ms, ...}]
};

// Every rank's figures, rank by rank (a collective: every rank calls it).
GatheredFigures GatherRankFigures(ProcessGroup& group, const RankFigures& mine);

}  // namespace frontier::distributed
