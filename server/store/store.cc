#include "server/store/store.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace frontier {

std::string SchemaMismatch(const std::string& store, int version, int latest) {
  if (version == latest) return "";
  const std::string versions =
      "store '" + store + "' has schema version " + std::to_string(version) + ", " +
      (version < latest ? "older" : "newer") + " than this build's " + std::to_string(latest);
  if (version > latest) return versions + "; upgrade frontier to read it";
  return versions + "; reading does not migrate it: run `frontier-server migrate --store " + store +
         "` (or start the coordinator on it, which migrates at start), then read it again";
}

bool trial_state::IsFinal(const std::string& s) { return s != kPending && s != kRunning; }

std::string ExperimentIdFor(int64_t seq) {
  char id[32];
  std::snprintf(id, sizeof id, "exp-%06lld", static_cast<long long>(seq));
  return id;
}

std::string WorkerIdFor(int64_t seq) {
  char id[32];
  std::snprintf(id, sizeof id, "worker-%04lld", static_cast<long long>(seq));
  return id;
}

std::string OpRunIdFor(int64_t seq) {
  char id[32];
  std::snprintf(id, sizeof id, "op-%06lld", static_cast<long long>(seq));
  return id;
}

bool IsOpRunId(const std::string& name) {
  if (name.size() <= 3 || name.compare(0, 3, "op-") != 0) return false;
  for (size_t i = 3; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
  }
  return true;
}

void AddToCounts(TrialCountsRow& c, const std::string& state, int n) {
  c.total += n;
  if (state == trial_state::kPending) c.pending += n;
  if (state == trial_state::kRunning) c.running += n;
  if (state == trial_state::kCompleted) c.completed += n;
  if (state == trial_state::kFailed) c.failed += n;
  if (state == trial_state::kDiverged) c.diverged += n;
  if (state == trial_state::kStopped) c.stopped += n;
  if (state == trial_state::kCancelled) c.cancelled += n;
}

Transition TransitionFor(const std::optional<TrialRow>& current, int attempt, const std::string& finish_state,
                         const std::string& error) {
  if (!current) return Transition::kNotFound;
  if (current->attempt != attempt) return Transition::kStale;
  if (current->state == trial_state::kRunning) return Transition::kApplied;
  // Not running this attempt any more: the same report again, or a stale one.
  const bool repeat = finish_state.empty() ? current->error == error : current->state == finish_state;
  return repeat ? Transition::kDuplicate : Transition::kStale;
}

std::string ExperimentOfTrial(const std::string& trial_id) {
  const size_t at = trial_id.rfind("-t");
  return at == std::string::npos ? std::string() : trial_id.substr(0, at);
}

void NameProfileRun(const std::string& trial_id, int64_t number, TrialRow& run) {
  run.id = trial_id + "-p" + std::to_string(number);
  nlohmann::json spec = nlohmann::json::parse(run.spec_json);
  spec["trial_id"] = run.id;
  run.spec_json = spec.dump();
}

std::string ProfiledTrialOf(const std::string& run_id) {
  const size_t at = run_id.rfind("-p");
  if (at == std::string::npos || at + 2 >= run_id.size() || ExperimentOfTrial(run_id.substr(0, at)).empty()) return "";
  for (size_t i = at + 2; i < run_id.size(); ++i) {
    if (run_id[i] < '0' || run_id[i] > '9') return "";
  }
  return run_id.substr(0, at);
}

void NameTrial(const std::string& experiment_id, int64_t number, TrialRow& trial) {
  char id[96];
  std::snprintf(id, sizeof id, "%s-t%04lld", experiment_id.c_str(), static_cast<long long>(number));
  trial.id = id;
  nlohmann::json spec = nlohmann::json::parse(trial.spec_json);
  spec["trial_id"] = trial.id;
  trial.spec_json = spec.dump();
}

}  // namespace frontier
