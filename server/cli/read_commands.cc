#include "server/cli/read_commands.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/store/artifact_store.h"
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
  req.set_without_specs(true);  // none is printed
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
  if (!options.html.empty()) req.set_artifacts_href(source.ArtifactsHref(options.html));
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

namespace {

// Fetches the trial's artifact `name` in pieces to out_dir/name.
int FetchArtifact(ExperimentSource& source, const std::string& id, const ArtifactOptions& options,
                  const std::string& name) {
  if (std::optional<std::string> problem = ArtifactNameProblem(name)) {  // never a path outside out_dir
    std::cerr << "frontier: " << *problem << "\n";
    return kCliUsage;
  }
  const std::filesystem::path path = std::filesystem::path(options.out_dir) / name;
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  const std::string partial = path.string() + ".partial";
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::cerr << "frontier: cannot write " << partial << "\n";
    return kCliFailed;
  }
  v1::ReadArtifactRequest req;
  req.set_experiment_id(id);
  req.set_trial_id(options.trial);
  req.set_name(name);
  int64_t size = 0;
  for (;;) {
    v1::ReadArtifactResponse resp;
    const grpc::Status s = source.ReadArtifact(req, &resp);
    if (!s.ok()) {
      out.close();
      std::filesystem::remove(partial, ec);
      return source.Failure(s, "artifact " + name + " of " + options.trial);
    }
    out.write(resp.data().data(), static_cast<std::streamsize>(resp.data().size()));
    req.set_offset(req.offset() + static_cast<int64_t>(resp.data().size()));
    size = resp.size();
    if (resp.data().empty() || req.offset() >= size) break;
  }
  out.close();
  if (!out || req.offset() != size) {
    std::cerr << "frontier: " << name << ": got " << req.offset() << " of " << size << " bytes\n";
    std::filesystem::remove(partial, ec);
    return kCliFailed;
  }
  std::filesystem::rename(partial, path, ec);
  if (ec) {
    std::cerr << "frontier: cannot write " << path.string() << ": " << ec.message() << "\n";
    return kCliFailed;
  }
  std::cout << "wrote " << path.string() << " (" << size << " bytes)\n";
  return kCliOk;
}

}  // namespace

int ShowArtifacts(ExperimentSource& source, const std::string& id, const ArtifactOptions& options) {
  if (!options.get.empty()) return FetchArtifact(source, id, options, options.get);
  v1::ListArtifactsRequest req;
  req.set_experiment_id(id);
  req.set_trial_id(options.trial);
  v1::ListArtifactsResponse resp;
  const grpc::Status s = source.ListArtifacts(req, &resp);
  if (!s.ok()) return source.Failure(s, "artifacts of " + options.trial);
  if (resp.artifacts().empty()) std::cerr << "trial " << options.trial << " has no stored artifacts\n";
  for (const std::string& run : resp.profile_runs()) {
    std::cerr << "profile run " << run << " of " << options.trial << ": frontier artifacts " << id << " --trial " << run
              << "\n";
  }
  size_t width = 4;
  for (const auto& a : resp.artifacts()) width = std::max(width, a.name().size());
  for (const auto& a : resp.artifacts()) {
    if (options.all) {
      if (const int code = FetchArtifact(source, id, options, a.name()); code != kCliOk) return code;
    } else {
      std::cout << a.name() << std::string(width + 2 - a.name().size(), ' ') << a.size() << "\n";
    }
  }
  return kCliOk;
}

}  // namespace frontier
