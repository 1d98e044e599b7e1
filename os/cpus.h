// The CPUs this process may run on: its affinity mask (sched_getaffinity),
// which a cgroup, taskset or Slurm may have narrowed; all the machine's when
// the mask cannot be read. The worker places its slots and ranks on them
// (worker/agent/placement.h); `frontier run` shares them between its local
// workers (server/cli/local_cluster.cc).
#pragma once

#include <vector>

namespace frontier {

// In increasing order; never empty.
std::vector<int> UsableCpus();

}  // namespace frontier
