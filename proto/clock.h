// Time source of the coordinator, injected so that scheduler tests control it.
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
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace frontier
