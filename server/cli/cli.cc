#include "server/cli/cli.h"

#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "server/cli/client.h"
#include "server/cli/commands.h"
#include "server/cli/run_command.h"

namespace frontier {

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
  auto* watch = experiment_cmd("watch", "follow an experiment until it ends");
  auto* cancel = experiment_cmd("cancel", "cancel an experiment");
  auto* trials = experiment_cmd("trials", "an experiment's trials with their metrics");
  add_output(trials);
  auto* pareto = experiment_cmd("pareto", "the Pareto front and the baseline, with parity verdicts");
  add_output(pareto);
  std::string html;
  auto* report = experiment_cmd("report", "the full report: statistics over seeds, front, parity");
  add_output(report);
  report->add_option("--html", html, "write the self-contained HTML report to this file");
  int limit = 100;
  auto* list = app.add_subcommand("list", "experiments, newest first");
  add_server(list);
  add_output(list);
  list->add_option("--limit", limit, "at most this many")->capture_default_str();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kCliOk : kCliUsage;
  }

  try {
    if (run_cmd->parsed()) return Run(run);
    security.token = ReadToken(token_file, "FRONTIER_TOKEN");
    Client client(server, security);
    if (submit->parsed()) return Submit(client, space_file, output);
    if (status->parsed() || cancel->parsed()) return ShowExperiment(client, id, cancel->parsed(), output);
    if (list->parsed()) return ListExperiments(client, limit, output);
    if (watch->parsed()) return Watch(client, id);
    if (trials->parsed()) return ListTrials(client, id, output);
    if (pareto->parsed()) return Report(client, id, output, true, "");
    if (report->parsed()) return Report(client, id, output, false, html);
  } catch (const std::exception& e) {
    std::cerr << "frontier: " << e.what() << "\n";
    return kCliFailed;
  }
  return kCliUsage;
}

}  // namespace frontier
