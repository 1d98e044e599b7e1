// The `frontier` command line: run (embedded coordinator + local workers),
// submit, status, list, watch, cancel, trials, pareto, report. Commands
// other than run talk to a coordinator over gRPC (--server), exactly as
// against a cluster. Exit codes: docs/cli.md.
#pragma once

namespace frontier {

enum CliExit : int {
  kCliOk = 0,
  kCliFailed = 1,    // the coordinator could not be reached, or the experiment ended cancelled/with failures
                     // where it matters
  kCliInvalid = 2,   // the server rejected the input (e.g. an invalid search-space file)
  kCliNotFound = 3,  // no such experiment
  kCliDenied = 4,    // no, a wrong, or the other role's token
  kCliInterrupted = 130,  // Ctrl-C during `frontier run`; the experiment can be resumed
  kCliUsage = 64,
};

int RunCli(int argc, char** argv);

}  // namespace frontier
