// Whether a failed attempt is run again (docs/worker.md#retries). The worker
// says what it saw (retryable: a crash, a time-out, a Python exception, a
// worker shutting down; final: a bad spec, out of memory, a wrong output);
// the coordinator, which knows the attempts before it and the space, decides:
// - a time-out is final unless the space sets retry_timeouts (another
//   attempt of a trial that ran out of time usually runs out of it again);
// - a failure whose text is the previous attempt's (the same exception with
//   the same traceback, on the same seed: a bug, not bad luck) is final after
//   that one retry;
// - otherwise a retryable failure runs again while attempts remain.
#pragma once

#include <string>

namespace frontier {

struct FailedAttempt {
  std::string error;           // as the worker reported it
  bool retryable = true;       // the worker's view
  std::string error_kind;      // the result's error_kind, "" without a result ("timeout" for a time-out)
  int attempt = 1;             // this attempt, 1-based
  int max_attempts = 3;
  std::string previous_error;  // the previous attempt's error; "" on the first
  bool retry_timeouts = false;  // the space's retry_timeouts
};

struct RetryDecision {
  bool retry = false;  // leased again
  bool retryable = false;  // what the store is told (false: failed for good now)
  std::string error;   // the error stored: the worker's, with why it is final when the policy made it so
};

RetryDecision DecideRetry(const FailedAttempt& failed);

}  // namespace frontier
