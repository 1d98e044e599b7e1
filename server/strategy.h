// Search strategies as ask/tell: a strategy proposes configurations (with a
// fidelity, the step budget) and is told the outcome of each trial. Its state
// is rebuilt from the trials already stored, so a restarted coordinator
// continues where it was.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"

namespace frontier {

struct Proposal {
  Config config;
  int steps = 0;  // fidelity
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  // Up to `max` configurations to run next (each at every seed). Empty when
  // there is nothing to propose now (finished, or waiting for outcomes).
  virtual std::vector<Proposal> Ask(size_t max) = 0;
  // The outcome of one trial: its state ("completed", "diverged", "failed",
  // ...) and the result JSON (null when there is none).
  virtual void Tell(const Config& config, int steps, const std::string& state, const nlohmann::json& result) = 0;
  // True when Ask will never propose anything again.
  virtual bool Finished() const = 0;
};

// The space's strategy over `candidates` (the runnable, non-baseline
// configurations, in grid order), skipping the configurations already
// proposed (by ConfigKey). grid: every candidate; random: `trials` of them
// (all when 0) in an order drawn from the strategy's seed.
// Throws SpaceError for a strategy this build does not have.
std::unique_ptr<Strategy> MakeStrategy(const SearchSpace& space, const std::vector<Config>& candidates,
                                       const std::vector<Config>& already_proposed);

}  // namespace frontier
