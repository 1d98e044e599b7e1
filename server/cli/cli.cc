#include "server/cli/cli.h"

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "server/cli/client.h"
#include "server/cli/commands.h"
#include "server/cli/experiment_source.h"
#include "server/cli/ops_command.h"
#include "server/cli/profile_command.h"
#include "server/cli/read_commands.h"
#include "server/cli/run_command.h"

namespace frontier {

namespace {

// --device NAME: checked against the DeviceKind names, then parsed into *device.
void AddDeviceOption(CLI::App& app, DeviceKind* device, const std::string& help) {
  app.add_option_function<std::string>(
         "--device", [device](const std::string& name) { *device = *ParseName<DeviceKind>(name); }, help)
      ->check(CLI::IsMember(NamesOf<DeviceKind>()))
      ->default_str(NameOf(*device));
}

}  // namespace

int RunCli(int argc, char** argv) {
  CLI::App app{"frontier: architecture search and ablations for perception models"};
  app.require_subcommand(1);
  std::string server = "127.0.0.1:50051";
  std::string output = "table";
  const std::vector<std::string> formats = {"table", "json", "csv"};
  std::string token_file;
  ClientSecurity security;
  auto add_server = [&](CLI::App* cmd) {
    cmd->add_option("--server", server, "coordinator address host:port")->capture_default_str();
    cmd->add_option("--token-file", token_file,
                    "user token for a coordinator that requires one (else $FRONTIER_TOKEN)");
    cmd->add_option("--tls-ca", security.tls_ca_file, "connect with TLS, trusting this CA (PEM)");
    cmd->add_option("--tls-cert", security.tls_cert_file, "client certificate for mutual TLS (PEM)");
    cmd->add_option("--tls-key", security.tls_key_file, "the client certificate's key (PEM)");
  };
  auto add_output = [&](CLI::App* cmd) {
    cmd->add_option("--output,-o", output, "table, json or csv")
        ->check(CLI::IsMember(formats))
        ->capture_default_str();
  };
  // The read commands can read a store instead of asking a coordinator.
  std::string db, store;
  auto add_store = [&](CLI::App* cmd) {
    auto* db_option = cmd->add_option("--db", db, "read this SQLite store directly (no server), e.g. runs/quickstart/frontier.db");
    cmd->add_option("--store", store, "read this store directly (no server): postgresql://USER@HOST:PORT/DB or a SQLite path")
        ->excludes(db_option);
  };

  RunOptions run;
  auto* run_cmd =
      app.add_subcommand("run", "run an experiment on this machine: embedded coordinator + local workers");
  run_cmd->add_option("space", run.space, "search-space file (YAML)");
  run_cmd->add_option("--workers,-w", run.workers, "local workers (each runs one trial at a time)")
      ->capture_default_str();
  run_cmd->add_option("--runs-dir", run.runs_dir, "folder for the store, worker logs and reports")
      ->capture_default_str();
  run_cmd->add_option("--db", run.db, "SQLite store (default RUNS_DIR/frontier.db)");
  run_cmd->add_option("--resume", run.resume, "continue an interrupted experiment of the store");
  run_cmd->add_option("--html", run.html, "where to write the HTML report (default RUNS_DIR/EXP.html)");
  run_cmd
      ->add_option("--metrics-listen", run.metrics_listen,
                   "host:port for the coordinator's Prometheus /metrics (port 0: any free port; 0: none)")
      ->capture_default_str();
  run_cmd->add_option("--output,-o", run.output, "report format: table, json or csv")
      ->check(CLI::IsMember(formats))
      ->capture_default_str();
  AddDeviceOption(*run_cmd, &run.device, "cpu or cuda (cuda: one worker, a slot per GPU)");
  run_cmd->add_option("--slots", run.slots, "trials each local worker runs at once (on cuda: one per GPU)")
      ->capture_default_str();
  run_cmd->add_option("--memory-limit-mb", run.memory_limit_mb,
                      "memory limit of each trial process in MiB (0: none); a trial out of memory fails for good")
      ->capture_default_str();

  std::string space_file;
  auto* submit = app.add_subcommand("submit", "submit a search-space file to a coordinator");
  submit->add_option("space", space_file, "search-space file (YAML)")->required();
  add_server(submit);
  add_output(submit);

  std::string id;
  auto experiment_cmd = [&](const char* name, const char* help) {
    auto* cmd = app.add_subcommand(name, help);
    cmd->add_option("experiment", id, "experiment id, e.g. exp-000001")->required();
    add_server(cmd);
    return cmd;
  };
  auto* status = experiment_cmd("status", "an experiment's state and trial counts");
  add_output(status);
  add_store(status);
  auto* watch = experiment_cmd("watch", "follow an experiment until it ends");
  auto* cancel = experiment_cmd("cancel", "cancel an experiment");
  auto* trials = experiment_cmd("trials", "an experiment's trials with their metrics");
  add_output(trials);
  add_store(trials);
  ReportOptions report_options;
  auto* pareto = experiment_cmd("pareto", "the Pareto front and the baseline, with parity verdicts");
  add_output(pareto);
  add_store(pareto);
  pareto->add_flag("--wide", report_options.wide, "every column of the table, labels never cut");
  auto* report = experiment_cmd("report", "the full report: statistics over seeds, front, parity");
  add_output(report);
  add_store(report);
  report->add_option("--html", report_options.html, "write the self-contained HTML report to this file");
  report->add_flag("--wide", report_options.wide, "every column of the table, labels never cut");
  std::vector<std::string> compared(2);
  auto* compare = experiment_cmd("compare", "two configs side by side: every metric, intervals, parity");
  compare->add_option("config_a", compared[0], "a config: baseline, its row in the report, its label or key")
      ->required();
  compare->add_option("config_b", compared[1], "the config A is compared with (the reference)")->required();
  compare->add_option("--output,-o", output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  add_store(compare);
  ArtifactOptions artifact_options;
  std::string artifacts_dir;
  auto* artifacts = experiment_cmd("artifacts", "a trial's stored artifacts (traces, operator tables, its files)");
  artifacts->add_option("--trial", artifact_options.trial, "the trial, e.g. exp-000001-t0003")->required();
  auto* get = artifacts->add_option("--get", artifact_options.get, "fetch this artifact (a name the list shows)");
  artifacts->add_flag("--all", artifact_options.all, "fetch every artifact of the trial")->excludes(get);
  artifacts->add_option("--out-dir,-o", artifact_options.out_dir, "where fetched artifacts go (as DIR/NAME)")
      ->capture_default_str();
  add_store(artifacts);
  artifacts->add_option("--artifacts-dir", artifacts_dir,
                        "with --db/--store: the artifact store's folder (default: ARTIFACTS beside a SQLite file)");
  report->add_option("--artifacts-dir", artifacts_dir,
                     "with --db/--store: the artifact store the HTML page links (default: ARTIFACTS beside a SQLite "
                     "file)");
  ProfileOptions profile_options;
  auto* profile = experiment_cmd("profile", "re-run one stored trial with profiling on, on a worker, and show its profile");
  profile->add_option("--trial", profile_options.trial, "the trial to re-run, e.g. exp-000001-t0003")->required();
  profile->add_option("--steps", profile_options.steps, "profiled steps (1 to 1000), after training")
      ->capture_default_str();
  profile->add_option("--tool", profile_options.tool, "libtorch, nsys or ncu (docs/profiling.md)")
      ->check(CLI::IsMember({"libtorch", "nsys", "ncu"}))
      ->capture_default_str();
  profile->add_option("--timeout", profile_options.timeout_s, "seconds to wait for a worker to run it")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  profile->add_option("--output,-o", profile_options.output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  int limit = 100;
  auto* list = app.add_subcommand("list", "experiments, newest first");
  add_server(list);
  add_output(list);
  add_store(list);
  list->add_option("--limit", limit, "at most this many")->capture_default_str();

  OpsOptions ops;
  auto* ops_cmd = app.add_subcommand("ops", "the kernel lab: candidate op variants judged, timed, kept (docs/kernel-lab.md)");
  ops_cmd->require_subcommand(1);
  auto* optimize = ops_cmd->add_subcommand("optimize", "judge candidate variants of an op; keep the best as NAME's plugin");
  optimize->add_option("name", ops.name, "the run: a new name, or one to continue")->required();
  optimize->add_option("--op", ops.op, "attention_kernel, bev_pool, or a plugin's op")->required();
  optimize->add_option("--spec", ops.spec, "a trial spec (JSON) whose model calls the op: its shapes");
  optimize->add_option("--from-trial", ops.from_trial, "or a stored trial (EXP/TRIAL) whose spec and profile to use");
  optimize->add_option("--candidates", ops.candidates, "a folder of candidate sources (.cc, .cpp, .cu)");
  optimize->add_option("--endpoint", ops.endpoint, "the language model's OpenAI-compatible API (as the LLM proposer's)");
  optimize->add_option("--model", ops.model, "the model's name");
  optimize->add_option("--api-key-file", ops.api_key_file, "a file holding the API key");
  optimize->add_option("--rounds", ops.rounds, "model rounds (0: none)")->capture_default_str();
  optimize->add_option("--per-round", ops.per_round, "candidates per model round")->capture_default_str();
  optimize->add_option("--target", ops.target, "stop once a candidate's median speed-up reaches this (0: never)");
  optimize->add_option("--timing-rounds", ops.timing_rounds, "timed rounds per candidate")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  optimize->add_option("--candidate-timeout", ops.candidate_timeout_s, "seconds one candidate may take in all")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  optimize->add_option("--run-timeout", ops.run_timeout_s, "seconds each sandboxed run of a candidate may take")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  optimize->add_option("--trial-binary", ops.trial_binary, "frontier-trial (default: beside this binary)");
  optimize->add_option("--drafter", ops.drafter, "frontier-llm-kernels (default: proposers/llm or PATH)");
  for (CLI::App* cmd : {optimize, ops_cmd->add_subcommand("show", "a run's leaderboard"),
                        ops_cmd->add_subcommand("list", "the store's kernel lab runs, newest first")}) {
    cmd->add_option("--db", ops.db, "the store: a SQLite path or postgresql://...")->capture_default_str();
    cmd->add_option("--dir", ops.dir, "runs' folders: DIR/NAME")->capture_default_str();
    if (cmd != optimize && cmd->get_name() == "show") {
      cmd->add_option("name", ops.name, "the run")->required();
      cmd->add_option("--output,-o", ops.output, "table, json or csv")->check(CLI::IsMember(formats));
    }
    if (cmd->get_name() != "list") cmd->add_option("--html", ops.html, "also write the leaderboard page here");
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kCliOk : kCliUsage;
  }

  try {
    if (run_cmd->parsed()) return Run(run);
    if (ops_cmd->parsed()) {
      if (optimize->parsed()) return OptimizeOp(ops);
      if (ops_cmd->get_subcommand("show")->parsed()) return ShowOpRun(ops);
      return ListOpRuns(ops);
    }
    if (report->parsed() && !db.empty() && HasOpRun(db, id)) {
      ops.db = db;
      ops.name = id;
      ops.output = output;
      ops.html = report_options.html;
      return ShowOpRun(ops);
    }
    // A store named on the command line is read directly; otherwise the coordinator answers.
    std::unique_ptr<ExperimentSource> source;
    std::unique_ptr<Client> client;
    if (!db.empty() || !store.empty()) {
      source = StoreSource(db.empty() ? store : db, artifacts_dir);
    } else {
      security.token = ReadToken(token_file, "FRONTIER_TOKEN");
      client = std::make_unique<Client>(server, security);
      source = ServerSource(*client);
    }
    report_options.format = output;
    if (submit->parsed()) return Submit(*client, space_file, output);
    if (cancel->parsed()) return ShowExperiment(*client, id, true, output);
    if (profile->parsed()) return Profile(*client, id, profile_options);
    if (watch->parsed()) return Watch(*client, id);
    if (status->parsed()) return ShowStatus(*source, id, output);
    if (list->parsed()) return ListExperiments(*source, limit, output);
    if (artifacts->parsed()) return ShowArtifacts(*source, id, artifact_options);
    if (trials->parsed()) return ListTrials(*source, id, output);
    if (pareto->parsed()) report_options.front_only = true;
    if (compare->parsed()) report_options.compare = compared;
    if (pareto->parsed() || report->parsed() || compare->parsed()) return ShowReport(*source, id, report_options);
  } catch (const std::exception& e) {
    std::cerr << "frontier: " << e.what() << "\n";
    return kCliFailed;
  }
  return kCliUsage;
}

}  // namespace frontier
