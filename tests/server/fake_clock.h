// A Clock the test sets by hand, for the scheduler's and the coordinator's
// tests. `now` is atomic: the coordinator's threads read it while the test
// moves it.
#pragma once

#include <atomic>
#include <cstdint>

#include "proto/clock.h"

namespace frontier {

class FakeClock final : public Clock {
 public:
  int64_t NowMs() override { return now; }
  std::atomic<int64_t> now{1'000'000};
};

}  // namespace frontier
