// Strategy `external`: the configurations come from a proposer outside the
// coordinator (the Proposer API, proto/frontier/v1/proposer.proto;
// docs/proposers.md). This side is gRPC-free: the strategy talks to a
// ProposerClient (server/proposer/ implements it over gRPC, tests with
// fakes), asks it in a background thread so that Ask never blocks the
// scheduler, validates every proposal (every choice exists, not proposed
// before, not the baseline, fidelity the task's steps, a valid trial spec)
// and tells the rejected ones, with the reason, in the next call. A proposer
// that is down, past its deadline, or that answers only invalid proposals
// pauses the search (Paused() says why) until an answer brings a valid one;
// so does, at once, an answer that says the proposer cannot propose (its
// `error`: a language model that is down or refuses the key). A proposal a
// proposer drew as a fallback is labelled so (FallbackProposer).
// Its state comes from the stored proposals and outcomes (Restore), so a
// proposer may be stateless and a coordinator may restart.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "search_spaces/search_space.h"
#include "server/search/strategy.h"

namespace frontier {

// A configuration as a proposer names it: dimension name -> choice index.
using Choices = std::map<std::string, int>;

// The choice indices of a configuration of `space` (a dimension it leaves
// out at the baseline's value); a dimension whose value is no choice is left
// out.
Choices ChoicesOf(const SearchSpace& space, const Config& config);

// A proposal with its outcome once every seed of it ended.
struct ToldProposal {
  Proposal proposal;
  std::optional<Evaluation> evaluation;
};

struct ProposerRejection {
  Choices choices;
  std::string reason;
};

// What the strategy asks a proposer: the whole search state.
struct ProposerCall {
  std::string experiment_id;
  int count = 0;
  std::optional<Evaluation> baseline;
  std::vector<ToldProposal> proposals;  // every accepted proposal, in order; evaluation set once told
  std::vector<ProposerRejection> rejections;  // of the previous call
  int max_configs = 0;  // the strategy's `trials`: accepted configurations at most (0: no limit)
};

struct ProposedChoices {
  Choices choices;
  std::string rationale;
  int steps = 0;  // 0: the task's steps
  std::string fallback;  // not empty: drawn by this stand-in, not the proposer's method ("random")
};

struct ProposerUsage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int model_calls = 0;
  int64_t model_latency_ms = 0;
};

struct ProposerAnswer {
  std::vector<ProposedChoices> configs;
  bool finished = false;
  std::string proposer;  // who proposes ("optuna:tpe"); empty: "external"
  ProposerUsage usage;
  // Not empty: why the proposer could not propose as asked (its model failed);
  // with nothing accepted the search pauses at once with it.
  std::string error;
};

// The proposer of a configuration a proposer drew with a fallback:
// "fallback:random (llm:qwen)". Stored with its trials, so the report, its
// counts and its CSV/JSON tell it from the proposer's own choices.
constexpr const char* kFallbackProposerPrefix = "fallback:";
std::string FallbackProposer(const std::string& proposer, const std::string& fallback);
bool IsFallbackProposer(const std::string& proposer);

// The proposer could not answer (unreachable, deadline, refused, an answer
// it could not read). what() says so, for the paused status.
class ProposerUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ProposerClient {
 public:
  virtual ~ProposerClient() = default;
  // One call. Throws ProposerUnavailable. Called from one thread at a time.
  virtual ProposerAnswer Propose(const ProposerCall& call) = 0;
  // Ends a Propose in flight soon (from another thread); later calls may fail.
  virtual void Cancel() = 0;
  // Where the proposer is, for messages: "127.0.0.1:50070".
  virtual std::string Where() const = 0;
};

struct ExternalOptions {
  int batch = 4;                 // proposals kept in flight (proposed and not told)
  int trials = 0;                // at most this many accepted configurations (0: until the proposer finishes)
  int max_invalid_answers = 3;   // answers in a row without a valid proposal before pausing
  int64_t retry_ms = 1000;       // the first wait after a failed or fruitless call, doubling ...
  int64_t max_retry_ms = 30000;  // ... up to this
};

// A proposal of the proposer's answer checked against the space: the
// configuration with every dimension set, or why it is rejected.
// `proposed`: the ConfigKeys proposed before. `full_steps`: the task's steps.
struct CheckedProposal {
  std::optional<Config> config;
  std::string reason;
};
CheckedProposal CheckProposal(const SearchSpace& space, const ProposedChoices& proposed, int full_steps,
                              const std::function<bool(const std::string& config_key)>& proposed_before);

// The external strategy over `client`; `seed` and the rest from the space.
std::unique_ptr<Strategy> MakeExternalStrategy(const SearchSpace& space, int steps,
                                               std::unique_ptr<ProposerClient> client, ExternalOptions options);

}  // namespace frontier
