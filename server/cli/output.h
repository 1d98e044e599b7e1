// What the `frontier` commands print (docs/cli.md): state names, the
// one-line experiment summary, the JSON shapes of experiments and trials,
// and the trials listing as a table, JSON or CSV. Scripts and the
// integration tests parse these: change them only with docs/cli.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "frontier/v1/frontier.pb.h"
#include "server/report/labels.h"

namespace frontier {

// "pending", "running", ... ; "unknown" for an unspecified state.
const char* TrialStateName(v1::TrialState state);
const char* ExperimentStateName(v1::ExperimentState state);
// Trials that ended, whatever the outcome.
int Finished(const v1::TrialCounts& counts);
// "4m05s" under an hour, "1h02m" from one.
std::string Duration(double seconds);

// `status`, `list` and `submit` with --output json.
nlohmann::json ExperimentJson(const v1::Experiment& experiment);
// "ID  NAME  STATE  DONE/TOTAL done (running R, failed F, diverged D)".
std::string ExperimentLine(const v1::Experiment& experiment);
// One trial of `trials --output json`; its config and result parsed.
nlohmann::json TrialJson(const v1::Trial& trial);
// `frontier trials` in `output` (table, json or csv) on stdout; the table
// names configs by `labeler`'s labels when given (CSV and JSON keep the config JSON).
void PrintTrials(const v1::ListTrialsResponse& trials, const std::string& output,
                 const ConfigLabeler* labeler = nullptr);

}  // namespace frontier
