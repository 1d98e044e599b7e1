// `frontier ops`: the kernel lab's commands (docs/kernel-lab.md).
//
//  optimize  an op-optimization run: candidate variants of one op, from a
//            folder and/or drafted by a language model round by round, each
//            judged by `frontier-trial --op-candidate` (compiled and run in
//            a sandbox, gated, timed against the reference), recorded in the
//            store as it is judged; the best correct one is kept as a plugin
//            folder a search space can name (`lab:DIR`). A run of the same
//            name continues where it stopped (Ctrl-C, a crash): recorded
//            candidates are not judged again.
//  show      the leaderboard of a run (table, json, csv, or an HTML page).
//  list      the runs of a store.
// Everything runs on this machine; the store is SQLite or PostgreSQL.
#pragma once

#include <string>

namespace frontier {

struct OpsOptions {
  std::string name;            // the run (optimize, show)
  std::string op;              // optimize: attention_kernel, bev_pool, or a plugin's op
  std::string spec;            // a trial spec file whose model calls the op: the shapes
  std::string from_trial;      // or EXP/TRIAL (or TRIAL): that stored trial's spec and profile
  std::string candidates;      // a folder of candidate sources (.cc, .cpp, .cu)
  std::string endpoint, model, api_key_file;  // the language model (OpenAI-compatible chat API)
  int rounds = 0;              // model rounds (0: no model)
  int per_round = 2;           // candidates per round
  double target = 0;           // stop once a candidate's median speed-up reaches this (0: never)
  int timing_rounds = 15;      // timed rounds per candidate
  double candidate_timeout_s = 900;  // one candidate's judge, all phases
  double run_timeout_s = 120;        // each sandboxed run of a candidate (the gate's cases, the timing)
  std::string db = "runs/frontier.db";  // the store (a SQLite path or postgresql://...)
  std::string dir = "ops";              // RUN folders: DIR/NAME/{spec.json, candidates/, drafts/, best/}
  std::string trial_binary;             // default: frontier-trial beside this binary
  std::string drafter;                  // default: frontier-llm-kernels (proposers/llm) beside or on PATH
  std::string output = "table";         // show: table | json | csv
  std::string html;                     // show/optimize: also write the leaderboard page here
  int limit = 100;                      // list
};

int OptimizeOp(const OpsOptions& options);
int ShowOpRun(const OpsOptions& options);
int ListOpRuns(const OpsOptions& options);

// True when the store at `db` has a kernel-lab run `name` (so `frontier
// report NAME --db DB` shows its leaderboard).
bool HasOpRun(const std::string& db, const std::string& name);

}  // namespace frontier
