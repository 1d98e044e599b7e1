// `frontier run`: an experiment on this machine, by the cluster's code path.
// An embedded coordinator (CoordinatorProcess over the SQLite store of
// --db, 127.0.0.1, an ephemeral port) and N local workers (local_cluster.h);
// the CLI submits (or resumes), prints progress until the experiment ends,
// then prints the report and writes the HTML one. Ctrl-C stops the workers
// and keeps what finished in the store, for --resume.
#pragma once

#include <cstdint>
#include <string>

#include "search_spaces/runtime_kinds.h"

namespace frontier {

struct RunOptions {
  std::string space;                           // search-space file; empty with `resume`
  int workers = 2;                             // local workers, one trial at a time each
  std::string runs_dir = "runs";               // store, worker logs (RUNS_DIR/EXP/), reports
  std::string db;                              // SQLite store; empty: RUNS_DIR/frontier.db
  std::string resume;                          // an experiment of the store to continue
  std::string html;                            // HTML report; empty: RUNS_DIR/EXP.html
  std::string output = "table";                // the printed report's format: table, json or csv
  std::string metrics_listen = "127.0.0.1:0";  // the embedded coordinator's /metrics; "0": none
  DeviceKind device = DeviceKind::kCpu;        // the workers' --device
  int slots = 1;                               // each worker's --slots (cuda: one per GPU)
  int64_t memory_limit_mb = 0;                 // each worker's --memory-limit-mb; 0: none
};

// The exit code (cli.h): kCliOk when the experiment completed, kCliFailed
// when it did not or every worker exited, kCliInterrupted on Ctrl-C,
// kCliUsage for a bad combination of options (--device cuda with more than
// one worker: one worker drives every GPU, a slot each). Throws StoreError and
// std::runtime_error (an unreadable file, an address that cannot be bound).
int Run(const RunOptions& options);

}  // namespace frontier
