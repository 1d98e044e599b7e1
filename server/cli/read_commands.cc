#include "server/cli/read_commands.h"

#include <fstream>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/cli/cli.h"
#include "server/cli/output.h"

namespace frontier {

int ShowStatus(ExperimentSource& source, const std::string& id, const std::string& output) {
  v1::GetExperimentRequest req;
  req.set_experiment_id(id);
  v1::Experiment e;
  const grpc::Status s = source.GetExperiment(req, &e);
  if (!s.ok()) return source.Failure(s, "experiment " + id);
  std::cout << (output == "json" ? ExperimentJson(e).dump(2) : ExperimentLine(e)) << "\n";
  return kCliOk;
}

int ListExperiments(ExperimentSource& source, int limit, const std::string& output) {
  v1::ListExperimentsRequest req;
  req.set_limit(limit);
  v1::ListExperimentsResponse resp;
  const grpc::Status s = source.ListExperiments(req, &resp);
  if (!s.ok()) return source.Failure(s, "list");
  if (output == "json") {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& e : resp.experiments()) all.push_back(ExperimentJson(e));
    std::cout << all.dump(2) << "\n";
  } else {
    for (const auto& e : resp.experiments()) std::cout << ExperimentLine(e) << "\n";
  }
  return kCliOk;
}

int ListTrials(ExperimentSource& source, const std::string& id, const std::string& output) {
  v1::ListTrialsRequest req;
  req.set_experiment_id(id);
  v1::ListTrialsResponse resp;
  const grpc::Status s = source.ListTrials(req, &resp);
  if (!s.ok()) return source.Failure(s, "trials of " + id);
  // Configs are named by what differs from the baseline, as in the report.
  std::optional<ConfigLabeler> labeler;
  v1::GetExperimentRequest experiment_req;
  experiment_req.set_experiment_id(id);
  v1::Experiment e;
  if (output == "table" && source.GetExperiment(experiment_req, &e).ok()) {
    try {
      labeler.emplace(ParseStoredSearchSpace(e.space_yaml(), e.source_name()));
    } catch (const std::exception&) {
      // A space this build no longer reads: the configs' JSON names them.
    }
  }
  PrintTrials(resp, output, labeler ? &*labeler : nullptr);
  return kCliOk;
}

int ShowReport(ExperimentSource& source, const std::string& id, const ReportOptions& options) {
  v1::GetReportRequest req;
  req.set_experiment_id(id);
  req.set_format(options.html.empty() ? options.format : "html");
  req.set_front_only(options.front_only);
  req.set_wide(options.wide);
  for (const std::string& name : options.compare) req.add_compare(name);
  v1::GetReportResponse resp;
  const grpc::Status s = source.GetReport(req, &resp);
  if (!s.ok()) return source.Failure(s, (options.compare.empty() ? "report of " : "compare in ") + id);
  if (!options.html.empty()) {
    std::ofstream out(options.html);
    out << resp.content();
    if (!out) {
      std::cerr << "frontier: cannot write " << options.html << "\n";
      return kCliFailed;
    }
    std::cout << "wrote " << options.html << "\n";
  } else {
    std::cout << resp.content() << (resp.content().empty() || resp.content().back() != '\n' ? "\n" : "");
  }
  return kCliOk;
}

}  // namespace frontier
