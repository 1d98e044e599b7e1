// Store rows to their frontier.v1 messages (proto/frontier/v1/frontier.proto):
// the one place that maps trial and experiment states and fills Trial and
// Experiment. Torch-free, stateless.
#pragma once

#include <string>

#include "frontier/v1/frontier.pb.h"
#include "server/store/store.h"

namespace frontier {

// A trial_state:: name to its enum; TRIAL_STATE_UNSPECIFIED for an unknown one.
v1::TrialState TrialStateToProto(const std::string& state);
// An experiment_state:: name to its enum; EXPERIMENT_STATE_UNSPECIFIED for an unknown one.
v1::ExperimentState ExperimentStateToProto(const std::string& state);

// Every field of the trial; the spec (kilobytes) only when `with_spec`.
void FillTrial(const TrialRow& trial, v1::Trial* out, bool with_spec);
// A ListTrials answer from the store (the service's and the CLI's `--db`): every
// trial of the request's experiment in creation order, with its spec unless the
// request says without_specs. False when there is no such experiment. Throws StoreError.
bool FillTrialList(Store& store, const v1::ListTrialsRequest& req, v1::ListTrialsResponse* out);
// Every field of the experiment and its trial counts (one CountTrials query);
// the search-space file only when `with_yaml`. Throws StoreError.
void FillExperiment(Store& store, const ExperimentRecord& experiment, v1::Experiment* out, bool with_yaml);

// The bounds of a JSON text a worker reports (a result, a progress event;
// docs/hardening.md): at most kMaxReportedJsonBytes, nested at most
// kMaxNesting deep, so that no copy or dump of it can exhaust the stack.
// Empty within them, else "<field>: line L (byte B): <problem>".
inline constexpr size_t kMaxReportedJsonBytes = size_t{4} << 20;
std::string ReportedJsonProblem(const std::string& field, const std::string& text);

}  // namespace frontier
