// Strategies replayed over measured trials, trace-driven: every trial of a
// grid is run once with frontier-trial (tests/bench/strategy_asha.py for the
// quickstart space, tests/bench/tabular_grid.py for the tabular benchmark's
// table), and its recorded output is replayed through the real Scheduler (an
// in-memory SQLite store, a simulated clock and N simulated workers) under a
// strategy: progress and eval events arrive at the time the trial's summed
// step time reached them, ASHA's stop replies end trials there. Compute is the
// summed step time the trials ran (stopped ones up to their stop); quality is
// the report's hypervolume (docs/report.md).
//
//   strategy_replay specs SPACE.yaml OUTDIR
//       writes OUTDIR/NNN.json: the grid's trial specs (the baseline and
//       every runnable configuration at seeds 1..repeats), and
//       OUTDIR/index.json: [{"file", "config", "seed"}]
//   strategy_replay compare {SPACE.yaml RUNDIR | TABLE.json.gz} STRATEGY [--workers N] [--orders N]
//                           [--verbose] [--target GAINED/COMPUTE] [--require-mean]
//       RUNDIR holds NNN.jsonl, the output of NNN.json (or a table holds the
//       trials, tests/bench/tables/quickstart_grid.json.gz); STRATEGY is the asha
//       strategy's YAML mapping without its seed, e.g. "{name: asha, min_steps: 20}";
//       ASHA runs once per seed 0..orders-1 (the seed orders the queue);
//       the last line counts the orders on target: at least GAINED of the
//       hypervolume the grid gains over the baseline alone (GainedShare) for
//       at most COMPUTE of its compute (default 0.95/0.15);
//       --verbose lists, per order, how each configuration's trials ended
//       (done, or sSTEP: stopped at STEP); --require-mean exits 1 unless the
//       means over the orders meet the target (a ctest).
//   strategy_replay table TABLE.json.gz [--strategies "S1;S2;..."] [--seeds N] [--workers N]
//                         [--sequences FILE]...
//       the tabular benchmark (docs/strategies.md): each strategy (a YAML
//       mapping without its seed) runs at seeds 0..N-1 over the table's
//       trials; printed: the hypervolume the front found gains over the
//       baseline alone, as a share of the whole grid's gain (GainedShare),
//       once 10%, 25% and 50% of the grid's configurations were evaluated
//       and once 10%, 25% and 50% of the grid's compute was spent (mean and
//       the half-width of its 95% t-interval over seeds). A --sequences file,
//       {"name": ..., "sequences": [[config key, ...], ...]}, is the order in
//       which another optimizer (tests/bench/tabular_optuna.py) asked for
//       configurations, one list per seed; each is scored the same way, its
//       configurations' trials taken from the table (both seeds, in order).
//   strategy_replay check TABLE.json.gz [--expect FRONT.json]
//       exit 0 when the grid replayed through the Scheduler finds exactly the
//       front the report builds from all of the table's trials, and with
//       --expect, when that front and its hypervolume are the ones
//       tests/bench/tabular_front.py computed without Frontier (a ctest).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <zlib.h>
#include <nlohmann/json.hpp>

#include "proto/clock.h"
#include "search_spaces/search_space.h"
#include "server/analysis/statistics.h"
#include "server/report/report.h"
#include "server/scheduler/scheduler.h"
#include "server/search/screen.h"
#include "server/search/strategy.h"
#include "server/store/sqlite_store.h"
#include "tests/bench/bench_main.h"

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

std::string ReadGzipFile(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot read " + path);
  std::string text;
  char buf[1 << 16];
  for (int n; (n = gzread(f, buf, sizeof buf)) > 0;) text.append(buf, n);
  const bool ok = gzeof(f);
  gzclose(f);
  if (!ok) throw std::runtime_error(path + ": not a complete gzip file");
  return text;
}

// One recorded trial: its progress and eval events and its result.
struct Recording {
  std::string config_key;
  int64_t seed = 0;
  std::vector<json> events;
  json result;
  double train_time_s = 0;  // summed step time of the whole trial
};

// Recordings by SpecKey, and the configuration keys in grid order.
struct Table {
  std::string space_yaml;
  std::map<std::string, Recording> recordings;
  std::vector<std::string> configs;
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

void Add(Table& table, Recording r) {
  if (!r.result.is_object())
    throw std::runtime_error(r.config_key + " seed " + std::to_string(r.seed) + ": no result");
  r.train_time_s = r.result.value("train_time_s", 0.0);
  if (std::find(table.configs.begin(), table.configs.end(), r.config_key) == table.configs.end()) {
    table.configs.push_back(r.config_key);
  }
  const std::string key = SpecKey(r.config_key, r.seed);
  table.recordings[key] = std::move(r);
}

// A run folder of strategy_asha.py: index.json and NNN.jsonl, the trials' output.
Table LoadRunDir(const std::string& space_path, const std::string& run_dir) {
  Table table;
  table.space_yaml = ReadFile(space_path);
  for (const json& entry : json::parse(ReadFile(run_dir + "/index.json"))) {
    std::string file = entry["file"].get<std::string>();
    file = file.substr(0, file.size() - 5) + ".jsonl";
    Recording r;
    r.config_key = entry["config"].get<std::string>();
    r.seed = entry["seed"].get<int64_t>();
    std::istringstream lines(ReadFile(run_dir + "/" + file));
    for (std::string line; std::getline(lines, line);) {
      const json event = json::parse(line, nullptr, false);
      if (!event.is_object()) continue;
      const std::string kind = event.value("event", "");
      if (kind == "progress" || kind == "eval") r.events.push_back(event);
      if (kind == "result") r.result = event;
    }
    if (!r.result.is_object()) throw std::runtime_error(file + " has no result line");
    Add(table, std::move(r));
  }
  return table;
}

// The tabular benchmark's table (tests/bench/tabular_grid.py): its events
// are the trial's progress and eval lines without "event", "eval": true
// marking the evaluations.
Table LoadTable(const std::string& path) {
  const json doc = json::parse(ReadGzipFile(path));
  Table table;
  table.space_yaml = doc.at("space").get<std::string>();
  for (const json& t : doc.at("trials")) {
    Recording r;
    r.config_key = t.at("config").get<std::string>();
    r.seed = t.at("seed").get<int64_t>();
    for (json e : t.at("events")) {
      const bool eval = e.value("eval", false);
      e.erase("eval");
      e["event"] = eval ? "eval" : "progress";
      r.events.push_back(std::move(e));
    }
    r.result = t.at("result");
    r.result["event"] = "result";
    Add(table, std::move(r));
  }
  return table;
}

// What a screening trial of `steps` steps would have measured of the
// recorded trial: its result with the speed figures at the progress event
// of step `steps`, whose median_step_time_ms is the median over the steps
// after the warm-up so far, as a screening trial's is (its warm-up is
// min(warmup_steps, steps / 2): equal for the recordings' warmup_steps <= steps / 2).
// Peak memory, parameters and MFU's peak stay the whole trial's.
json ScreenedAt(const Recording& r, int steps) {
  for (const json& e : r.events) {
    if (e.value("event", "") != "progress" || e.value("step", 0) != steps) continue;
    const double median_ms = e.at("median_step_time_ms").get<double>();
    json result = r.result;
    const double rows = result.value("batch_size", 0) * result.value("ranks", 1);
    result["throughput"]["samples_per_s"] = rows * 1000 / median_ms;
    result["throughput"]["per_rank_samples_per_s"] = rows / result.value("ranks", 1) * 1000 / median_ms;
    result["step_time_ms"] = {{"median", median_ms}};
    if (result.contains("mfu") && r.result.contains("step_time_ms")) {
      result["mfu"] =
          result["mfu"].get<double>() * r.result["step_time_ms"].value("median", median_ms) / median_ms;
    }
    result["steps_run"] = steps;
    return result;
  }
  throw std::runtime_error(r.config_key + ": no progress event at step " + std::to_string(steps) +
                           " to screen at (the recordings report every 10 steps)");
}

// A recorded trial as the ended row a store would hold.
TrialRow RowOf(const Recording& r, std::string id) {
  TrialRow row;
  row.id = std::move(id);
  row.config_json = r.config_key;
  row.is_baseline = r.config_key == "{}";
  row.seed = r.seed;
  row.state = r.result.value("status", "completed");
  row.result_json = r.result.dump();
  return row;
}

// The report's view of `trials`: its hypervolume and front.
Report ReportOf(const SearchSpace& space, const std::vector<TrialRow>& trials) {
  std::vector<TrialRecord> records;
  for (const TrialRow& t : trials) {
    TrialRecord record;
    record.trial_id = t.id;
    record.config = json::parse(t.config_json);
    record.config_key = ConfigKey(record.config);
    record.is_baseline = t.is_baseline;
    record.seed = t.seed;
    record.state = t.state;
    record.proposer = t.proposer;
    record.error = t.error;
    if (!t.result_json.empty()) record.result = json::parse(t.result_json);
    records.push_back(std::move(record));
  }
  return BuildReport("replay", space, std::move(records));
}

std::set<std::string> FrontOf(const Report& report) {
  std::set<std::string> front;
  for (const ConfigSummary& c : report.configs) {
    if (c.on_front) front.insert(c.config_key);
  }
  return front;
}

// Budgets at which a replay's hypervolume is read: once `configs` distinct
// configurations had a trial end (-1: the run evaluated fewer), and the
// last moment the summed compute was within `compute_s` (the run's end when
// it stayed within).
struct Checkpoints {
  std::vector<size_t> configs;
  std::vector<double> compute_s;
  std::vector<double> at_configs, at_compute;         // hypervolumes, filled by the replay
  double final_compute_s = 0, final_hypervolume = 0;  // at the run's end
};

struct Outcome {
  double compute_s = 0;           // screening included
  double screening_s = 0;         // the screening trials' share of it
  int screened = 0, dropped = 0;  // screening trials, configurations screening dropped
  double hypervolume = 0;
  int completed = 0, stopped = 0;
  std::set<std::string> front;
  std::map<std::string, std::string> fates;  // config key -> "120" (completed) or the steps it was stopped at
};

// Runs an experiment of `yaml` through the Scheduler with `workers`
// simulated workers, every trial's events taken from `recordings`; reads
// the hypervolume at `checkpoints` when given.
Outcome Simulate(const std::string& yaml, const std::map<std::string, Recording>& recordings, int workers,
                 Checkpoints* checkpoints = nullptr) {
  SqliteStore store(":memory:");
  SimulatedClock clock;
  SchedulerOptions options;
  options.lease_timeout_ms = int64_t{1} << 50;  // simulated time: leases never lapse
  Scheduler scheduler(store, clock, options);
  const std::string id = scheduler.Submit(yaml, "replay.yaml").id;
  const SearchSpace space = ParseSearchSpace(yaml, "replay.yaml");
  const auto hypervolume_now = [&] { return ReportOf(space, store.ListTrials(id)).hypervolume; };
  if (checkpoints) {
    checkpoints->at_configs.assign(checkpoints->configs.size(), -1);
    checkpoints->at_compute.assign(checkpoints->compute_s.size(), -1);
  }
  std::set<std::string> configs_ended;

  // A screening trial (docs/strategies.md, Screening) runs the first
  // `steps` of its configuration's seed-1 recording: it reports no events
  // and ends after that share of its summed step time with what it
  // measured by then (ScreenedAt; the scheduler keeps the speed figures alone).
  struct Running {
    TrialRow trial;
    const Recording* recording;
    double start;
    size_t next = 0;  // the next event to deliver; events.size(): the result
    bool screening = false;
    double screening_s = 0;
    json screening_result;
  };
  std::vector<std::optional<Running>> slots(workers);
  double now = 0;
  Outcome outcome;
  // Before a trial's end adds `cost` of compute: the compute budgets it
  // passes read what had ended within them.
  const auto before_end = [&](double cost) {
    if (!checkpoints) return;
    for (size_t i = 0; i < checkpoints->compute_s.size(); ++i) {
      if (checkpoints->at_compute[i] < 0 && outcome.compute_s + cost > checkpoints->compute_s[i]) {
        checkpoints->at_compute[i] = hypervolume_now();
      }
    }
  };
  const auto after_end = [&](const std::string& config) {
    configs_ended.insert(config);
    if (!checkpoints) return;
    for (size_t i = 0; i < checkpoints->configs.size(); ++i) {
      if (checkpoints->at_configs[i] < 0 && configs_ended.size() >= checkpoints->configs[i]) {
        checkpoints->at_configs[i] = hypervolume_now();
      }
    }
  };
  for (;;) {
    for (int w = 0; w < workers; ++w) {
      if (slots[w]) continue;
      std::optional<TrialRow> trial = scheduler.Lease("w" + std::to_string(w));
      if (!trial) continue;
      const auto it = recordings.find(SpecKey(trial->config_json, trial->seed));
      if (it == recordings.end()) throw std::runtime_error("no recording of " + trial->config_json);
      Running run{*trial, &it->second, now, 0, false, 0, json()};
      if (trial->proposer == kScreenProposer) {
        run.screening = true;
        run.next = run.recording->events.size();
        run.screening_result = ScreenedAt(*run.recording, trial->steps);
        run.screening_s = run.recording->train_time_s * trial->steps /
                          std::max(1, run.recording->result.value("steps_run", 1));
      }
      slots[w] = std::move(run);
    }
    // The earliest next event of any running trial.
    int earliest = -1;
    double at = 0;
    for (int w = 0; w < workers; ++w) {
      if (!slots[w]) continue;
      const Running& r = *slots[w];
      const double t = r.start + (r.screening ? r.screening_s
                                  : r.next < r.recording->events.size()
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
    if (r.screening) {
      scheduler.Complete(worker, r.trial.id, r.trial.attempt, r.screening_result.dump());
      outcome.compute_s += r.screening_s;
      outcome.screening_s += r.screening_s;
      ++outcome.screened;
      slots[earliest].reset();
      continue;  // not an evaluation of its configuration
    }
    if (r.next < r.recording->events.size()) {
      const ProgressReply reply =
          scheduler.Progress(worker, r.trial.id, r.trial.attempt, r.recording->events[r.next++].dump());
      if (!reply.stop) continue;
      before_end(now - r.start);
      scheduler.Fail(worker, r.trial.id, r.trial.attempt, "stopped: " + reply.reason, false, "");
      outcome.compute_s += now - r.start;
      ++outcome.stopped;
      outcome.fates[r.trial.config_json] +=
          " s" + std::to_string(r.recording->events[r.next - 1].value("step", 0));
    } else {
      before_end(r.recording->train_time_s);
      scheduler.Complete(worker, r.trial.id, r.trial.attempt, r.recording->result.dump());
      outcome.compute_s += r.recording->train_time_s;
      ++outcome.completed;
      outcome.fates[r.trial.config_json] += " done";
    }
    after_end(r.trial.config_json);
    slots[earliest].reset();
  }
  const Report report = ReportOf(space, store.ListTrials(id));
  outcome.hypervolume = report.hypervolume;
  outcome.front = FrontOf(report);
  if (report.screening) outcome.dropped = report.screening->dropped();
  if (checkpoints) {
    checkpoints->final_compute_s = outcome.compute_s;
    checkpoints->final_hypervolume = outcome.hypervolume;
    for (double& hv : checkpoints->at_compute) {
      if (hv < 0) hv = outcome.hypervolume;  // the whole run stayed within that budget
    }
  }
  return outcome;
}

// The space `yaml` under `strategy` (a YAML mapping), in place of a
// one-line top-level `strategy:` of its own; "MAPPING | screen: {...}" also
// adds the top-level lines after the bar (one `key: value` each, `|`-separated).
std::string WithStrategy(const std::string& yaml, const std::string& strategy) {
  std::istringstream in(yaml);
  std::string out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("strategy:", 0) != 0) out += line + "\n";
  }
  std::istringstream parts(strategy);
  std::string part;
  std::getline(parts, part, '|');
  out += "strategy: " + part + "\n";
  while (std::getline(parts, part, '|')) out += part.substr(part.find_first_not_of(' ')) + "\n";
  return out;
}

// Mean, sample standard deviation, min and max of `v`.
std::array<double, 4> Stats(const std::vector<double>& v) {
  double sum = 0, sq = 0;
  for (double x : v) sum += x;
  const double mean = sum / v.size();
  for (double x : v) sq += (x - mean) * (x - mean);
  const double sd = v.size() > 1 ? std::sqrt(sq / (v.size() - 1)) : 0;
  return {mean, sd, *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
}

// "mean +- h": h the half-width of the two-sided 95% Student-t interval of
// the mean (SummarizeMetric's; 0 with one value).
std::string MeanAndInterval(const std::vector<double>& v) {
  const MetricSummary s = SummarizeMetric(v);
  char text[64];
  std::snprintf(text, sizeof text, "%.3f +- %.3f", s.mean, (s.ci_high - s.ci_low) / 2);
  return text;
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

// Search quality as the share of the hypervolume the grid gains over the
// baseline alone (which scores 1 in the report's baseline-normalized space):
// 0 for a run that found nothing better than the baseline (a strategy that
// stops every variant at its first rung), 1 for the grid's front. The share
// of the grid's hypervolume itself cannot tell them apart when the baseline
// alone scores most of it (0.983 on the quickstart).
double GainedShare(double hypervolume, double grid_hypervolume) {
  return grid_hypervolume > 1 ? (hypervolume - 1) / (grid_hypervolume - 1) : 0;
}

int Compare(const Table& table, const std::string& strategy, int workers, int orders, bool verbose,
            double target_gained, double target_compute, bool require_mean) {
  const std::string& yaml = table.space_yaml;
  const std::map<std::string, Recording>& recordings = table.recordings;
  const Outcome grid = Simulate(WithStrategy(yaml, "{name: grid}"), recordings, workers);
  std::printf("grid: %d trials, compute %.1f s, hypervolume %.4f (the baseline alone: 1), %zu configurations "
              "on the front\n",
              grid.completed, grid.compute_s, grid.hypervolume, grid.front.size());
  std::printf(
      "| asha seed | trials completed | stopped | screened out | compute (s) | screening (s) | compute / "
      "grid | hypervolume | hypervolume / grid | gained / grid's gain |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  std::vector<double> computes, hvs, gains, dropped;
  int on_target = 0;
  for (int seed = 0; seed < orders; ++seed) {
    std::string asha = strategy;
    asha.insert(asha.substr(0, asha.find('|')).rfind('}'), ", seed: " + std::to_string(seed));
    const Outcome o = Simulate(WithStrategy(yaml, asha), recordings, workers);
    const double compute = o.compute_s / grid.compute_s, hv = o.hypervolume / grid.hypervolume;
    const double gained = GainedShare(o.hypervolume, grid.hypervolume);
    std::printf("| %d | %d | %d | %d | %.1f | %.1f | %.3f | %.4f | %.3f | %.3f |\n", seed, o.completed, o.stopped,
                o.dropped, o.compute_s, o.screening_s, compute, o.hypervolume, hv, gained);
    dropped.push_back(o.dropped);
    if (verbose) {
      for (const auto& [config, fate] : o.fates) std::printf("|   | %s:%s\n", config.c_str(), fate.c_str());
    }
    computes.push_back(compute);
    hvs.push_back(hv);
    gains.push_back(gained);
    on_target += gained >= target_gained && compute <= target_compute;
  }
  const auto c = Stats(computes), h = Stats(hvs), g = Stats(gains), d = Stats(dropped);
  std::printf(
      "\n%s over %d queue orders, %d workers: compute / grid mean %.3f (sd %.3f, max %.3f), "
      "hypervolume / grid mean %.3f (sd %.3f, min %.3f), gained / grid's gain mean %.3f (sd %.3f, min %.3f), "
      "screened out %.0f to %.0f configurations; %d of %d orders at >= %.2f of the gain and <= %.2f compute\n",
      strategy.c_str(), orders, workers, c[0], c[1], c[3], h[0], h[1], h[2], g[0], g[1], g[2], d[2], d[3],
      on_target, orders, target_gained, target_compute);
  if (require_mean && !(g[0] >= target_gained && c[0] <= target_compute)) {
    std::printf("FAIL: the means miss the target of >= %.2f of the grid's gain at <= %.2f compute\n",
                target_gained, target_compute);
    return 1;
  }
  return 0;
}

// The trials of the configurations of `sequence` (the baseline first, then
// each configuration's seeds in order) as the rows a store would hold, all
// ended; the hypervolume at each checkpoint is that of a prefix.
void ScoreSequence(const SearchSpace& space, const Table& table, std::vector<std::string> sequence,
                   Checkpoints& checkpoints) {
  sequence.insert(sequence.begin(), "{}");
  std::vector<TrialRow> rows;
  std::set<std::string> seen;
  double compute = 0;
  checkpoints.at_configs.assign(checkpoints.configs.size(), -1);
  checkpoints.at_compute.assign(checkpoints.compute_s.size(), -1);
  for (const std::string& config : sequence) {
    if (!seen.insert(config).second) continue;
    double cost = 0;
    std::vector<TrialRow> trials;
    for (int64_t seed = 1;; ++seed) {
      const auto it = table.recordings.find(SpecKey(config, seed));
      if (it == table.recordings.end()) break;
      cost += it->second.train_time_s;
      trials.push_back(RowOf(it->second, std::to_string(rows.size() + trials.size())));
    }
    if (trials.empty()) throw std::runtime_error("the table has no trial of " + config);
    for (size_t i = 0; i < checkpoints.compute_s.size(); ++i) {
      if (checkpoints.at_compute[i] < 0 && compute + cost > checkpoints.compute_s[i]) {
        checkpoints.at_compute[i] = ReportOf(space, rows).hypervolume;
      }
    }
    compute += cost;
    rows.insert(rows.end(), trials.begin(), trials.end());
    for (size_t i = 0; i < checkpoints.configs.size(); ++i) {
      if (checkpoints.at_configs[i] < 0 && seen.size() >= checkpoints.configs[i]) {
        checkpoints.at_configs[i] = ReportOf(space, rows).hypervolume;
      }
    }
  }
  checkpoints.final_compute_s = compute;
  checkpoints.final_hypervolume = ReportOf(space, rows).hypervolume;
  for (double& hv : checkpoints.at_compute) {
    if (hv < 0) hv = checkpoints.final_hypervolume;
  }
}

constexpr std::array<double, 3> kShares = {0.10, 0.25, 0.50};

int TableCommand(const std::string& table_path, const std::vector<std::string>& strategies, int seeds,
                 int workers, const std::vector<std::string>& sequence_files) {
  const Table table = LoadTable(table_path);
  const SearchSpace space = ParseSearchSpace(table.space_yaml, table_path);
  const Outcome grid = Simulate(WithStrategy(table.space_yaml, "{name: grid}"), table.recordings, workers);
  Checkpoints budgets;
  for (double share : kShares) {
    budgets.configs.push_back(static_cast<size_t>(std::ceil(share * table.configs.size())));
    budgets.compute_s.push_back(share * grid.compute_s);
  }
  std::printf("grid: %zu configurations, %d trials, compute %.1f s, hypervolume %.4f, %zu on the front\n\n",
              table.configs.size(), grid.completed, grid.compute_s, grid.hypervolume, grid.front.size());
  std::printf("the hypervolume the front found gains over the baseline alone, as a share of the grid's gain "
              "(GainedShare; mean +- the half-width of its 95%% t-interval over seeds)\n\n");
  std::printf("| strategy | seeds |");
  for (size_t i = 0; i < kShares.size(); ++i)
    std::printf(" %zu configs (%.0f%%) |", budgets.configs[i], 100 * kShares[i]);
  for (double share : kShares) std::printf(" %.0f%% compute |", 100 * share);
  std::printf(" whole run: compute | whole run: gained share | whole run: hypervolume / grid's |");
  std::printf("\n| --- | --- |");
  for (size_t i = 0; i < 2 * kShares.size() + 3; ++i) std::printf(" --- |");
  std::printf("\n");
  const auto print_row = [&](const std::string& name, const std::vector<Checkpoints>& runs) {
    std::printf("| %s | %zu |", name.c_str(), runs.size());
    for (int kind = 0; kind < 2; ++kind) {
      for (size_t i = 0; i < kShares.size(); ++i) {
        std::vector<double> v;
        for (const Checkpoints& c : runs) {
          const double hv = kind == 0 ? c.at_configs[i] : c.at_compute[i];
          if (hv >= 0) v.push_back(GainedShare(hv, grid.hypervolume));
        }
        if (v.size() < runs.size()) {
          std::printf(" fewer evaluated in %zu |", runs.size() - v.size());
        } else {
          std::printf(" %s |", MeanAndInterval(v).c_str());
        }
      }
    }
    std::vector<double> compute, gained, hv;
    for (const Checkpoints& c : runs) {
      compute.push_back(c.final_compute_s / grid.compute_s);
      gained.push_back(GainedShare(c.final_hypervolume, grid.hypervolume));
      hv.push_back(c.final_hypervolume / grid.hypervolume);
    }
    const auto h = Stats(hv);
    std::printf(" %s | %s | %.3f (min %.3f) |\n", MeanAndInterval(compute).c_str(), MeanAndInterval(gained).c_str(),
                h[0], h[2]);
    std::fflush(stdout);
  };
  for (const std::string& strategy : strategies) {
    std::vector<Checkpoints> runs;
    const bool seeded = strategy.find("grid") == std::string::npos;
    for (int seed = 0; seed < (seeded ? seeds : 1); ++seed) {
      std::string s = strategy;
      const size_t close = s.substr(0, s.find('|')).rfind('}');
      if (close == std::string::npos) {
        throw std::runtime_error("strategy '" + strategy + "' is not a YAML mapping such as {name: tpe}");
      }
      if (seeded) s.insert(close, ", seed: " + std::to_string(seed));
      Checkpoints c = budgets;
      Simulate(WithStrategy(table.space_yaml, s), table.recordings, workers, &c);
      runs.push_back(std::move(c));
    }
    print_row(strategy, runs);
  }
  for (const std::string& file : sequence_files) {
    const json doc = json::parse(ReadFile(file));
    std::vector<Checkpoints> runs;
    for (const json& sequence : doc.at("sequences")) {
      Checkpoints c = budgets;
      ScoreSequence(space, table, sequence.get<std::vector<std::string>>(), c);
      runs.push_back(std::move(c));
    }
    print_row(doc.at("name").get<std::string>(), runs);
  }
  return 0;
}

int Check(const std::string& table_path, const std::string& expect_path) {
  const Table table = LoadTable(table_path);
  const SearchSpace space = ParseSearchSpace(table.space_yaml, table_path);
  std::vector<TrialRow> rows;
  for (const auto& [key, r] : table.recordings) rows.push_back(RowOf(r, key));
  const Report all = ReportOf(space, rows);
  const Outcome grid = Simulate(WithStrategy(table.space_yaml, "{name: grid}"), table.recordings, 2);
  const std::set<std::string> front = FrontOf(all);
  std::printf("table: %zu trials, %zu configurations, front of %zu, hypervolume %.6f\n", rows.size(),
              table.configs.size(), front.size(), all.hypervolume);
  std::printf("grid replayed: %d trials completed, front of %zu, hypervolume %.6f\n", grid.completed,
              grid.front.size(), grid.hypervolume);
  if (grid.completed != static_cast<int>(rows.size()) || grid.front != front ||
      std::abs(grid.hypervolume - all.hypervolume) > 1e-12) {
    std::printf("MISMATCH: the replayed grid's front is not the table's\n");
    return 1;
  }
  std::printf("the replayed grid finds the table's front exactly\n");
  if (!expect_path.empty()) {
    // The same front and hypervolume computed without Frontier (tests/bench/tabular_front.py).
    const json expected = json::parse(ReadFile(expect_path));
    const std::set<std::string> expected_front = expected.at("front").get<std::set<std::string>>();
    const double expected_hv = expected.at("hypervolume").get<double>();
    std::printf("expected (%s): front of %zu, hypervolume %.6f\n", expect_path.c_str(), expected_front.size(),
                expected_hv);
    if (expected_front != front || std::abs(expected_hv - all.hypervolume) > 1e-9 * expected_hv) {
      for (const std::string& key : expected_front)
        if (!front.count(key)) std::printf("MISMATCH: %s is on the expected front only\n", key.c_str());
      for (const std::string& key : front)
        if (!expected_front.count(key)) std::printf("MISMATCH: %s is on the report's front only\n", key.c_str());
      std::printf("MISMATCH: the report's front or hypervolume is not the independent computation's\n");
      return 1;
    }
    std::printf("the report's front and hypervolume equal the independent computation's\n");
  }

  // Screening at the default rule and 10 steps, each configuration measured
  // on its seed-1 recording, must keep every configuration of the front.
  ScreenSpec screen;
  screen.steps = 10;
  const auto measure = [&](const std::string& config) {
    const Recording& r = table.recordings.at(SpecKey(config, 1));
    return MeasureScreened(config, r.result.value("status", "completed"), ScreenedAt(r, screen.steps), "");
  };
  std::vector<ScreenMeasurement> measured;
  for (const std::string& config : table.configs) {
    if (config != "{}") measured.push_back(measure(config));
  }
  int dropped = 0, front_dropped = 0;
  for (const ScreenVerdict& v :
       ScreenOut(space.objectives, space.constraints, screen, measure("{}"), measured)) {
    if (v.kept) continue;
    ++dropped;
    if (front.count(v.config_key)) {
      ++front_dropped;
      std::printf("MISMATCH: screening drops %s of the front: %s\n", v.config_key.c_str(), v.reason.c_str());
    }
  }
  std::printf(
      "screening (%d steps, margin %.2f, noise %.2f) drops %d of %zu configurations, %d of the front\n",
      screen.steps, screen.margin, screen.noise, dropped, measured.size(), front_dropped);
  return front_dropped == 0 ? 0 : 1;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ';');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int Main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 3 && args[0] == "specs") return Specs(args[1], args[2]);
  if (args.size() == 2 && args[0] == "check") return Check(args[1], "");
  if (args.size() == 4 && args[0] == "check" && args[2] == "--expect") return Check(args[1], args[3]);
  if (args.size() >= 2 && args[0] == "table") {
    std::vector<std::string> strategies = SplitList(
        "{name: grid};{name: random};{name: sobol};{name: nsga2, population: 16, generations: 11};"
        "{name: tpe, trials: 170};{name: asha, min_steps: 20, eta: 3};"
        "{name: asha, min_steps: 20, eta: 3} | screen: {steps: 10};"
        "{name: asha, min_steps: 20, eta: 3} | screen: {steps: 10, in_trial: true}");
    std::vector<std::string> sequences;
    int seeds = 10, workers = 2;
    for (size_t i = 2; i + 1 < args.size(); i += 2) {
      if (args[i] == "--strategies") strategies = SplitList(args[i + 1]);
      if (args[i] == "--seeds") seeds = std::atoi(args[i + 1].c_str());
      if (args[i] == "--workers") workers = std::atoi(args[i + 1].c_str());
      if (args[i] == "--sequences") sequences.push_back(args[i + 1]);
    }
    return TableCommand(args[1], strategies, seeds, workers, sequences);
  }
  const bool from_table = args.size() >= 3 && args[0] == "compare" && args[1].size() > 8 &&
                          args[1].compare(args[1].size() - 8, 8, ".json.gz") == 0;
  if ((from_table || args.size() >= 4) && args[0] == "compare") {
    const size_t options = from_table ? 3 : 4;  // TABLE STRATEGY, or SPACE RUNDIR STRATEGY
    int workers = 2, orders = 10;
    double target_gained = 0.95, target_compute = 0.15;
    bool verbose = false, require_mean = false;
    for (size_t i = options; i < args.size(); ++i) {
      if (args[i] == "--verbose") {
        verbose = true;
      } else if (args[i] == "--require-mean") {
        require_mean = true;
      } else if (i + 1 < args.size()) {
        if (args[i] == "--workers") workers = std::atoi(args[i + 1].c_str());
        if (args[i] == "--orders") orders = std::atoi(args[i + 1].c_str());
        if (args[i] == "--target" &&
            std::sscanf(args[i + 1].c_str(), "%lf/%lf", &target_gained, &target_compute) != 2) {
          std::cerr << "strategy_replay: --target takes GAINED/COMPUTE, e.g. 0.95/0.15\n";
          return 64;
        }
        ++i;
      }
    }
    const Table table = from_table ? LoadTable(args[1]) : LoadRunDir(args[1], args[2]);
    return Compare(table, args[options - 1], workers, orders, verbose, target_gained, target_compute,
                   require_mean);
  }
  std::cerr
      << "usage: strategy_replay specs SPACE.yaml OUTDIR\n"
         "       strategy_replay compare {SPACE.yaml RUNDIR | TABLE.json.gz} STRATEGY [--workers N] "
         "[--orders N] "
         "[--verbose] [--target GAINED/COMPUTE] [--require-mean]\n"
         "       strategy_replay table TABLE.json.gz [--strategies \"S1;S2\"] [--seeds N] [--workers N] "
         "[--sequences FILE]...\n"
         "       strategy_replay check TABLE.json.gz [--expect FRONT.json]\n";
  return 64;
}

}  // namespace
}  // namespace frontier

int main(int argc, char** argv) {
  return frontier::bench::GuardedMain("strategy_replay", [&] { return frontier::Main(argc, argv); });
}
