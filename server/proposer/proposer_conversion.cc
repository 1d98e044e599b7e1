#include "server/proposer/proposer_conversion.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "search_spaces/metric_catalog.h"

namespace frontier {
namespace {

using nlohmann::json;

v1::ProposerConfig ToConfig(const Choices& choices) {
  v1::ProposerConfig config;
  for (const auto& [name, index] : choices) (*config.mutable_choices())[name] = index;
  return config;
}

// How one seed ended, as told: its state, except a failed seed whose
// program found its own output wrong (error_kind incorrect,
// docs/trial-protocol.md), which is told as incorrect.
std::string SeedStatus(const TrialOutcome& trial) {
  if (trial.state == "failed" && trial.result.is_object() && trial.result.contains("error_kind") &&
      trial.result["error_kind"] == "incorrect") {
    return "incorrect";
  }
  return trial.state;
}

// The status of a configuration: incorrect when a seed found its output
// wrong (the figures of the others measure a wrong computation), else
// completed when a seed completed, else the status most of its seeds ended
// with (the first of them on a tie).
std::string StatusOf(const Evaluation& evaluation) {
  std::map<std::string, int> count;
  std::string most;
  bool completed = false;
  for (const TrialOutcome& trial : evaluation.trials) {
    const std::string status = SeedStatus(trial);
    if (status == "incorrect") return status;
    completed = completed || status == "completed";
    if (++count[status] > (most.empty() ? 0 : count[most])) most = status;
  }
  if (completed) return "completed";
  return most.empty() ? "failed" : most;
}

}  // namespace

v1::ProposerOutcome ToProposerOutcome(const SearchSpace& space, const Evaluation& evaluation,
                                      const std::string& proposer, const std::string& rationale) {
  v1::ProposerOutcome outcome;
  *outcome.mutable_config() = ToConfig(ChoicesOf(space, evaluation.config));
  outcome.set_status(StatusOf(evaluation));
  int completed = 0;
  std::set<std::string> reasons;
  for (const TrialOutcome& trial : evaluation.trials) {
    if (trial.state == "completed" && trial.result.is_object()) {
      ++completed;
    } else if (trial.state != "completed") {
      const std::string status = SeedStatus(trial);
      reasons.insert(trial.error.empty() ? status : status + ": " + trial.error.substr(0, 500));
    }
  }
  std::set<std::string> metrics;
  for (const Objective& o : space.objectives) metrics.insert(o.metric);
  for (const Constraint& c : space.constraints) metrics.insert(c.metric);
  for (const std::string& metric : metrics) {
    if (std::optional<double> mean = CompletedMean(evaluation, metric)) (*outcome.mutable_metrics())[metric] = *mean;
  }
  outcome.set_violation(FitnessOf(space, evaluation).violation);
  outcome.set_seeds(static_cast<int>(evaluation.trials.size()));
  outcome.set_seeds_completed(completed);
  std::string reason;
  for (const std::string& r : reasons) reason += (reason.empty() ? "" : "; ") + r;
  outcome.set_reason(reason);
  outcome.set_proposer(proposer);
  outcome.set_rationale(rationale);
  return outcome;
}

v1::ProposeRequest ToProposeRequest(const SearchSpace& space, const ProposerCall& call, int steps) {
  v1::ProposeRequest request;
  request.set_experiment_id(call.experiment_id);
  request.set_experiment_name(space.name);
  const Choices baseline = ChoicesOf(space, json::object());
  for (const Dimension& dim : space.dimensions) {
    v1::ProposerDimension* d = request.add_dimensions();
    d->set_name(dim.name);
    for (const json& choice : dim.choices) d->add_choices_json(choice.dump());
    d->set_ordinal(IsOrdinal(dim));
    const auto base = baseline.find(dim.name);
    d->set_baseline_index(base == baseline.end() ? -1 : base->second);
  }
  for (const Objective& o : space.objectives) {
    v1::ProposerObjective* objective = request.add_objectives();
    objective->set_metric(o.metric);
    objective->set_maximize(o.maximize);
    if (const MetricInfo* info = FindMetric(o.metric)) objective->set_unit(std::string(info->unit));
  }
  for (const Constraint& c : space.constraints) {
    v1::ProposerConstraint* constraint = request.add_constraints();
    constraint->set_metric(c.metric);
    constraint->set_has_min(c.min.has_value());
    constraint->set_min(c.min.value_or(0));
    constraint->set_has_max(c.max.has_value());
    constraint->set_max(c.max.value_or(0));
    if (const MetricInfo* info = FindMetric(c.metric)) constraint->set_unit(std::string(info->unit));
  }
  if (call.baseline) *request.mutable_baseline() = ToProposerOutcome(space, *call.baseline, "", "");
  for (const ToldProposal& told : call.proposals) {
    if (told.evaluation) {
      *request.add_outcomes() =
          ToProposerOutcome(space, *told.evaluation, told.proposal.proposer, told.proposal.rationale);
    } else {
      *request.add_pending() = ToConfig(ChoicesOf(space, told.proposal.config));
    }
  }
  request.set_count(call.count);
  for (const ProposerRejection& rejection : call.rejections) {
    v1::ProposerRejection* r = request.add_rejections();
    *r->mutable_config() = ToConfig(rejection.choices);
    r->set_reason(rejection.reason);
  }
  request.set_repeats(space.repeats);
  request.set_steps(steps);
  request.set_seed(space.strategy.seed);
  const size_t grid = GridSize(space);
  const bool baseline_in_grid = baseline.size() == space.dimensions.size();
  request.set_space_size(grid == SIZE_MAX || grid > static_cast<size_t>(INT64_MAX)
                             ? 0
                             : static_cast<int64_t>(grid) - (baseline_in_grid && grid > 0 ? 1 : 0));
  request.set_max_configs(std::max(0, call.max_configs));
  return request;
}

ProposerAnswer FromProposeResponse(const v1::ProposeResponse& response, size_t max_configs) {
  ProposerAnswer answer;
  for (const v1::ProposedConfig& proposed : response.configs()) {
    if (answer.configs.size() >= max_configs) break;
    ProposedChoices choices;
    for (const auto& [name, index] : proposed.config().choices()) {
      choices.choices[name.substr(0, kMaxKeyBytes)] = index;
    }
    choices.rationale = proposed.rationale();
    choices.steps = proposed.steps();
    choices.fallback = proposed.fallback().substr(0, 100);
    answer.configs.push_back(std::move(choices));
  }
  answer.finished = response.finished();
  answer.proposer = response.proposer().substr(0, 200);
  answer.error = response.error().substr(0, 2000);
  answer.usage.prompt_tokens = std::max<int64_t>(0, response.usage().prompt_tokens());
  answer.usage.completion_tokens = std::max<int64_t>(0, response.usage().completion_tokens());
  answer.usage.model_calls = std::max(0, response.usage().model_calls());
  answer.usage.model_latency_ms = std::max<int64_t>(0, response.usage().model_latency_ms());
  return answer;
}

}  // namespace frontier
