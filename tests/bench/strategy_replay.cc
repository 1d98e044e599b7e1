// ASHA vs the full grid on a real search space, trace-driven: every trial of
// the grid is run once with frontier-trial (tests/bench/strategy_asha.py does
// that), and its recorded output is replayed through the real Scheduler (an
// in-memory SQLite store, a simulated clock and N simulated workers) under
// strategy grid and under strategy asha: progress and eval events arrive at
// the time the trial's summed step time reached them, ASHA's stop replies end
// trials there. Compute is the summed step time the trials ran (stopped ones
// up to their stop); quality is the report's hypervolume (docs/report.md).
//
//   strategy_asha_replay specs SPACE.yaml OUTDIR
//       writes OUTDIR/NNN.json: the grid's trial specs (the baseline and
//       every runnable configuration at seeds 1..repeats), and
//       OUTDIR/index.json: [{"file", "config", "seed"}]
//   strategy_asha_replay compare SPACE.yaml RUNDIR STRATEGY [--workers N] [--orders N] [--verbose]
//       RUNDIR holds NNN.jsonl, the output of NNN.json; STRATEGY is the asha
//       strategy's YAML mapping without its seed, e.g. "{name: asha, min_steps: 20}";
//       ASHA runs once per seed 0..orders-1 (the seed orders the queue);
//       --verbose lists, per order, how each configuration's trials ended
//       (done, or sSTEP: stopped at STEP).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search_spaces/search_space.h"
#include "proto/clock.h"
#include "server/report/report.h"
#include "server/scheduler/scheduler.h"
#include "server/store/sqlite_store.h"
#include "server/search/strategy.h"

namespace frontier {
namespace {

using nlohmann::json;

class SimulatedClock final : public Clock {
 public:
  int64_t NowMs() override { return now_ms; }
  int64_t now_ms = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// One recorded trial: its progress and eval events and its result.
struct Recording {
  std::vector<json> events;
  json result;
  double train_time_s = 0;  // summed step time of the whole trial
};

// When the trial's summed step time reached an event, in seconds.
double EventTime(const Recording& r, const json& event) {
  if (event.contains("train_time_s")) return event["train_time_s"].get<double>();
  const int steps = r.result.value("steps_run", 1);
  return r.train_time_s * event.value("step", 0) / std::max(1, steps);
}

std::string SpecKey(const std::string& config_key, int64_t seed) {
  return config_key + "#" + std::to_string(seed);
}

struct Outcome {
  double compute_s = 0;
  double hypervolume = 0;
  int completed = 0, stopped = 0;
  size_t front = 0;
  std::map<std::string, std::string> fates;  // config key -> "120" (completed) or the steps it was stopped at
};

// Runs an experiment of `yaml` through the Scheduler with `workers`
// simulated workers, every trial's events taken from `recordings`.
Outcome Simulate(const std::string& yaml, const std::map<std::string, Recording>& recordings, int workers) {
  SqliteStore store(":memory:");
  SimulatedClock clock;
  SchedulerOptions options;
  options.lease_timeout_ms = int64_t{1} << 50;  // simulated time: leases never lapse
  Scheduler scheduler(store, clock, options);
  const std::string id = scheduler.Submit(yaml, "replay.yaml").id;

  struct Running {
    TrialRow trial;
    const Recording* recording;
    double start;
    size_t next = 0;  // the next event to deliver; events.size(): the result
  };
  std::vector<std::optional<Running>> slots(workers);
  double now = 0;
  Outcome outcome;
  for (;;) {
    for (int w = 0; w < workers; ++w) {
      if (slots[w]) continue;
      std::optional<TrialRow> trial = scheduler.Lease("w" + std::to_string(w));
      if (!trial) continue;
      const auto it = recordings.find(SpecKey(trial->config_json, trial->seed));
      if (it == recordings.end()) throw std::runtime_error("no recording of " + trial->config_json);
      slots[w] = Running{*trial, &it->second, now};
    }
    // The earliest next event of any running trial.
    int earliest = -1;
    double at = 0;
    for (int w = 0; w < workers; ++w) {
      if (!slots[w]) continue;
      const Running& r = *slots[w];
      const double t = r.start + (r.next < r.recording->events.size()
                                      ? EventTime(*r.recording, r.recording->events[r.next])
                                      : r.recording->train_time_s);
      if (earliest < 0 || t < at) {
        earliest = w;
        at = t;
      }
    }
    if (earliest < 0) break;
    now = at;
    clock.now_ms = static_cast<int64_t>(now * 1000);
    Running& r = *slots[earliest];
    const std::string worker = "w" + std::to_string(earliest);
    if (r.next < r.recording->events.size()) {
      const ProgressReply reply =
          scheduler.Progress(worker, r.trial.id, r.trial.attempt, r.recording->events[r.next++].dump());
      if (!reply.stop) continue;
      scheduler.Fail(worker, r.trial.id, r.trial.attempt, "stopped: " + reply.reason, false, "");
      outcome.compute_s += now - r.start;
      ++outcome.stopped;
      outcome.fates[r.trial.config_json] +=
          " s" + std::to_string(r.recording->events[r.next - 1].value("step", 0));
    } else {
      scheduler.Complete(worker, r.trial.id, r.trial.attempt, r.recording->result.dump());
      outcome.compute_s += r.recording->train_time_s;
      ++outcome.completed;
      outcome.fates[r.trial.config_json] += " done";
    }
    slots[earliest].reset();
  }

  const SearchSpace space = ParseSearchSpace(yaml, "replay.yaml");
  std::vector<TrialRecord> records;
  for (const TrialRow& t : store.ListTrials(id)) {
    TrialRecord record;
    record.trial_id = t.id;
    record.config = json::parse(t.config_json);
    record.config_key = ConfigKey(record.config);
    record.is_baseline = t.is_baseline;
    record.seed = t.seed;
    record.state = t.state;
    if (!t.result_json.empty()) record.result = json::parse(t.result_json);
    records.push_back(std::move(record));
  }
  const Report report = BuildReport(id, space, records);
  outcome.hypervolume = report.hypervolume;
  outcome.front = std::count_if(report.configs.begin(), report.configs.end(),
                                [](const ConfigSummary& c) { return c.on_front; });
  return outcome;
}

int Specs(const std::string& space_path, const std::string& out_dir) {
  const SearchSpace space = LoadSearchSpaceFile(space_path);
  std::vector<Config> configs = {Config::object()};
  for (Config& config : EnumerateGrid(space)) {
    if (!IsBaseline(space, config) && !WhyInvalid(space, config)) configs.push_back(std::move(config));
  }
  json index = json::array();
  int n = 0;
  for (const Config& config : configs) {
    for (int seed = 1; seed <= space.repeats; ++seed) {
      char name[32];
      std::snprintf(name, sizeof name, "%03d", n++);
      const std::string file = std::string(name) + ".json";
      std::ofstream(out_dir + "/" + file) << ToJson(MakeTrialSpec(space, config, seed, name)).dump(2) << "\n";
      index.push_back({{"file", file}, {"config", ConfigKey(config)}, {"seed", seed}});
    }
  }
  std::ofstream(out_dir + "/index.json") << index.dump(1) << "\n";
  std::cout << n << " trial specs in " << out_dir << "\n";
  return 0;
}

int Compare(const std::string& space_path, const std::string& run_dir, const std::string& strategy,
            int workers, int orders, bool verbose) {
  std::string yaml = ReadFile(space_path);
  std::map<std::string, Recording> recordings;
  for (const json& entry : json::parse(ReadFile(run_dir + "/index.json"))) {
    std::string file = entry["file"].get<std::string>();
    file = file.substr(0, file.size() - 5) + ".jsonl";
    Recording r;
    std::istringstream lines(ReadFile(run_dir + "/" + file));
    for (std::string line; std::getline(lines, line);) {
      const json event = json::parse(line, nullptr, false);
      if (!event.is_object()) continue;
      const std::string kind = event.value("event", "");
      if (kind == "progress" || kind == "eval") r.events.push_back(event);
      if (kind == "result") r.result = event;
    }
    if (!r.result.is_object()) throw std::runtime_error(file + " has no result line");
    r.train_time_s = r.result.value("train_time_s", 0.0);
    recordings[SpecKey(entry["config"].get<std::string>(), entry["seed"].get<int64_t>())] = std::move(r);
  }
  const Outcome grid = Simulate(yaml + "strategy: {name: grid}\n", recordings, workers);
  std::printf("grid: %d trials, compute %.1f s, hypervolume %.4f, %zu configurations on the front\n",
              grid.completed, grid.compute_s, grid.hypervolume, grid.front);
  std::printf(
      "| asha seed | trials completed | stopped | compute (s) | compute / grid | hypervolume | "
      "hypervolume / grid |\n| --- | --- | --- | --- | --- | --- | --- |\n");
  std::vector<double> computes, hvs;
  int on_target = 0;
  for (int seed = 0; seed < orders; ++seed) {
    std::string asha = strategy;
    asha.insert(asha.rfind('}'), ", seed: " + std::to_string(seed));
    const Outcome o = Simulate(yaml + "strategy: " + asha + "\n", recordings, workers);
    const double compute = o.compute_s / grid.compute_s, hv = o.hypervolume / grid.hypervolume;
    std::printf("| %d | %d | %d | %.1f | %.3f | %.4f | %.3f |\n", seed, o.completed, o.stopped, o.compute_s,
                compute, o.hypervolume, hv);
    if (verbose) {
      for (const auto& [config, fate] : o.fates) std::printf("|   | %s:%s\n", config.c_str(), fate.c_str());
    }
    computes.push_back(compute);
    hvs.push_back(hv);
    on_target += hv >= 0.95 && compute <= 0.35;
  }
  // Mean, sample standard deviation, min and max of `v`.
  const auto stats = [](const std::vector<double>& v) {
    double sum = 0, sq = 0;
    for (double x : v) sum += x;
    const double mean = sum / v.size();
    for (double x : v) sq += (x - mean) * (x - mean);
    const double sd = v.size() > 1 ? std::sqrt(sq / (v.size() - 1)) : 0;
    return std::array<double, 4>{mean, sd, *std::min_element(v.begin(), v.end()),
                                 *std::max_element(v.begin(), v.end())};
  };
  const auto c = stats(computes), h = stats(hvs);
  std::printf(
      "\n%s over %d queue orders, %d workers: compute / grid mean %.3f (sd %.3f, max %.3f), "
      "hypervolume / grid mean %.3f (sd %.3f, min %.3f); %d of %d orders at >= 0.95 hypervolume "
      "and <= 0.35 compute\n",
      strategy.c_str(), orders, workers, c[0], c[1], c[3], h[0], h[1], h[2], on_target, orders);
  return 0;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "specs") return Specs(args[1], args[2]);
  if (args.size() >= 4 && args[0] == "compare") {
    int workers = 2, orders = 10;
    bool verbose = false;
    for (size_t i = 4; i < args.size(); ++i) {
      if (args[i] == "--verbose") {
        verbose = true;
      } else if (i + 1 < args.size()) {
        if (args[i] == "--workers") workers = std::atoi(args[i + 1].c_str());
        if (args[i] == "--orders") orders = std::atoi(args[i + 1].c_str());
        ++i;
      }
    }
    return Compare(args[1], args[2], args[3], workers, orders, verbose);
  }
  std::cerr << "usage: strategy_asha_replay specs SPACE.yaml OUTDIR\n"
               "       strategy_asha_replay compare SPACE.yaml RUNDIR STRATEGY [--workers N] [--orders N] "
               "[--verbose]\n";
  return 64;
}

}  // namespace
}  // namespace frontier

int main(int argc, char** argv) { return frontier::Main(argc, argv); }
