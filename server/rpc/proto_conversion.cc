#include "server/rpc/proto_conversion.h"

#include <map>
#include <optional>

#include "search_spaces/input_bounds.h"
#include "search_spaces/search_space.h"

namespace frontier {

v1::TrialState TrialStateToProto(const std::string& state) {
  static const std::map<std::string, v1::TrialState> kStates = {
      {trial_state::kPending, v1::TRIAL_PENDING},     {trial_state::kRunning, v1::TRIAL_RUNNING},
      {trial_state::kCompleted, v1::TRIAL_COMPLETED}, {trial_state::kFailed, v1::TRIAL_FAILED},
      {trial_state::kDiverged, v1::TRIAL_DIVERGED},   {trial_state::kStopped, v1::TRIAL_STOPPED},
      {trial_state::kCancelled, v1::TRIAL_CANCELLED}, {kScreenedState, v1::TRIAL_SCREENED}};
  auto it = kStates.find(state);
  return it == kStates.end() ? v1::TRIAL_STATE_UNSPECIFIED : it->second;
}

v1::ExperimentState ExperimentStateToProto(const std::string& state) {
  if (state == experiment_state::kRunning) return v1::EXPERIMENT_RUNNING;
  if (state == experiment_state::kCompleted) return v1::EXPERIMENT_COMPLETED;
  if (state == experiment_state::kCancelled) return v1::EXPERIMENT_CANCELLED;
  return v1::EXPERIMENT_STATE_UNSPECIFIED;
}

void FillTrial(const TrialRow& t, v1::Trial* out, bool with_spec) {
  out->set_id(t.id);
  out->set_experiment_id(t.experiment_id);
  out->set_config_json(t.config_json);
  out->set_is_baseline(t.is_baseline);
  out->set_seed(t.seed);
  out->set_steps(t.steps);
  out->set_state(TrialStateToProto(t.state));
  out->set_attempt(t.attempt);
  out->set_worker_id(t.worker_id);
  out->set_result_json(t.result_json);
  out->set_error(t.error);
  out->set_proposer(t.proposer);
  out->set_rationale(t.rationale);
  out->set_profile_of(ProfiledTrialOf(t.id));
  if (with_spec) out->set_spec_json(t.spec_json);
}

bool FillTrialList(Store& store, const v1::ListTrialsRequest& req, v1::ListTrialsResponse* out) {
  const std::string& id = req.experiment_id();
  if (!store.GetExperiment(id)) return false;
  for (const TrialRow& t : req.without_specs() ? store.ListTrialOutcomes(id) : store.ListTrials(id)) {
    FillTrial(t, out->add_trials(), true);
  }
  return true;
}

void FillExperiment(Store& store, const ExperimentRecord& e, v1::Experiment* out, bool with_yaml) {
  out->set_id(e.id);
  out->set_name(e.name);
  out->set_state(ExperimentStateToProto(e.state));
  if (with_yaml) out->set_space_yaml(e.space_yaml);
  out->set_source_name(e.source_name);
  out->set_created_unix_ms(e.created_ms);
  out->set_owner(e.owner);
  out->set_paused(e.paused);
  for (const std::string& s : e.skipped) out->add_skipped(s);
  const TrialCountsRow c = store.CountTrials(e.id);
  v1::TrialCounts* counts = out->mutable_counts();
  counts->set_pending(c.pending);
  counts->set_running(c.running);
  counts->set_completed(c.completed);
  counts->set_failed(c.failed);
  counts->set_diverged(c.diverged);
  counts->set_stopped(c.stopped);
  counts->set_cancelled(c.cancelled);
  counts->set_total(c.total);
}

std::string ReportedJsonProblem(const std::string& field, const std::string& text) {
  if (text.size() > kMaxReportedJsonBytes) {
    return field + ": " + std::to_string(text.size()) + " bytes; the limit is " +
           std::to_string(kMaxReportedJsonBytes);
  }
  const std::optional<InputFault> fault = FindNestingFault(text, kMaxNesting, /*json_strings=*/true);
  return fault ? field + ": " + Describe(*fault) : "";
}

}  // namespace frontier
