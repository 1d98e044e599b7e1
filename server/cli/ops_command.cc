#include "server/cli/ops_command.h"

#include <fcntl.h>
#include "os/child_process.h"
#include "os/sha256.h"
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "search_spaces/input_bounds.h"
#include "server/cli/cli.h"
#include "server/cli/local_cluster.h"
#include "server/report/op_leaderboard.h"
#include "server/store/open_store.h"
#include "server/store/store.h"

namespace frontier {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr size_t kMaxSource = 256 * 1024;  // kernel_lab.h's kMaxCandidateBytes
constexpr size_t kMaxChildOutput = 8 << 20;

std::atomic<pid_t> running_child{0};

// Ctrl-C: the judge (in a process group of its own) goes with us.
void StopChildAndExit(int signal) {
  const pid_t child = running_child.load();
  if (child > 0) kill(-child, SIGKILL);
  _exit(128 + signal);
}

// The judge (frontier-trial --op-candidate) ended without a verdict: its own failure, not the candidate's.
class JudgeFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ChildResult {
  int exit_code = -1;  // -1: killed (time-out or signal)
  std::string out;
  bool timed_out = false;
};

// Runs `argv` with its standard output captured (at most kMaxChildOutput;
// its standard error is ours), killed with its process group after
// `timeout_s`.
ChildResult RunChild(const std::vector<std::string>& argv, double timeout_s) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  ChildSetup setup;
  setup.stdout_fd = pipe_fds[1];
  setup.stderr_fd = STDERR_FILENO;
  std::string error;
  const pid_t pid = SpawnChild(argv, nullptr, setup, &error);
  if (pid < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    throw JudgeFailure(error + ": nothing is recorded");  // a wrong --trial-binary, not the candidate's doing
  }
  running_child = pid;
  close(pipe_fds[1]);
  ChildResult result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  char buffer[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    pollfd fd{pipe_fds[0], POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000))) <= 0) continue;
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    if (result.out.size() < kMaxChildOutput) result.out.append(buffer, static_cast<size_t>(n));
  }
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  running_child = 0;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  return result;
}

std::string ReadFile(const fs::path& path, size_t max) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot be read");
  std::string text(max + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(max + 1));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > max) throw std::runtime_error(path.string() + ": longer than " + std::to_string(max) + " bytes");
  return text;
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error(path.string() + ": cannot be written");
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The last line of `text` that parses as a JSON object, else null.
json LastJsonLine(const std::string& text) {
  std::stringstream in(text);
  json last;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] != '{') continue;
    try {
      last = ParseBoundedJson(line, kMaxChildOutput);
    } catch (const std::exception&) {
    }
  }
  return last;
}

std::string Str(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::optional<double> Median(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return std::nullopt;
  const json& v = j[key];
  if (v.is_number()) return v.get<double>();
  if (v.is_object() && v.contains("median") && v["median"].is_number()) return v["median"].get<double>();
  return std::nullopt;
}

OpCandidateFacts FactsOf(const OpCandidateRow& row) {
  OpCandidateFacts f;
  f.candidate = row.candidate;
  f.source_kind = row.source_kind;
  f.round = row.round;
  f.source_hash = row.source_hash;
  f.outcome = row.outcome;
  f.speedup = row.speedup;
  f.speedup_low = row.speedup_low;
  f.speedup_high = row.speedup_high;
  json verdict;
  try {
    verdict = ParseBoundedJson(row.result_json, 16 << 20);
  } catch (const std::exception&) {
  }
  f.reason = Str(verdict, "reason");
  f.variant = Str(verdict, "variant");
  if (verdict.is_object() && verdict.contains("timing")) {
    const json& t = verdict["timing"];
    f.ms = Median(t, "forward_backward_ms");
    f.reference_ms = Median(t, "reference_forward_backward_ms");
    f.peak_mb = Median(t, "peak_mb");
    f.reference_peak_mb = Median(t, "reference_peak_mb");
  }
  return f;
}

OpLeaderboard Leaderboard(Store& store, const OpRunRecord& run) {
  std::vector<OpCandidateFacts> facts;
  for (const OpCandidateRow& row : store.ListOpCandidates(run.id)) facts.push_back(FactsOf(row));
  return BuildOpLeaderboard(run.name, run.op, std::move(facts));
}

// The judged candidate with the largest median speed-up, kept as DIR/best:
// the plugin, its source and manifest.json (what `lab:DIR/best` reads).
void KeepBest(Store& store, const OpRunRecord& run, const fs::path& run_dir) {
  const OpCandidateRow* best = nullptr;
  const std::vector<OpCandidateRow> rows = store.ListOpCandidates(run.id);
  for (const OpCandidateRow& row : rows) {
    if (row.outcome == "timed" && (best == nullptr || row.speedup > best->speedup)) best = &row;
  }
  if (best == nullptr) return;
  const json verdict = ParseBoundedJson(best->result_json, 16 << 20);
  const fs::path dir = run_dir / "best";
  fs::create_directories(dir);
  fs::copy_file(Str(verdict, "plugin"), dir / "plugin.so", fs::copy_options::overwrite_existing);
  WriteFile(dir / "source.cc", best->source);
  const json manifest = {{"schema", 1},
                         {"run", run.name},
                         {"op", run.op},
                         {"variant", Str(verdict, "variant")},
                         {"candidate", best->candidate},
                         {"source_hash", best->source_hash},
                         {"plugin", "plugin.so"},
                         {"source", "source.cc"},
                         {"compiler", verdict.value("compiler", json())},
                         {"flags", verdict.value("flags", json())},
                         {"torch_version", verdict.value("torch_version", json())},
                         {"speedup", {{"median", best->speedup}, {"low", best->speedup_low}, {"high", best->speedup_high}}},
                         {"shapes", verdict.contains("timing") ? verdict["timing"].value("shapes", json()) : json()}};
  WriteFile(dir / "manifest.json", manifest.dump(2) + "\n");
  std::cerr << "frontier: best of " << run.name << ": " << best->candidate << " ("
            << Str(verdict, "variant") << ") kept as " << dir.string() << " (lab:" << dir.string() << ")\n";
}

class OpRun {
 public:
  // `profile`: the stored trial's profile the model is told of (null without one).
  OpRun(const OpsOptions& options, Store& store, OpRunRecord run, fs::path dir, json profile)
      : options_(options), store_(store), run_(std::move(run)), dir_(std::move(dir)), profile_(std::move(profile)) {}

  // Judges `source` as `name` unless the run has it already; true when judged now.
  bool Judge(const fs::path& source, const std::string& name, const std::string& kind, int round) {
    const std::string text = ReadFile(source, kMaxSource);
    const std::string hash = Sha256Hex(text);
    for (const OpCandidateRow& row : store_.ListOpCandidates(run_.id)) {
      if (row.candidate == name || row.source_hash == hash) {
        std::cerr << "frontier: " << name << ": recorded already (" << row.candidate << ", " << row.outcome << ")\n";
        return false;
      }
    }
    const fs::path workdir = dir_ / "candidates" / name;
    fs::remove_all(workdir);  // an attempt that was interrupted
    std::cerr << "frontier: judging " << name << " ..." << std::endl;
    const std::vector<std::string> argv{TrialBinary(), "--op-candidate", fs::absolute(source).string(), "--op",
                                        run_.op, "--spec", (dir_ / "spec.json").string(), "--workdir",
                                        workdir.string(), "--rounds", std::to_string(options_.timing_rounds),
                                        "--run-timeout", std::to_string(options_.run_timeout_s)};
    const ChildResult child = RunChild(argv, options_.candidate_timeout_s);
    json verdict = LastJsonLine(child.out);
    if (!verdict.is_object() || Str(verdict, "outcome").empty()) {
      if (!child.timed_out) {
        // The judge runs the candidate in sandboxed runners and gives a verdict on whatever they do, so
        // ending without one is the judge's failure (a wrong --trial-binary, a flag it refuses, a crash of
        // its own): recorded as the candidate's, it would stand for good (a candidate is judged once).
        throw JudgeFailure(TrialBinary() + " --op-candidate ended without a verdict on " + name + " (" +
                           (child.exit_code < 0 ? std::string("killed by a signal")
                                                : "exit " + std::to_string(child.exit_code)) +
                           "; its standard error above says why): nothing is recorded for it");
      }
      verdict = {{"event", "op_candidate"},
                 {"outcome", "timed_out"},
                 {"reason", "the judge did not finish within " + std::to_string(options_.candidate_timeout_s) +
                                " s"}};
    }
    OpCandidateRow row;
    row.run_id = run_.id;
    row.candidate = name;
    row.source_kind = kind;
    row.round = round;
    row.source_hash = hash;
    row.source = text;
    row.outcome = Str(verdict, "outcome");
    if (row.outcome == "timed") {
      const json& s = verdict["timing"]["speedup"];
      row.speedup = s.value("median", 0.0);
      row.speedup_low = s.value("low", 0.0);
      row.speedup_high = s.value("high", 0.0);
    }
    row.result_json = verdict.dump(-1, ' ', false, json::error_handler_t::replace);
    row.created_ms = NowMs();
    store_.RecordOpCandidate(row);
    std::cerr << "frontier: " << name << ": " << row.outcome
              << (row.outcome == "timed" ? " " + std::to_string(row.speedup) + "x" : ": " + Str(verdict, "reason"))
              << "\n";
    return true;
  }

  double BestSpeedup() {
    double best = 0;
    for (const OpCandidateRow& row : store_.ListOpCandidates(run_.id)) {
      if (row.outcome == "timed") best = std::max(best, row.speedup);
    }
    return best;
  }

  bool TargetReached() { return options_.target > 0 && BestSpeedup() >= options_.target; }

  // What the model is told: the op's contract, the shapes and every attempt so far.
  json Context(int round) {
    const ChildResult contract = RunChild(
        {TrialBinary(), "--op-contract", run_.op, "--spec", (dir_ / "spec.json").string()}, 600);
    json context = LastJsonLine(contract.out);
    if (!context.is_object()) throw std::runtime_error("frontier-trial --op-contract " + run_.op + " failed");
    context["round"] = round;
    context["rounds"] = options_.rounds;
    context["count"] = options_.per_round;
    context["target_speedup"] = options_.target > 0 ? json(options_.target) : json();
    context["profile"] = profile_;
    json attempts = json::array();
    for (const OpCandidateRow& row : store_.ListOpCandidates(run_.id)) {
      json verdict = ParseBoundedJson(row.result_json, 16 << 20);
      json a = {{"candidate", row.candidate}, {"round", row.round}, {"outcome", row.outcome},
                {"reason", Str(verdict, "reason")}};
      if (row.outcome == "timed") {
        a["speedup"] = row.speedup;
        a["speedup_interval"] = {row.speedup_low, row.speedup_high};
      }
      if (verdict.contains("gate") && verdict["gate"].is_array()) {
        for (const json& g : verdict["gate"]) {
          if (g.is_object() && !g.value("passed", true)) {
            a["where"] = Str(g, "where");
            a["worst_rel_error"] = g.value("worst_rel_error", json());
          }
        }
      }
      if (row.outcome == "compile_error" && verdict.contains("compile")) a["compile_log"] = Str(verdict["compile"], "log");
      attempts.push_back(a);
    }
    context["attempts"] = attempts;
    return context;
  }

  // One model round: drafts, then judges them. False: the model could not be used.
  bool Draft(int round) {
    const fs::path drafts = dir_ / "drafts" / ("r" + std::to_string(round));
    fs::remove_all(drafts);
    fs::create_directories(drafts);
    WriteFile(drafts / "context.json", Context(round).dump(2));
    std::vector<std::string> argv{Drafter(), "--endpoint", options_.endpoint, "--model", options_.model, "--context",
                                  (drafts / "context.json").string(), "--out", drafts.string(), "--count",
                                  std::to_string(options_.per_round)};
    if (!options_.api_key_file.empty()) argv.insert(argv.end(), {"--api-key-file", options_.api_key_file});
    std::cerr << "frontier: round " << round << ": asking " << options_.model << " for " << options_.per_round
              << " candidates ..." << std::endl;
    const ChildResult child = RunChild(argv, 1800);
    const json answer = LastJsonLine(child.out);
    if (child.exit_code != 0) {
      std::cerr << "frontier: round " << round << ": the model cannot be used (frontier-llm-kernels exit "
                << child.exit_code << "); the run stops here and continues from this round when run again\n";
      return false;
    }
    if (answer.is_object() && answer.contains("errors") && answer["errors"].is_array()) {
      for (const json& e : answer["errors"]) {
        if (e.is_string()) std::cerr << "frontier: round " << round << ": " << e.get<std::string>() << "\n";
      }
    }
    if (!answer.is_object() || !answer.contains("candidates") || !answer["candidates"].is_array()) return true;
    for (const json& c : answer["candidates"]) {
      const std::string name = Str(c, "name");
      const fs::path file = drafts / (name + ".cc");
      if (name.empty() || name.find('/') != std::string::npos || !fs::exists(file)) continue;
      Judge(file, name, "llm", round);
      if (TargetReached()) break;
    }
    return true;
  }

  int LastRound() {
    int last = 0;
    for (const OpCandidateRow& row : store_.ListOpCandidates(run_.id)) {
      if (row.source_kind == "llm") last = std::max(last, row.round);
    }
    return last;
  }

 private:
  std::string TrialBinary() const {
    return options_.trial_binary.empty() ? SiblingBinary("frontier-trial") : options_.trial_binary;
  }
  std::string Drafter() const {
    if (!options_.drafter.empty()) return options_.drafter;
    const fs::path source_tree = fs::path(FRONTIER_SOURCE_DIR) / "proposers" / "llm" / "frontier-llm-kernels";
    return fs::exists(source_tree) ? source_tree.string() : "frontier-llm-kernels";
  }

  const OpsOptions& options_;
  Store& store_;
  OpRunRecord run_;
  fs::path dir_;
  json profile_;
};

// What the model is told of the trial's profile: its bottleneck class and
// the operators with the largest shares of the step (docs/profiling.md).
json ProfileOf(const json& result) {
  json profile = {{"bottleneck", nullptr}, {"top_ops", json::array()}};
  if (!result.is_object()) return profile;
  if (result.contains("bottleneck")) {
    const json& b = result["bottleneck"];
    if (b.is_string()) profile["bottleneck"] = b;
    for (const char* key : {"class", "verdict", "kind"}) {
      if (b.is_object() && b.contains(key) && b[key].is_string()) profile["bottleneck"] = b[key];
    }
  }
  if (result.contains("profile") && result["profile"].is_object()) {
    const json& p = result["profile"];
    for (const char* list : {"top_operators", "top_ops", "ops", "operators"}) {
      if (!p.contains(list) || !p[list].is_array()) continue;
      for (const json& op : p[list]) {
        if (!op.is_object() || profile["top_ops"].size() >= 10) continue;
        json entry = {{"name", Str(op, "name")}};
        for (const char* share : {"share", "time_share", "self_share"}) {
          if (op.contains(share) && op[share].is_number()) entry["share"] = op[share].get<double>();
        }
        profile["top_ops"].push_back(entry);
      }
      break;
    }
  }
  return profile;
}

// A command trial's spec with the op calls its profile recognized
// (profile.lab_calls, worker/profile/lab_calls.h) as its op_calls, in the
// precision it trained in: its own program is not a model frontier-trial can
// build, so the candidate is judged at the shapes the program called the op
// with. Throws, listing what the profile holds, when it has no such call.
json WithCommandTrialCalls(json spec, const json& result, const std::string& trial_id, const std::string& op) {
  const auto text = [](const json& object, const char* key) {
    return object.is_object() && object.contains(key) && object[key].is_string() ? object[key].get<std::string>()
                                                                                 : std::string();
  };
  const json profile = result.is_object() && result.contains("profile") ? result["profile"] : json();
  json calls = json::array();
  std::string recognized;
  if (profile.is_object() && profile.contains("lab_calls") && profile["lab_calls"].is_array()) {
    for (const json& call : profile["lab_calls"]) {
      if (!call.is_object() || !call.contains("shapes") || !call["shapes"].is_array()) continue;
      const std::string name = text(call, "op");
      if (recognized.size() < 600) recognized += (recognized.empty() ? "" : ", ") + name + " " + call["shapes"].dump();
      // The most a spec takes (trial_spec.cc, op_calls); the worker lists each distinct call once.
      if (name == op && calls.size() < 64) calls.push_back({{"op", name}, {"shapes", call["shapes"]}});
    }
  }
  if (calls.empty()) {
    std::string operators;
    if (profile.is_object() && profile.contains("top_operators") && profile["top_operators"].is_array()) {
      for (const json& row : profile["top_operators"]) {
        if (!row.is_object() || operators.size() > 600) continue;
        operators += std::string(operators.empty() ? "" : ", ") + text(row, "name") +
                     (row.contains("input_dims") ? " " + row["input_dims"].dump() : "");
      }
    }
    throw std::runtime_error(
        "--from-trial: " + trial_id + " is a command trial, and its profile has no " + op +
        " call to judge candidates at (" +
        (recognized.empty() ? std::string("no op call recognized") : "recognized: " + recognized) +
        (operators.empty() ? std::string("; no profile was recorded: is profiling off, is it a later seed (only seed "
                                          "1 of a configuration is profiled, unless profile: {seeds: all}), or did "
                                          "the trial fail?")
                           : "; its top operators: " + operators) +
        "). Kernel-lab calls are recognized in a command trial's profiled steps: attention as matmul, softmax, "
        "matmul (docs/kernel-lab.md)");
  }
  spec["op_calls"] = calls;
  if (!spec.contains("runtime") || !spec["runtime"].is_object()) spec["runtime"] = json::object();
  // The precision the trial trained in (the SDK's: params.precision, else runtime.precision).
  if (const std::string precision = text(result, "precision"); !precision.empty()) {
    spec["runtime"]["precision"] = precision;
  }
  return spec;
}

// The spec the run judges at: --spec's file, or a stored trial's spec (and
// its profile, for the model's prompt; a command trial's recognized op calls).
json ResolveSpec(const OpsOptions& options, Store& store, json& profile) {
  if (!options.spec.empty()) return ParseBoundedJson(ReadFile(options.spec, 1 << 20), 1 << 20);
  std::string trial_id = options.from_trial;
  if (const auto slash = trial_id.find('/'); slash != std::string::npos) trial_id = trial_id.substr(slash + 1);
  const std::optional<TrialRow> trial = store.GetTrial(trial_id);
  if (!trial) throw std::runtime_error("--from-trial: no trial " + trial_id + " in " + options.db);
  json spec = ParseBoundedJson(trial->spec_json, 1 << 20);
  const json result = trial->result_json.empty() ? json() : ParseBoundedJson(trial->result_json, 16 << 20);
  if (!result.is_null()) profile = ProfileOf(result);
  if (spec.is_object() && spec.contains("command")) spec = WithCommandTrialCalls(spec, result, trial_id, options.op);
  return spec;
}

}  // namespace

int OptimizeOp(const OpsOptions& options) {
  if (options.name.empty() || options.op.empty()) throw std::runtime_error("ops optimize needs NAME and --op");
  if (options.spec.empty() == options.from_trial.empty()) {
    throw std::runtime_error("ops optimize needs one of --spec FILE and --from-trial EXP/TRIAL");
  }
  if (options.candidates.empty() && options.rounds == 0) {
    throw std::runtime_error("ops optimize needs --candidates DIR, or --rounds N with --endpoint and --model");
  }
  if (options.rounds > 0 && (options.endpoint.empty() || options.model.empty())) {
    throw std::runtime_error("--rounds needs --endpoint URL and --model NAME (the language model)");
  }
  if (!options.candidates.empty() && !fs::is_directory(options.candidates)) {
    throw std::runtime_error("--candidates " + options.candidates + ": not a folder");
  }
  signal(SIGINT, StopChildAndExit);
  signal(SIGTERM, StopChildAndExit);
  if (const fs::path parent = fs::path(options.db).parent_path();
      !parent.empty() && options.db.rfind("postgresql://", 0) != 0) {
    fs::create_directories(parent);
  }
  std::unique_ptr<Store> store = OpenStore(options.db);
  json profile;  // null unless the spec came from a stored trial
  const json spec = ResolveSpec(options, *store, profile);
  OpRunRecord run;
  if (std::optional<OpRunRecord> found = store->FindOpRun(options.name)) {
    if (found->op != options.op) {
      throw std::runtime_error("run " + options.name + " optimizes " + found->op + ", not " + options.op);
    }
    run = *found;
    std::cerr << "frontier: continuing " << run.name << " (" << run.id << ", "
              << store->ListOpCandidates(run.id).size() << " candidates recorded)\n";
  } else {
    run.name = options.name;
    run.op = options.op;
    run.spec_json = json{{"op", options.op},
                         {"spec", spec},
                         {"from_trial", options.from_trial},
                         {"candidates", options.candidates},
                         {"model", options.model},
                         {"endpoint", options.endpoint},
                         {"rounds", options.rounds},
                         {"per_round", options.per_round},
                         {"target", options.target},
                         {"timing_rounds", options.timing_rounds}}
                        .dump();
    run.created_ms = NowMs();
    run.id = store->CreateOpRun(run);
    std::cerr << "frontier: kernel lab run " << run.name << " (" << run.id << ")\n";
  }
  store->SetOpRunState(run.id, op_run_state::kRunning, NowMs());
  const fs::path dir = fs::absolute(fs::path(options.dir) / run.name);
  fs::create_directories(dir / "candidates");
  WriteFile(dir / "spec.json", spec.dump(2));
  OpRun lab(options, *store, run, dir, profile);
  bool stopped = false;
  try {
    if (!options.candidates.empty()) {
      std::vector<fs::path> files;
      for (const fs::directory_entry& entry : fs::directory_iterator(options.candidates)) {
        const std::string ext = entry.path().extension().string();
        if (entry.is_regular_file() && (ext == ".cc" || ext == ".cpp" || ext == ".cu")) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const fs::path& file : files) {
        if (lab.TargetReached()) break;
        lab.Judge(file, file.filename().string(), "folder", 0);
      }
    }
    for (int round = lab.LastRound() + 1; round <= options.rounds && !lab.TargetReached(); ++round) {
      if (!lab.Draft(round)) {
        stopped = true;
        break;
      }
    }
  } catch (const JudgeFailure& e) {
    std::cerr << "frontier: " << e.what() << "; the run stops here and judges it when run again\n";
    stopped = true;
  }
  KeepBest(*store, run, dir);
  store->SetOpRunState(run.id, stopped ? op_run_state::kStopped : op_run_state::kCompleted, NowMs());
  const OpLeaderboard board = Leaderboard(*store, run);
  std::cout << OpLeaderboardTable(board);
  if (!options.html.empty()) WriteFile(options.html, OpLeaderboardHtml(board));
  return stopped ? kCliFailed : kCliOk;
}

int ShowOpRun(const OpsOptions& options) {
  std::unique_ptr<Store> store = OpenStore(options.db, OpenMode::kReadOnly);
  const std::optional<OpRunRecord> run = store->FindOpRun(options.name);
  if (!run) throw std::runtime_error("no kernel lab run " + options.name + " in " + options.db);
  const OpLeaderboard board = Leaderboard(*store, *run);
  if (options.output == "json") {
    json j = board.ToJson();
    j["state"] = run->state;
    j["id"] = run->id;
    std::cout << j.dump(2) << "\n";
  } else if (options.output == "csv") {
    std::cout << OpLeaderboardCsv(board);
  } else {
    std::cout << OpLeaderboardTable(board);
  }
  if (!options.html.empty()) WriteFile(options.html, OpLeaderboardHtml(board));
  return kCliOk;
}

int ListOpRuns(const OpsOptions& options) {
  std::unique_ptr<Store> store = OpenStore(options.db, OpenMode::kReadOnly);
  for (const OpRunRecord& run : store->ListOpRuns(options.limit)) {
    const OpLeaderboard board = Leaderboard(*store, run);
    std::cout << run.id << "  " << run.name << "  " << run.op << "  " << run.state << "  " << board.candidates
              << " candidates";
    if (board.best) std::cout << "  best " << board.best->candidate << " " << board.best->speedup << "x";
    std::cout << "\n";
  }
  return kCliOk;
}

bool HasOpRun(const std::string& db, const std::string& name) {
  try {
    return OpenStore(db, OpenMode::kReadOnly)->FindOpRun(name).has_value();
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace frontier
