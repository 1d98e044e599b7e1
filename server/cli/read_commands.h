// The `frontier` commands that only read (docs/cli.md): status, list,
// trials, pareto, report and compare, from a coordinator or straight from a
// store (experiment_source.h). Each prints to stdout and returns the exit
// code (cli.h).
#pragma once

#include <string>
#include <vector>

#include "server/cli/experiment_source.h"

namespace frontier {

// `frontier status EXP`: the experiment line or its JSON.
int ShowStatus(ExperimentSource& source, const std::string& id, const std::string& output);
// `frontier list`: the newest `limit` experiments, a line (or JSON object) each.
int ListExperiments(ExperimentSource& source, int limit, const std::string& output);
// `frontier trials EXP`: the trials with their metrics (output.h).
int ListTrials(ExperimentSource& source, const std::string& id, const std::string& output);

struct ReportOptions {
  std::string format = "table";      // table, json or csv
  bool front_only = false;           // `frontier pareto`
  bool wide = false;                 // table: every column
  std::string html;                  // write the HTML page here instead
  std::vector<std::string> compare;  // `frontier compare`: two config names
};
// `frontier pareto EXP` (front_only), `frontier report EXP` and `frontier
// compare EXP A B`: the report (or comparison) in the format, or written as
// HTML to `html` when that is set.
int ShowReport(ExperimentSource& source, const std::string& id, const ReportOptions& options);

struct ArtifactOptions {
  std::string trial;    // --trial T
  std::string get;      // --get NAME: fetch this file
  bool all = false;     // --all: fetch every file
  std::string out_dir = ".";  // -o DIR: where fetched files go (as DIR/NAME)
};
// `frontier artifacts EXP --trial T`: the trial's stored files (`NAME  BYTES`
// lines), or with --get/--all each file fetched in pieces to DIR/NAME
// (`wrote DIR/NAME (N bytes)`).
int ShowArtifacts(ExperimentSource& source, const std::string& id, const ArtifactOptions& options);

}  // namespace frontier
