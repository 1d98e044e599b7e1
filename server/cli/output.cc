#include "server/cli/output.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <vector>

#include "search_spaces/metric_catalog.h"
#include "server/report/csv.h"
#include "server/report/report.h"

namespace frontier {
using nlohmann::json;

const char* TrialStateName(v1::TrialState s) {
  switch (s) {
    case v1::TRIAL_PENDING:
      return "pending";
    case v1::TRIAL_RUNNING:
      return "running";
    case v1::TRIAL_COMPLETED:
      return "completed";
    case v1::TRIAL_FAILED:
      return "failed";
    case v1::TRIAL_DIVERGED:
      return "diverged";
    case v1::TRIAL_STOPPED:
      return "stopped";
    case v1::TRIAL_CANCELLED:
      return "cancelled";
    case v1::TRIAL_SCREENED:
      return "screened";
    default:
      return "unknown";
  }
}

const char* ExperimentStateName(v1::ExperimentState s) {
  switch (s) {
    case v1::EXPERIMENT_RUNNING:
      return "running";
    case v1::EXPERIMENT_COMPLETED:
      return "completed";
    case v1::EXPERIMENT_CANCELLED:
      return "cancelled";
    default:
      return "unknown";
  }
}

int Finished(const v1::TrialCounts& c) {
  return c.completed() + c.failed() + c.diverged() + c.stopped() + c.cancelled();
}

std::string Duration(double seconds) {
  char buf[32];
  const int s = static_cast<int>(seconds + 0.5);
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%dh%02dm", s / 3600, (s / 60) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dm%02ds", s / 60, s % 60);
  }
  return buf;
}

json ExperimentJson(const v1::Experiment& e) {
  const auto& c = e.counts();
  return {{"id", e.id()},
          {"name", e.name()},
          {"state", ExperimentStateName(e.state())},
          {"source", e.source_name()},
          {"created_unix_ms", e.created_unix_ms()},
          {"trials",
           {{"total", c.total()},
            {"pending", c.pending()},
            {"running", c.running()},
            {"completed", c.completed()},
            {"failed", c.failed()},
            {"diverged", c.diverged()},
            {"stopped", c.stopped()},
            {"cancelled", c.cancelled()}}},
          {"skipped", std::vector<std::string>(e.skipped().begin(), e.skipped().end())},
          {"paused", e.paused()}};
}

std::string ExperimentLine(const v1::Experiment& e) {
  const auto& c = e.counts();
  std::ostringstream os;
  os << e.id() << "  " << e.name() << "  " << ExperimentStateName(e.state()) << "  " << Finished(c) << "/"
     << c.total() << " done (running " << c.running() << ", failed " << c.failed() << ", diverged "
     << c.diverged() << ")";
  if (!e.paused().empty()) os << "  paused: " << e.paused();  // an external proposer (docs/proposers.md)
  return os.str();
}

json TrialJson(const v1::Trial& t) {
  json j = {{"id", t.id()},
            {"config", json::parse(t.config_json())},
            {"baseline", t.is_baseline()},
            {"seed", t.seed()},
            {"steps", t.steps()},
            {"state", TrialStateName(t.state())},
            {"attempt", t.attempt()},
            {"worker", t.worker_id()},
            {"error", t.error()},
            {"proposer", t.proposer()},
            {"rationale", t.rationale()}};
  j["result"] = t.result_json().empty() ? json(nullptr) : json::parse(t.result_json());
  return j;
}

void PrintTrials(const v1::ListTrialsResponse& trials, const std::string& output, const ConfigLabeler* labeler) {
  if (output == "json") {
    json all = json::array();
    for (const auto& t : trials.trials()) all.push_back(TrialJson(t));
    std::cout << all.dump(2) << "\n";
    return;
  }
  const bool csv = output == "csv";
  if (csv) {
    std::cout << "id,config,seed,state,attempt,val_accuracy,test_accuracy,median_step_ms,throughput,mfu,"
                 "peak_memory_mb,worker,error,val_iou,test_iou,proposer,rationale\n";
  } else {
    // "val": validation accuracy, or IoU for the BEV task.
    std::printf("%-18s %-9s %4s %3s %8s %10s %10s  %s\n", "trial", "state", "seed", "try", "val", "step_ms",
                "samples/s", "config");
  }
  for (const auto& t : trials.trials()) {
    json r = t.result_json().empty() ? json::object() : json::parse(t.result_json());
    // Each column is the catalog's metric (search_spaces/metric_catalog.h); absent is nan.
    auto metric = [&](const char* name) { return MetricOf(r, name).value_or(std::nan("")); };
    const double val = metric("val_accuracy"), test = metric("test_accuracy");
    const double val_iou = metric("val_iou"), test_iou = metric("test_iou");
    const double step = metric("step_time_ms"), tput = metric("throughput");
    const double mfu = metric("mfu"), mem = metric("peak_memory_mb");
    const std::string config = t.is_baseline() ? "baseline"
                               : labeler    ? JoinLabel(labeler->Changes(json::parse(t.config_json())))
                                            : t.config_json();
    if (csv) {
      std::cout << t.id() << "," << CsvField(t.config_json()) << "," << t.seed() << ","
                << TrialStateName(t.state()) << "," << t.attempt() << "," << val << "," << test << "," << step
                << "," << tput << "," << mfu << "," << mem << "," << t.worker_id() << ","
                << CsvField(t.error()) << "," << val_iou << "," << test_iou << "," << CsvField(t.proposer())
                << "," << CsvField(t.rationale()) << "\n";
    } else {
      std::printf("%-18s %-9s %4lld %3d %8.4f %10.2f %10.0f  %s%s\n", t.id().c_str(),
                  TrialStateName(t.state()), static_cast<long long>(t.seed()), t.attempt(),
                  std::isnan(val) ? val_iou : val, step, tput, config.c_str(),
                  t.error().empty() ? "" : ("  [" + FirstLineOf(t.error(), 300) + "]").c_str());
      // Who proposed it and why (an external proposer's rationale: docs/proposers.md), once per config.
      if (!t.rationale().empty() && t.seed() == 1) {
        std::printf("%-18s %s: %s\n", "", t.proposer().c_str(), t.rationale().c_str());
      }
    }
  }
}

}  // namespace frontier
