// The clock the code times intervals with: std::chrono::steady_clock (never
// goes back, unaffected by wall-clock changes), and seconds and milliseconds
// between two of its points. One alias for the whole tree, so that a file
// does not declare its own (`Clock` is the injected wall clock of
// proto/clock.h, `SteadyClock` its monotonic implementation for the agent's
// timers). Header-only.
#pragma once

#include <chrono>

namespace frontier {

using Monotonic = std::chrono::steady_clock;

inline double SecondsBetween(Monotonic::time_point from, Monotonic::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}
inline double SecondsSince(Monotonic::time_point from) { return SecondsBetween(from, Monotonic::now()); }
inline double MillisecondsSince(Monotonic::time_point from) { return SecondsSince(from) * 1e3; }

}  // namespace frontier
