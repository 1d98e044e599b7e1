// Asynchronous successive halving (ASHA; Li et al., "A system for massively
// parallel hyperparameter tuning", 2020) as an early-stopping rule over the
// step budget, with multi-objective promotion. Pure: results in, decisions out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "server/analysis/pareto.h"

namespace frontier {

struct AshaOptions {
  int min_steps = 1;  // the first rung
  int eta = 3;        // reduction factor: about 1 in eta configurations passes a rung
  int max_steps = 1;  // full fidelity: a trial that passes every rung runs to here
};

// The rungs: min_steps * eta^k for k = 0, 1, ... while below max_steps.
// Throws std::invalid_argument unless min_steps >= 1 and eta >= 2.
std::vector<int> AshaRungs(const AshaOptions& options);

struct StopDecision {
  bool stop = false;
  std::string reason;  // why, when stopping
};

// Decides, each time a trial reaches a rung, whether it goes on. Trials are
// grouped by configuration (its seeds): a configuration's fitness at a rung
// is the mean over the seeds reported there so far (objectives averaged,
// violation averaged). The first seed of a configuration to reach a rung
// decides for all its seeds: with n configurations reported at that rung
// (this one included), ordered by RankOrder (front under
// constraint-domination, then crowding distance, then arrival at the rung),
// it continues when among the first max(1, floor(n / eta)), or when it is
// an extreme of the first front (feasible, front 0, infinite crowding
// distance: the best at the rung in some objective), so that the quota never
// picks between the front's ends by arrival; later seeds of the
// configuration get the same decision. The first configuration at a rung
// always continues, so the rule never starves the queue. Only
// configurations at the same rung are ever compared: equal fidelity.
// Deterministic given the sequence of reports; replaying a history rebuilds
// the same state.
class AshaStopper {
 public:
  explicit AshaStopper(AshaOptions options);

  const std::vector<int>& rungs() const { return rungs_; }

  // A trial of `config` at `seed` reached `step` with `fitness` measured
  // there. Steps that are not rungs continue without being recorded.
  // `may_stop` false (the baseline) records the fitness and always continues.
  // A seed that reports a rung again (a retried attempt) replaces its fitness.
  StopDecision Report(const std::string& config, int64_t seed, int step, const Fitness& fitness,
                      bool may_stop);

  // The decision for `config` at rung `step`: nullopt until a seed of it
  // reported there.
  std::optional<StopDecision> Decision(const std::string& config, int step) const;
  // The decision that stopped `config` at its lowest rung where one did:
  // every seed of it stops there, so a seed below that rung can stop at once.
  // nullopt while no rung stopped it.
  std::optional<StopDecision> Stopped(const std::string& config) const;

 private:
  struct Entry {
    std::string config;
    std::map<int64_t, Fitness> seeds;
    StopDecision decision;
  };
  struct Rung {
    std::vector<Entry> entries;  // in order of arrival
    std::map<std::string, size_t> index;
  };

  AshaOptions options_;
  std::vector<int> rungs_;
  std::map<int, Rung> by_step_;
};

}  // namespace frontier
