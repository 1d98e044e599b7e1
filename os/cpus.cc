#include "os/cpus.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace frontier {

std::vector<int> UsableCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  if (cpus.empty()) {
    const unsigned n = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned cpu = 0; cpu < n; ++cpu) cpus.push_back(static_cast<int>(cpu));
  }
  return cpus;
}

}  // namespace frontier
