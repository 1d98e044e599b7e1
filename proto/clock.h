// Time sources, injected so that tests control them.
//  Clock: wall-clock Unix milliseconds, the coordinator's (lease expiry,
//         timestamps in the store); SystemClock in production.
//  MonotonicClock: milliseconds from an arbitrary origin that never go back,
//         the worker agent's timers (heartbeats, trial timeouts, drain
//         deadline, progress throttling); SteadyClock in production.
// Header-only and thread-safe.
#pragma once

#include <chrono>
#include <cstdint>

namespace frontier {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;  // Unix milliseconds
};

class SystemClock final : public Clock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

class MonotonicClock {
 public:
  virtual ~MonotonicClock() = default;
  virtual int64_t NowMs() = 0;  // milliseconds since an arbitrary origin; never decreases
};

class SteadyClock final : public MonotonicClock {
 public:
  int64_t NowMs() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace frontier
