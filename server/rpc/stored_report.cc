#include "server/rpc/stored_report.h"

#include <chrono>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "server/report/views.h"
#include "os/monotonic.h"

namespace frontier {
namespace {

// The stored space; its goals from what was stored at submission when present.
SearchSpace StoredSpace(const ExperimentRecord& e) {
  std::optional<SearchSpace> goals;
  if (e.goals_json != "{}") goals = GoalsOnlySpace(e.name, nlohmann::json::parse(e.goals_json));
  try {
    SearchSpace space = ParseStoredSearchSpace(e.space_yaml, e.source_name);
    if (goals) {
      space.objectives = goals->objectives;
      space.constraints = goals->constraints;
      space.parity = goals->parity;
    }
    return space;
  } catch (const SpaceError&) {
    if (goals) return std::move(*goals);  // configs are then named by their entries
    throw;
  }
}

}  // namespace

std::optional<Report> StoredReport(Store& store, const std::string& id, bool front_only) {
  auto e = store.GetExperiment(id);
  if (!e) return std::nullopt;
  const auto t0 = Monotonic::now();
  const SearchSpace space = StoredSpace(*e);
  const auto t1 = Monotonic::now();
  ReportBuilder builder(e->id, space);
  std::vector<TrialRow> rows = store.ListTrialOutcomes(e->id);
  const auto t2 = Monotonic::now();
  for (TrialRow& row : rows) {
    TrialRecord r;
    r.trial_id = std::move(row.id);
    r.config_key = std::move(row.config_json);  // stored as ConfigKey(config)
    r.is_baseline = row.is_baseline;
    r.seed = row.seed;
    r.state = std::move(row.state);
    r.started_ms = row.started_ms;
    r.finished_ms = row.finished_ms;
    r.proposer = std::move(row.proposer);
    r.rationale = std::move(row.rationale);
    r.error = std::move(row.error);
    builder.Add(std::move(r), row.result_json);
    row = TrialRow();
  }
  rows.clear();
  rows.shrink_to_fit();
  const auto t3 = Monotonic::now();
  Report report = builder.Build(front_only);
  for (const ProposerCallRow& call : store.ListProposerCalls(e->id)) {
    ProposerCallsSummary& p = report.proposer_calls;
    ++p.calls;
    p.failed += call.error.empty() ? 0 : 1;
    p.accepted += call.accepted;
    p.rejected += call.rejected;
    p.latency_ms += call.latency_ms;
    p.model_calls += call.model_calls;
    p.prompt_tokens += call.prompt_tokens;
    p.completion_tokens += call.completion_tokens;
    if (!call.error.empty()) p.last_error = call.error;
  }
  report.proposer_calls.paused = e->paused;
  const auto t4 = Monotonic::now();
  const auto ms = [](Monotonic::time_point a, Monotonic::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  spdlog::info(
      "report {}: {} configs; space {:.0f} ms, trials read {:.0f} ms, parsed {:.0f} ms, summarized {:.0f} ms",
      e->id, report.configs.size(), ms(t0, t1), ms(t1, t2), ms(t2, t3), ms(t3, t4));
  return report;
}

std::optional<RenderedReport> RenderStoredReport(Store& store, const ReportRequest& request) {
  const std::string& format = request.format;
  if (!format.empty() && format != "json" && format != "table" && format != "csv" && format != "html") {
    throw std::invalid_argument("unknown report format '" + format + "'; expected json, table, csv or html");
  }
  if (!request.compare.empty()) {
    if (request.compare.size() != 2) {
      throw std::invalid_argument("a comparison names two configs, not " + std::to_string(request.compare.size()));
    }
    if (format == "csv" || format == "html") {
      throw std::invalid_argument("a comparison comes as table or json, not " + format);
    }
  }
  std::optional<Report> report = StoredReport(store, request.experiment_id, request.front_only && request.compare.empty());
  if (!report) return std::nullopt;
  if (!request.compare.empty()) {
    const Comparison c = CompareConfigs(*report, FindConfig(*report, request.compare[0]),
                                        FindConfig(*report, request.compare[1]));
    if (format == "table") return RenderedReport{RenderComparisonTable(*report, c), "text/plain"};
    return RenderedReport{ComparisonToJson(*report, c).dump(2), "application/json"};
  }
  if (format.empty() || format == "json") return RenderedReport{RenderJson(*report), "application/json"};
  if (format == "table") return RenderedReport{RenderTable(*report, TableOptions{request.wide}), "text/plain"};
  if (format == "csv") return RenderedReport{RenderCsv(*report), "text/csv"};
  if (request.artifacts != nullptr) {
    for (auto& [trial, files] : request.artifacts->ListExperiment(report->experiment_id)) {
      TrialArtifacts listed{trial, ProfiledTrialOf(trial), {}};
      for (const ArtifactFile& f : files) listed.files.emplace_back(f.name, f.size);
      report->artifacts.push_back(std::move(listed));
    }
    report->artifacts_href = request.artifacts_href;
  }
  return RenderedReport{RenderHtml(*report), "text/html"};
}

}  // namespace frontier
