// The trial rows the scheduler creates and reads (search_state.h): a
// configuration's seeds, the screening trials, who proposed them, a stored
// trial as a strategy or early stopping sees it.
#include "server/scheduler/search_state.h"

#include "search_spaces/trial_spec.h"

namespace frontier {
namespace scheduling {

// Trials of one configuration at one fidelity form a group: its seeds.
std::string GroupKey(const std::string& config_key, int steps) {
  return config_key + "@" + std::to_string(steps);
}

// The trials of `config` at `steps`, one per seed first_seed..last_seed.
std::vector<TrialRow> TrialRows(const SearchSpace& space, const Config& config, int steps, int first_seed,
                                int last_seed) {
  std::vector<TrialRow> rows;
  for (int seed = first_seed; seed <= last_seed; ++seed) {
    TrialSpec spec = MakeTrialSpec(space, config, seed, "");
    spec.task.steps = steps;
    // Latency is the configuration's, not the seed's: seed 1 measures it (SearchSpace::latency_every_seed).
    if (seed > 1 && !space.latency_every_seed) spec.latency.repetitions = 0;
    if (seed > 1 && !space.profile_every_seed) spec.profile = ProfileSpec{/*steps=*/0};  // and so is its profile
    TrialRow row;
    row.config_json = ConfigKey(config);
    row.is_baseline = IsBaseline(space, config);
    row.seed = seed;
    row.steps = steps;
    row.max_attempts = space.max_attempts;
    row.spec_json = ToJson(spec).dump();
    rows.push_back(std::move(row));
  }
  return rows;
}

// Who proposed the trials' configuration and why (docs/proposers.md): an
// external proposer's name and rationale, else the strategy's name.
void Label(std::vector<TrialRow>& rows, const SearchSpace& space, const Proposal& proposal) {
  for (TrialRow& row : rows) {
    row.proposer = proposal.proposer.empty() ? space.strategy.name : proposal.proposer;
    row.rationale = proposal.rationale;
  }
}

TrialOutcome OutcomeOf(const TrialRow& row) {
  TrialOutcome outcome;
  outcome.seed = row.seed;
  outcome.state = row.state;
  outcome.error = row.error;
  if (!row.result_json.empty()) {
    outcome.result = nlohmann::json::parse(row.result_json, nullptr, /*allow_exceptions=*/false);
    if (outcome.result.is_discarded()) outcome.result = nullptr;
  }
  return outcome;
}

// The screening trials (docs/strategies.md#screening): the baseline's first,
// the yardstick, then one per runnable configuration of the grid, each one
// seed at screen.steps; `skipped` gets the configurations that cannot run.
std::vector<TrialRow> ScreeningRows(const SearchSpace& space, std::vector<std::string>& skipped) {
  std::vector<Config> configs = {Config::object()};
  for (Config& config : EnumerateGrid(space, kMaxScreenedConfigs)) {
    if (IsBaseline(space, config)) continue;
    if (const std::optional<std::string> why = WhyInvalid(space, config)) {
      const std::string entry = ConfigKey(config) + ": " + *why;
      if (std::find(skipped.begin(), skipped.end(), entry) == skipped.end()) skipped.push_back(entry);
      continue;
    }
    configs.push_back(std::move(config));
  }
  std::vector<TrialRow> rows;
  for (const Config& config : configs) {
    TrialRow row;
    row.config_json = ConfigKey(config);
    row.is_baseline = IsBaseline(space, config);
    row.seed = 1;
    row.steps = space.screen.steps;
    row.max_attempts = space.max_attempts;
    row.spec_json = ToJson(ScreeningSpec(space, config)).dump();
    row.proposer = kScreenProposer;
    rows.push_back(std::move(row));
  }
  return rows;
}

RunningTrial RunningTrialOf(const TrialRow& row) {
  RunningTrial trial;
  trial.trial_id = row.id;
  trial.config_key = row.config_json;
  trial.seed = row.seed;
  trial.is_baseline = row.is_baseline;
  const nlohmann::json spec = nlohmann::json::parse(row.spec_json, nullptr, /*allow_exceptions=*/false);
  if (spec.is_object() && spec.contains("task")) trial.batch_size = spec["task"].value("batch_size", 0);
  return trial;
}


}  // namespace scheduling
}  // namespace frontier
