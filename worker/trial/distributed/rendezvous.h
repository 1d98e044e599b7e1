// Where the ranks of one data-parallel trial meet (docs/distributed.md).
// Torch-free: the worker that starts the rank processes and the ranks
// themselves read the same environment.
#pragma once

#include <optional>
#include <string>

#include "search_spaces/runtime_kinds.h"

namespace frontier::distributed {

struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  // "tcp://HOST:PORT" (a c10d TCPStore served by rank 0 on HOST:PORT) or
  // "file:///ABSOLUTE/PATH" (a c10d FileStore on a file every rank sees).
  std::string store;
  // The Gloo transport: a network interface name (GLOO_SOCKET_IFNAME), else a
  // host name or address to bind (e.g. 127.0.0.1), else Gloo's default device
  // (this host's name resolved).
  std::string interface;
  std::string hostname;
  // Bound on the rendezvous (every rank joined) and on every collective; a
  // rank that died or stopped answering fails the others after at most this.
  double timeout_s = 300;
};

// The rendezvous of this process from its environment, first match wins:
//   FRONTIER_RANK, FRONTIER_WORLD_SIZE, FRONTIER_RENDEZVOUS (tcp:// or file://)
//   RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT   (torchrun, Kubernetes)
//   SLURM_PROCID, SLURM_NTASKS, MASTER_ADDR, MASTER_PORT   (srun)
// plus FRONTIER_DIST_TIMEOUT_S, FRONTIER_GLOO_IFNAME or GLOO_SOCKET_IFNAME,
// FRONTIER_GLOO_HOSTNAME. nullopt and an empty *problem when none is set (a
// single-rank trial); nullopt and the reason in *problem when what is set is
// incomplete or invalid.
std::optional<Rendezvous> RendezvousFromEnvironment(std::string* problem);

// "" when the rendezvous can be used, else what is wrong with it.
std::string CheckRendezvous(const Rendezvous& rendezvous);

// How the global batch is shared (BatchPolicy, search_spaces/runtime_kinds.h).
// kSplitGlobal: the spec's batch size is the global batch B and rank r trains
// on rows [begin, begin+count) of it (the first B mod N ranks take one row
// more), so the optimizer sees the same batch at any rank count.
// kFixedPerRank: the spec's batch size is each rank's batch and the global
// batch is N times it. Under both, rank r's rows are [begin, begin+count) of
// the step's global batch (Shard::global rows drawn the same way on every
// rank), so the ranks together train on exactly the global batch.
using frontier::BatchPolicy;

struct Shard {
  long long begin = 0;   // first row of this rank in the step's global batch
  long long count = 0;   // rows this rank trains on
  long long global = 0;  // rows all ranks train on together in one step
  // What this rank's gradient is multiplied by before the ranks' gradients
  // are summed: count / global, so the sum is the gradient of the mean loss
  // over the global batch (for a loss that is a mean over its rows).
  double weight = 1;
};

// Throws std::invalid_argument when batch < world_size under kSplitGlobal
// (a rank would have no rows), batch < 1, or rank is outside [0, world_size).
Shard ShardOf(long long batch, int rank, int world_size, BatchPolicy policy);

}  // namespace frontier::distributed
