// What the SQLite and PostgreSQL stores share beyond store.h: the column
// lists their reads select (the same tables in both schemas; each store's row
// readers take the columns by these positions), the checks of a new op run,
// and the refusal of a schema newer than this build's. Internal to
// server/store/.
#pragma once

#include <string>

#include "server/store/store.h"

namespace frontier::sql_store {

inline constexpr const char* kTrialColumns =
    "id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, max_attempts, worker_id, "
    "lease_expires_ms, spec_json, result_json, error, created_ms, started_ms, finished_ms, proposer, "
    "rationale";
// kTrialColumns with an empty spec, for reads that do not need it.
inline constexpr const char* kOutcomeColumns =
    "id, experiment_id, config_json, is_baseline, seed, steps, state, attempt, max_attempts, worker_id, "
    "lease_expires_ms, '' AS spec_json, result_json, error, created_ms, started_ms, finished_ms, proposer, "
    "rationale";

inline constexpr const char* kExperimentColumns =
    "id, name, state, space_yaml, source_name, created_ms, skipped_json, goals_json, owner, paused, "
    "submit_id";

inline constexpr const char* kOpRunColumns = "id, name, op, spec_json, state, owner, created_ms, updated_ms";

// CreateOpRun's checks before it writes: refuses a name that is empty or reads
// as an op run id (StoreError); an empty state is running, an unset update
// time the creation time.
inline void PrepareNewOpRun(OpRunRecord& run) {
  if (run.name.empty() || IsOpRunId(run.name)) {
    throw StoreError("op run name '" + run.name + "' refused: a name must be non-empty and not an op run id");
  }
  if (run.state.empty()) run.state = op_run_state::kRunning;
  if (run.updated_ms == 0) run.updated_ms = run.created_ms;
}

// A migration's refusal of a store whose schema `version` is newer than this
// build's `latest` (StoreError).
inline void RefuseNewerSchema(int version, int latest) {
  if (version > latest) {
    throw StoreError("the store has schema version " + std::to_string(version) +
                     ", newer than this build's " + std::to_string(latest) + "; upgrade frontier");
  }
}

}  // namespace frontier::sql_store
