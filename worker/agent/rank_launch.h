// How the agent starts a data-parallel trial's ranks (docs/distributed.md):
// how many a spec asks for, the threads each local rank gets, and the start
// itself, as AgentOptions::rank_launcher says. Local ranks are one
// frontier-trial per rank on this host, each with its rank, the world size
// and a FileStore rendezvous in its environment, on its share of the slot's
// cores (cuda: rank r on visible_devices[r]), supervised together as one
// RankGroup; srun ranks are one child `srun ... frontier-trial ...` that
// meets at a TCPStore on rank 0's node. A profiler wraps rank 0 only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "worker/agent/agent.h"
#include "worker/agent/trial_process.h"

namespace frontier {

// A data-parallel trial's ranks and the nodes they span (runtime.ranks/nodes).
struct RankPlan {
  int ranks = 1;
  int nodes = 1;
  std::string rendezvous_file;  // the local launcher's FileStore, removed after the trial
};

// spec.runtime[field] ("ranks" or "nodes") when it is a whole number from 1
// to 1024, else 1 (frontier-trial fails a bad value with its path).
int RanksOf(const nlohmann::json& spec, const char* field = "ranks");

// The threads of each of `ranks` local ranks: the smallest share of `cpus`
// (empty: the ones this process may use) split over them, at least 1 (one
// spec serves every rank).
size_t ThreadsPerRank(const std::vector<int>& cpus, int ranks);

// `command` as one process, or (plan.ranks > 1) its ranks as one RankGroup
// or one srun child, started by `launcher`; nullptr and *error when none
// could start (the local ranks started so far are killed).
std::unique_ptr<TrialProcess> StartRanks(TrialLauncher& launcher, const AgentOptions& options,
                                         const TrialCommand& command, const RankPlan& plan,
                                         const std::vector<int>& cpus, std::string* error);

}  // namespace frontier
