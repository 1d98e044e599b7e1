#include "server/scheduler/retry_policy.h"

namespace frontier {

RetryDecision DecideRetry(const FailedAttempt& failed) {
  RetryDecision decision;
  decision.error = failed.error;
  decision.retryable = failed.retryable;
  if (failed.retryable && failed.error_kind == "timeout" && !failed.retry_timeouts) {
    decision.retryable = false;
    decision.error += " (final: time-outs are not retried unless the space sets retry_timeouts: true)";
  } else if (failed.retryable && failed.attempt > 1 && !failed.error.empty() &&
             failed.error == failed.previous_error && failed.error != "worker shutting down") {
    decision.retryable = false;
    decision.error += " (final: attempt " + std::to_string(failed.attempt - 1) + " failed the same way)";
  }
  decision.retry = decision.retryable && failed.attempt < failed.max_attempts;
  return decision;
}

}  // namespace frontier
