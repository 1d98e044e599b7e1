#include "worker/trial/kernel_lab.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <sstream>

#include <torch/torch.h>
#include <torch/version.h>

#include "search_spaces/input_bounds.h"
#include "search_spaces/trial_spec.h"
#include "worker/host.h"
#include "worker/sandbox/sandbox.h"
#include "worker/trial/lab_config.h"
#include "worker/trial/lab_exchange.h"
#include "worker/trial/lab_timing.h"
#include "worker/trial/op_bench.h"
#include "worker/trial/ops/correctness.h"
#include "worker/trial/ops/op.h"
#include "worker/trial/plugin.h"

namespace frontier {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr int64_t kMaxRunsJson = 8 << 20;   // the runner's case list
constexpr int64_t kMaxRunsBin = 2LL << 30;  // its tensors
constexpr size_t kMaxLog = 4096;            // of a compiler's or a runner's output, kept in the verdict
constexpr int64_t kMaxLibrary = 512 << 20;  // the compiled candidate (the sandbox's largest file)
// What a runner may leave in its folder: its case list and tensors, and a little more.
constexpr int64_t kMaxRunnerBytes = kMaxRunsBin + kMaxRunsJson + (16 << 20);
// The folders of the candidate's sandboxed processes, one each, below its own (JudgeCandidate).
constexpr const char* kSandboxFolders[] = {"compile", "gate", "timing", "reference"};

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> parts;
  std::stringstream in(list);
  for (std::string part; std::getline(in, part, ';');) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

std::string Tail(const std::string& text, size_t max) {
  return text.size() <= max ? text : "..." + text.substr(text.size() - max);
}

std::string Head(const std::string& text, size_t max) {
  return text.size() <= max ? text : text.substr(0, max) + "...";
}

// The first line of `text` that says "error" (a compiler's), else its last line.
std::string ErrorLine(const std::string& text) {
  std::stringstream in(text);
  std::string last;
  for (std::string line; std::getline(in, line);) {
    if (line.find("error") != std::string::npos) return Head(line, 300);
    if (!line.empty()) last = line;
  }
  return Head(last, 300);
}

std::string Joined(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& a : argv) text += (text.empty() ? "" : " ") + a;
  return text;
}

// Written as a new file (worker/host.h): never through a link or into a FIFO a candidate left.
void WriteText(const fs::path& path, const std::string& text) {
  const std::string problem = WriteNewFile(path.string(), text);
  if (!problem.empty()) throw std::runtime_error(problem);
}

// The bytes a sandboxed process left in `folder`, links not followed.
int64_t BytesIn(const fs::path& folder) {
  int64_t bytes = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(folder, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) bytes += static_cast<int64_t>(it->file_size(ec));
  }
  return bytes;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

uint64_t FreshSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32 | device()) & 0x7fffffffffffffffULL;
}

bool IsCuda(const fs::path& source) { return source.extension() == ".cu"; }

// The compiler's command for a candidate: g++ with the flags frontier-trial
// was built with (lab_config.h), through the precompiled prelude when there
// is one; nvcc compile-only for sm_80 and sm_90 for a .cu file.
std::vector<std::string> CompileCommand(const fs::path& source, const fs::path& library) {
  if (IsCuda(source)) {
    std::vector<std::string> argv{kLabNvcc, "-std=c++17", "-O3", "-c", "-Xcompiler", "-fPIC",
                                  "-gencode", "arch=compute_80,code=sm_80", "-gencode", "arch=compute_90,code=sm_90"};
    const std::vector<std::string> flags = Split(kLabFlags);  // the defines and include folders, as g++ has them
    for (size_t i = 0; i < flags.size(); ++i) {
      if (flags[i].rfind("-D", 0) == 0 || flags[i].rfind("-I", 0) == 0) argv.push_back(flags[i]);
      if (flags[i] == "-isystem" && i + 1 < flags.size()) argv.insert(argv.end(), {flags[i], flags[i + 1]});
    }
    argv.insert(argv.end(), {source.string(), "-o", library.string() + ".o"});
    return argv;
  }
  std::vector<std::string> argv{kLabCxx};
  for (const std::string& flag : Split(kLabFlags)) argv.push_back(flag);
  if (std::string(kLabPrelude).size() > 0) argv.insert(argv.end(), {"-Winvalid-pch", "-include", kLabPrelude});
  argv.insert(argv.end(), {"-shared", source.string(), "-o", library.string()});
  return argv;
}

sandbox::Options SandboxFor(std::vector<std::string> argv, const fs::path& folder, double seconds,
                            int64_t memory_mb) {
  sandbox::Options options;
  options.argv = std::move(argv);
  options.folder = folder.string();
  options.read_only = Split(kLabReadDirs);
  options.limits.wall_seconds = seconds;
  options.limits.cpu_seconds = seconds * 4;  // every thread's CPU time counts
  options.limits.memory_bytes = memory_mb << 20;
  options.limits.output_bytes = 1 << 20;
  options.kill_on_network = true;  // a socket or connect() ends it with SIGSYS: RunnerFailure names it
  return options;
}

// A runner that ended in anything but exit 0: the verdict's outcome and reason.
std::pair<std::string, std::string> RunnerFailure(const sandbox::Outcome& outcome, const std::string& phase) {
  const std::string last = ErrorLine(outcome.stderr_text);
  switch (outcome.ending) {
    case sandbox::Ending::kTimedOut:
    case sandbox::Ending::kCpuLimit:
      return {"timed_out", phase + ": " + outcome.Reason()};
    case sandbox::Ending::kSignaled:
      if (outcome.signal == SIGSYS) {
        return {"refused", phase + ": it tried the network (a network socket, which the sandbox refuses; killed "
                           "by SIGSYS)"};
      }
      return {"crashed", phase + ": " + outcome.Reason() + (last.empty() ? "" : " (" + last + ")")};
    case sandbox::Ending::kOutputLimit:
    case sandbox::Ending::kStartFailed:
      return {"refused", phase + ": " + outcome.Reason()};
    case sandbox::Ending::kExited:
      if (outcome.exit_code == kExitNotAVariant) return {"refused", last};
      return {"crashed", phase + ": " + outcome.Reason() + (last.empty() ? "" : ": " + last)};
  }
  return {"crashed", phase + ": " + outcome.Reason()};
}

std::vector<ops::OpCall> CallsOf(const std::vector<ops::OpCall>& calls, const std::string& op) {
  std::vector<ops::OpCall> mine;
  for (const ops::OpCall& call : calls) {
    if (call.op == op && call.edge.empty()) mine.push_back(call);
  }
  return mine;
}

ops::GateOptions GateOptionsFor(int draws, uint64_t seed, size_t call) {
  ops::GateOptions options;
  options.draws = draws;
  options.seed = seed + call;
  return options;
}

// The runner's results, per call a list of cases: runs.json (the variant's
// name, each case's errors and flags) and runs.bin (each case's output, then
// the gradient of each input, then each input after the call).
void WriteRuns(const fs::path& folder, const std::string& variant,
               const std::vector<std::vector<ops::CaseRun>>& calls) {
  json listed = json::array();
  std::vector<torch::Tensor> tensors;
  for (const std::vector<ops::CaseRun>& runs : calls) {
    json cases = json::array();
    for (const ops::CaseRun& run : runs) {
      cases.push_back({{"error", run.error},
                       {"backward_error", run.backward_error},
                       {"output_requires_grad", run.output_requires_grad},
                       {"aliases_input", run.aliases_input}});
      tensors.push_back(run.output);
      tensors.insert(tensors.end(), run.grads.begin(), run.grads.end());
      tensors.insert(tensors.end(), run.inputs_after.begin(), run.inputs_after.end());
    }
    listed.push_back(cases);
  }
  lab::WriteTensors((folder / "runs.bin").string(), tensors);
  WriteText(folder / "runs.json", Dump(json{{"variant", variant}, {"calls", listed}}));
}

// What WriteRuns wrote, read back with bounds: `inputs[c][k]` is the input
// count of case k of call c. `variant`: the name the candidate registered (a
// label only).
std::vector<std::vector<ops::CaseRun>> ReadRuns(const fs::path& folder,
                                                const std::vector<std::vector<size_t>>& inputs, std::string& variant) {
  const json runs =
      ParseBoundedJson(lab::ReadBoundedFile((folder / "runs.json").string(), kMaxRunsJson), kMaxRunsJson);
  if (!runs.is_object() || !runs.contains("calls") || !runs["calls"].is_array() ||
      runs["calls"].size() != inputs.size()) {
    throw std::runtime_error("runs.json does not list one entry per recorded call");
  }
  variant = runs.contains("variant") && runs["variant"].is_string() ? runs["variant"].get<std::string>() : "";
  if (variant.empty() || variant.size() > 128 ||
      variant.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
          std::string::npos) {
    throw std::runtime_error("runs.json names no variant of [A-Za-z0-9_.-], at most 128 characters");
  }
  size_t tensors = 0;
  for (size_t c = 0; c < inputs.size(); ++c) {
    if (!runs["calls"][c].is_array() || runs["calls"][c].size() != inputs[c].size()) {
      throw std::runtime_error("runs.json has the wrong number of cases for call " + std::to_string(c + 1));
    }
    for (size_t n : inputs[c]) tensors += 1 + 2 * n;
  }
  const std::vector<torch::Tensor> all = lab::ReadTensors((folder / "runs.bin").string(), kMaxRunsBin, tensors);
  std::vector<std::vector<ops::CaseRun>> result;
  size_t next = 0;
  const auto text = [](const json& j, const char* key) {
    return j.contains(key) && j[key].is_string() ? Head(j[key].get<std::string>(), 2000) : std::string();
  };
  const auto flag = [](const json& j, const char* key) {
    return j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
  };
  for (size_t c = 0; c < inputs.size(); ++c) {
    result.emplace_back();
    for (size_t k = 0; k < inputs[c].size(); ++k) {
      const json& entry = runs["calls"][c][k];
      if (!entry.is_object()) throw std::runtime_error("runs.json: a case is not an object");
      ops::CaseRun run;
      run.error = text(entry, "error");
      run.backward_error = text(entry, "backward_error");
      run.output_requires_grad = flag(entry, "output_requires_grad");
      run.aliases_input = flag(entry, "aliases_input");
      run.output = all[next++];
      for (size_t i = 0; i < inputs[c][k]; ++i) run.grads.push_back(all[next++]);
      for (size_t i = 0; i < inputs[c][k]; ++i) run.inputs_after.push_back(all[next++]);
      if (run.error.empty() && !run.output.defined()) run.error = "returned no output";
      result.back().push_back(std::move(run));
    }
  }
  return result;
}

// The gate's cases of a recorded call (and the calls they index), as the
// runner and the judge both build them.
std::vector<ops::GateCase> CasesOf(const ops::OpCall& call, const ops::GateOptions& options,
                                   std::vector<ops::OpCall>& gate_calls) {
  size_t edges = 0;
  gate_calls = ops::GateCalls(call, options, &edges);
  return ops::GateCases(gate_calls, edges, options);
}

json ExampleCandidate(const std::string& op) {
  if (op == "bev_pool") {
    return "#include \"worker/trial/plugin.h\"\n\n"
           "namespace {\n"
           "// The reference's computation, written as a candidate.\n"
           "torch::Tensor MyPool(const torch::Tensor& depth, const torch::Tensor& features,\n"
           "                     const frontier::bev::PoolPlan& plan) {\n"
           "  frontier::bev::CheckFactors(depth, features, plan);\n"
           "  return frontier::bev::NaivePool(frontier::bev::LiftFrustum(depth, features), plan);\n"
           "}\n"
           "void Register() { frontier::plugin::RegisterBevPoolVariant(\"lab_my_pool\", MyPool); }\n"
           "}  // namespace\n\n"
           "FRONTIER_PLUGIN(Register)\n";
  }
  return "#include <cmath>\n\n#include \"worker/trial/plugin.h\"\n\n"
         "namespace {\n"
         "// The reference's computation, written as a candidate.\n"
         "torch::Tensor MyAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {\n"
         "  frontier::attention::CheckQkv(q, k, v);\n"
         "  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));\n"
         "  return torch::matmul(torch::softmax(torch::matmul(q, k.transpose(-2, -1)) * scale, -1), v);\n"
         "}\n"
         "void Register() { frontier::plugin::RegisterAttentionKernelVariant(\"lab_my_attention\", MyAttention); }\n"
         "}  // namespace\n\n"
         "FRONTIER_PLUGIN(Register)\n";
}

}  // namespace

json OpContract(const std::string& op) {
  if (!ops::OpRegistry().Has(op)) throw std::invalid_argument("unknown op '" + op + "'");
  const ops::Op& entry = ops::OpRegistry().At(op);
  json rules = json::array({"forward and every input gradient compared with the reference in float64 (relative "
                            "error per element |x - exact| / (|exact| + mean |exact|), tolerance twice the "
                            "reference's own error in the dtype and at least 1e-4 fp32, 2e-2 bf16)",
                            "fresh random inputs the gate draws, several of them, in one process: a result kept "
                            "from an earlier call is wrong",
                            "structured inputs: constants, small integers, one-hot rows, large and tiny values, "
                            "logits that overflow a softmax without its max subtracted",
                            "the op's edge cases and other shapes than the model's: odd sizes, every size 1",
                            "inputs unchanged after the call; the output must not share storage with an input",
                            "the forward also without autograd (NoGradGuard) and in InferenceMode, as a model's "
                            "evaluation and its deployed form call it: the same numbers, and the reference's dtype",
                            "the outputs are overwritten with NaN after each call"});
  std::vector<std::string> argv = CompileCommand("CANDIDATE.cc", "CANDIDATE.so");
  return {{"op", op},
          {"reference", entry.reference},
          {"contract", entry.contract},
          {"reference_source", entry.reference_source},
          {"example_candidate", ExampleCandidate(op)},
          {"gate_rules", rules},
          {"compiler", Joined(argv)}};
}

json JudgeCandidate(const CandidateOptions& o) {
  json verdict = {{"event", "op_candidate"}, {"schema", 1},       {"op", o.op},
                  {"source", o.source},      {"torch_version", TORCH_VERSION}};
  const fs::path workdir = fs::absolute(o.workdir);
  // The candidate's folder holds what the judge wrote (its source, the spec, the compiled library, the
  // verdict); each sandboxed process writes only in a folder of its own below it (compile/, gate/,
  // timing/), removed once the verdict is in: nothing a candidate leaves there outlasts its judging.
  const auto finish = [&](const std::string& outcome, const std::string& reason) {
    verdict["outcome"] = outcome;
    if (!reason.empty()) verdict["reason"] = reason;
    std::error_code ignored;
    for (const char* folder : kSandboxFolders) fs::remove_all(workdir / folder, ignored);
    if (fs::is_directory(workdir, ignored)) {
      try {
        WriteText(workdir / "verdict.json", Dump(verdict) + "\n");
      } catch (const std::exception&) {  // the verdict is still printed
      }
    }
    return verdict;
  };
  // The source, bounded, and the candidate's own folder.
  const fs::path source(o.source);
  const std::string ext = source.extension().string();
  if (ext != ".cc" && ext != ".cpp" && ext != ".cu") {
    return finish("refused", "a candidate is a .cc, .cpp or .cu file, not '" + source.filename().string() + "'");
  }
  std::string text;
  try {
    text = lab::ReadBoundedFile(fs::canonical(o.source).string(), kMaxCandidateBytes);  // a link of the user's: its file
  } catch (const std::exception& e) {
    return finish("refused", e.what());
  }
  if (const auto fault = FindEncodingFault(text)) {
    return finish("refused", o.source + ": line " + std::to_string(fault->line) + ": " + fault->problem);
  }
  std::error_code error;
  fs::create_directories(workdir, error);
  if (error) return finish("refused", workdir.string() + ": " + error.message());
  if (fs::exists(workdir / "verdict.json")) return finish("refused", workdir.string() + " holds an earlier verdict");
  const fs::path copy = workdir / ("candidate" + ext);
  const fs::path library = workdir / "candidate.so";
  TrialSpec spec;
  try {
    spec = LoadTrialSpecFile(o.spec_path);
  } catch (const std::exception& e) {
    return finish("refused", std::string("spec: ") + e.what());
  }
  try {
    WriteText(copy, text);
    WriteText(workdir / "spec.json", Dump(ToJson(spec)));
    for (const char* folder : kSandboxFolders) {
      fs::remove_all(workdir / folder);
      fs::create_directory(workdir / folder);
    }
  } catch (const std::exception& e) {
    return finish("refused", std::string("its folder: ") + e.what());
  }
  if (!ops::OpRegistry().Has(o.op)) return finish("refused", "unknown op '" + o.op + "'");
  const uint64_t seed = o.seed != 0 ? o.seed : FreshSeed();
  verdict["seed"] = seed;

  // Compile, sandboxed.
  const fs::path built_library = workdir / "compile" / "candidate.so";
  const std::vector<std::string> compile = CompileCommand(copy, built_library);
  verdict["compiler"] = compile.at(0);
  verdict["flags"] = std::vector<std::string>(compile.begin() + 1, compile.end());
  // nvcc's front end reads LibTorch's headers several times slower than g++ through the prelude.
  const double compile_seconds = IsCuda(source) ? 3 * o.compile_seconds : o.compile_seconds;
  sandbox::Options compiler = SandboxFor(compile, workdir / "compile", compile_seconds, o.memory_mb);
  compiler.read_only.push_back(copy.string());
  const sandbox::Outcome built = sandbox::Run(compiler);
  verdict["sandbox"] = {{"isolation", built.isolation}};
  verdict["compile"] = {{"command", Joined(compile)},
                        {"seconds", built.wall_seconds},
                        {"log", Head(built.stderr_text + built.stdout_text, kMaxLog)}};
  if (!built.ok()) {
    const std::string line = ErrorLine(built.stderr_text + built.stdout_text);
    return finish("compile_error", built.ending == sandbox::Ending::kExited
                                       ? "does not compile: " + (line.empty() ? built.Reason() : line)
                                       : "the compiler " + built.Reason());
  }
  if (IsCuda(source)) {
    return finish("refused", "a CUDA candidate: compiled with nvcc for sm_80 and sm_90; it runs only where "
                             "frontier-trial is built with CUDA, which this one is not");
  }
  // Into the judge's own folder, which no runner can write: the library judged is the one kept.
  try {
    WriteText(library, lab::ReadBoundedFile(built_library.string(), kMaxLibrary));
  } catch (const std::exception& e) {
    return finish("refused", std::string("the compiled library: ") + e.what());
  }
  verdict["plugin"] = library.string();

  // The calls the candidate is judged at (the judge never loads it).
  std::vector<ops::OpCall> calls;
  DeviceInfo dev;
  try {
    const SpecOpCalls recorded = RecordSpecOpCalls(spec);
    calls = CallsOf(recorded.calls, o.op);
    dev = recorded.dev;
  } catch (const std::exception& e) {
    return finish("refused", std::string("the spec's model cannot be run: ") + e.what());
  }
  if (calls.empty()) return finish("refused", "the spec's model makes no " + o.op + " call");
  const std::string self = o.self.empty() ? fs::read_symlink("/proc/self/exe").string() : o.self;
  // A runner's sandbox: the gate's cases, or (`serve`) timed calls of the candidate or, with `reference`, of
  // the op's reference (a runner that never loads the candidate).
  // A timing runner is given only the output gradient's seed: nothing of the timed inputs' (lab_timing.h).
  const uint64_t upstream_seed = FreshSeed();
  const auto runner_options = [&](const std::string& out, bool serve, bool reference) {
    std::vector<std::string> argv{self,
                                  "--op-candidate-run",
                                  library.string(),
                                  "--op",
                                  o.op,
                                  "--spec",
                                  (workdir / "spec.json").string(),
                                  "--out",
                                  (workdir / out).string(),
                                  "--draws",
                                  std::to_string(o.draws),
                                  "--seed",
                                  std::to_string(serve ? upstream_seed : seed)};
    if (serve) argv.push_back("--serve-timing");
    if (reference) argv.push_back("--reference");
    sandbox::Options options = SandboxFor(argv, workdir / out, o.run_seconds, o.memory_mb);
    options.single_process = true;  // a runner makes no process; a stopped one has nothing running on
    options.read_only.insert(options.read_only.end(),
                             {library.string(), (workdir / "spec.json").string(), fs::path(self).parent_path().string()});
    for (const std::string& plugin : spec.runtime.plugins) {  // the spec's own, which its model may use
      if (fs::is_regular_file(plugin)) options.read_only.push_back(fs::absolute(plugin).string());
    }
    return options;
  };
  // The per-file bound (RLIMIT_FSIZE) is no bound on a folder's sum.
  const auto overfilled = [&](const std::string& out, const std::string& phase) {
    const int64_t left = BytesIn(workdir / out);
    return left <= kMaxRunnerBytes ? std::string()
                                   : phase + ": it left " + std::to_string(left) + " bytes in its folder, more than " +
                                         std::to_string(kMaxRunnerBytes);
  };

  // The gate: the runner's outputs, compared here.
  const sandbox::Outcome gated = sandbox::Run(runner_options("gate", false, false));
  if (!gated.ok()) {
    const auto [outcome, reason] = RunnerFailure(gated, "running the gate's cases");
    verdict["runner_log"] = Tail(gated.stderr_text, kMaxLog);
    return finish(outcome, reason);
  }
  if (const std::string problem = overfilled("gate", "running the gate's cases"); !problem.empty()) {
    return finish("refused", problem);
  }
  std::vector<std::vector<ops::OpCall>> gate_calls(calls.size());
  std::vector<std::vector<ops::GateCase>> gate_cases;
  std::vector<std::vector<size_t>> expected;
  for (size_t c = 0; c < calls.size(); ++c) {
    gate_cases.push_back(CasesOf(calls[c], GateOptionsFor(o.draws, seed, c), gate_calls[c]));
    expected.emplace_back();
    for (const ops::GateCase& gate_case : gate_cases.back()) expected.back().push_back(gate_case.inputs.size());
  }
  std::vector<std::vector<ops::CaseRun>> runs;
  std::string variant;
  try {
    runs = ReadRuns(workdir / "gate", expected, variant);
  } catch (const std::exception& e) {
    return finish("refused", std::string("its results cannot be read: ") + e.what());
  }
  verdict["variant"] = variant;
  json gate = json::array();
  bool passed = true;
  std::string failure;
  for (size_t c = 0; c < calls.size() && passed; ++c) {
    ops::OpCall call = calls[c];
    call.variant = variant;
    const ops::VariantCheck check =
        ops::CompareRuns(call, gate_calls[c], gate_cases[c], runs[c], GateOptionsFor(o.draws, seed, c));
    gate.push_back(check.ToJson());
    if (!check.passed) {
      passed = false;
      failure = check.problem + " (" + check.where + "; rule: " + check.rule + ")";
    }
  }
  verdict["gate"] = gate;
  if (!passed) return finish("incorrect", failure);

  // Timed only once correct, on the judge's clock (lab_timing.h): the reference in a runner that never loads
  // the candidate.
  ops::OpCall call = calls.front();
  call.variant = variant;
  lab::ClockedTiming clocked =
      lab::ClockTiming(call, variant, dev, runner_options("reference", true, true),
                       runner_options("timing", true, false), o.rounds, upstream_seed);
  if (!clocked.judge_problem.empty()) {  // not the candidate's doing: no verdict
    throw std::runtime_error("timing the reference: " + clocked.judge_problem);
  }
  if (!clocked.timed_out.empty()) {
    std::ostringstream limit;
    limit << o.run_seconds;
    return finish("timed_out", "timing: " + clocked.timed_out + " (--run-timeout " + limit.str() + " s)");
  }
  if (!clocked.problem.empty()) return finish("refused", "timing: " + clocked.problem);
  if (clocked.timing.is_null()) {
    if (!clocked.candidate.ok()) {
      const auto [outcome, reason] = RunnerFailure(clocked.candidate, "timing");
      return finish(outcome, reason);
    }
    return finish("refused", "timing: its runner ended before the rounds did");
  }
  if (const std::string problem = overfilled("timing", "timing"); !problem.empty())
    return finish("refused", problem);
  // What it returned while timed must be right too.
  const ops::GateOptions options = GateOptionsFor(o.draws, seed, 0);
  const std::pair<const char*, ops::VariantCheck> checks[] = {
      {"timed_check", ops::CompareRuns(call, {call}, clocked.cases, clocked.runs, options)},
      {"timed_forward_check",
       ops::CompareRuns(call, {call}, clocked.forward_cases, clocked.forward_runs, options)}};
  for (const auto& [key, check] : checks) {
    verdict[key] = check.ToJson();
    if (!check.passed) return finish("incorrect", "while timed: " + check.problem + " (" + check.where + ")");
  }
  verdict["timing"] = clocked.timing;
  return finish("timed", "");
}

int RunCandidate(const CandidateRunOptions& o, std::ostream& err) {
  try {
    const TrialSpec spec = LoadTrialSpecFile(o.spec_path);
    SpecOpCalls recorded = RecordSpecOpCalls(spec);  // before the candidate is loaded
    const std::vector<ops::OpCall> calls = CallsOf(recorded.calls, o.op);
    if (calls.empty()) {
      err << "the spec's model makes no " << o.op << " call\n";
      return 2;
    }
    const ops::Op& op = ops::OpRegistry().At(o.op);
    // The judge's FIFOs, opened before the candidate is loaded (lab_timing.h).
    std::optional<lab::TimedCallServer> server;
    if (o.serve) server.emplace(o.out);
    std::string variant = op.reference;
    if (!o.reference) {
      const std::vector<std::string> before = op.variants();
      try {
        LoadPlugins({o.plugin});
      } catch (const PluginError& e) {  // e.g. a name the spec's own plugins registered already
        err << e.what() << "\n";
        return kExitNotAVariant;
      }
      std::vector<std::string> added;
      for (const std::string& name : op.variants()) {
        if (std::find(before.begin(), before.end(), name) == before.end()) added.push_back(name);
      }
      if (added.size() != 1) {
        err << "the candidate registers " << added.size() << " variants of " << o.op
            << " (it must register one)\n";
        return kExitNotAVariant;
      }
      variant = added.front();
    }
    if (server) {
      ops::OpCall call = calls.front();
      call.variant = variant;
      server->Serve(call, variant, recorded.dev, o.seed);
    } else {
      std::vector<std::vector<ops::CaseRun>> all;
      for (size_t c = 0; c < calls.size(); ++c) {
        std::vector<ops::OpCall> gate_calls;
        const std::vector<ops::GateCase> cases = CasesOf(calls[c], GateOptionsFor(o.draws, o.seed, c), gate_calls);
        all.push_back(ops::RunCasesHere(variant, gate_calls, cases));
      }
      WriteRuns(fs::path(o.out), variant, all);
    }
  } catch (const c10::Error& e) {
    err << e.what_without_backtrace() << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << e.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace frontier
