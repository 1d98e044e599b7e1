#include "server/strategy.h"

#include <algorithm>
#include <random>
#include <set>

namespace frontier {
namespace {

// Proposes a fixed list once, in order. Grid and random differ only in the list.
class FixedListStrategy final : public Strategy {
 public:
  FixedListStrategy(std::vector<Config> configs, int steps) : steps_(steps) {
    for (Config& c : configs) pending_.push_back({std::move(c), steps_});
  }

  std::vector<Proposal> Ask(size_t max) override {
    const size_t n = std::min(max, pending_.size() - next_);
    std::vector<Proposal> out(pending_.begin() + next_, pending_.begin() + next_ + n);
    next_ += n;
    return out;
  }

  void Tell(const Config&, int, const std::string&, const nlohmann::json&) override {}

  bool Finished() const override { return next_ == pending_.size(); }

 private:
  int steps_;
  std::vector<Proposal> pending_;
  size_t next_ = 0;
};

}  // namespace

std::unique_ptr<Strategy> MakeStrategy(const SearchSpace& space, const std::vector<Config>& candidates,
                                       const std::vector<Config>& already_proposed) {
  std::vector<Config> order = candidates;
  const std::string& name = space.strategy.name;
  if (name == "random") {
    std::mt19937_64 rng(static_cast<uint64_t>(space.strategy.seed));
    std::shuffle(order.begin(), order.end(), rng);
    if (space.strategy.trials > 0 && static_cast<size_t>(space.strategy.trials) < order.size()) {
      order.resize(static_cast<size_t>(space.strategy.trials));
    }
  } else if (name != "grid") {
    throw SpaceError(space.source, 0, "strategy.name", "unknown strategy '" + name + "'; expected one of grid, random");
  }
  std::set<std::string> seen;
  for (const Config& c : already_proposed) seen.insert(ConfigKey(c));
  std::vector<Config> remaining;
  for (Config& c : order) {
    if (!seen.count(ConfigKey(c))) remaining.push_back(std::move(c));
  }
  const int steps = MakeTrialSpec(space, Config::object(), 1, "").task.steps;
  return std::make_unique<FixedListStrategy>(std::move(remaining), steps);
}

}  // namespace frontier
