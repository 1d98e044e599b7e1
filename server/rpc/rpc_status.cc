#include "server/rpc/rpc_status.h"

namespace frontier {

std::string TransitionReason(Transition t) {
  switch (t) {
    case Transition::kApplied:
      return "";
    case Transition::kDuplicate:
      return "already recorded for this attempt";
    case Transition::kStale:
      return "stale attempt: the trial's lease was lost or it already ended";
    case Transition::kNotFound:
      return "unknown trial";
  }
  return "";
}

}  // namespace frontier
