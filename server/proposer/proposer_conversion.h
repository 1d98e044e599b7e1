// The external strategy's calls (server/search/external.h) as messages of
// the Proposer API (proto/frontier/v1/proposer.proto) and back. Outcomes
// carry what the report uses: the means over completed seeds of the
// objectives and constrained metrics (MetricOf), the constraint violation
// (FitnessOf) and the status.
#pragma once

#include "frontier/v1/proposer.pb.h"
#include "server/search/external.h"

namespace frontier {

// The request for `call` on `space`, each trial at `steps`.
v1::ProposeRequest ToProposeRequest(const SearchSpace& space, const ProposerCall& call, int steps);

// How one evaluation ended, as the proposer is told it.
v1::ProposerOutcome ToProposerOutcome(const SearchSpace& space, const Evaluation& evaluation,
                                      const std::string& proposer, const std::string& rationale);

// The answer in the strategy's terms; at most `max_configs` configurations
// are read (the rest are dropped: the strategy asked for fewer).
ProposerAnswer FromProposeResponse(const v1::ProposeResponse& response, size_t max_configs);

}  // namespace frontier
