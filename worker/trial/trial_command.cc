#include "worker/trial/trial_command.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>

#include <CLI/CLI.hpp>

#include "worker/trial/data/dataset.h"
#include "worker/trial/kernel_lab.h"
#include "worker/trial/measure/device.h"
#include "worker/trial/measure/phases.h"
#include "worker/trial/op_bench.h"
#include "worker/warm_slot.h"

namespace frontier {

int RunTrialSpec(const std::string& spec_path, TrialOptions options, std::istream& in, std::ostream& out,
                 std::ostream& err) {
  const auto print = [&out](const nlohmann::json& event) { out << event.dump() << std::endl; };
  TrialSpec spec;
  try {
    if (spec_path == "-") {
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      spec = ParseTrialSpecText(text);
    } else {
      spec = LoadTrialSpecFile(spec_path);
    }
  } catch (const SpecError& e) {
    print({{"event", "result"},
           {"schema", kTrialOutputSchema},
           {"status", "failed"},
           {"error_kind", "spec"},
           {"field", e.path()},
           {"error", e.what()}});
    err << "frontier-trial: invalid spec: " << e.what() << "\n";
    return kExitFailed;
  }
  if (!options.peak_flops_json.empty()) {
    try {
      ParseGivenPeaks(options.peak_flops_json);
    } catch (const std::exception& e) {
      err << "frontier-trial: --peak-flops / FRONTIER_PEAK_FLOPS: " << e.what() << "\n";
      return kExitUsage;
    }
  }
  options.emit = print;
  options.process_start_s = SecondsSinceProcessStart();
  const nlohmann::json result = RunTrial(spec, options);
  // Rank 0 speaks for a data-parallel trial; the other ranks' standard
  // output stays empty (under srun every task's output is the trial's).
  const int rank = result.value("rank", 0);
  if (rank == 0) print(result);
  const std::string who = rank == 0 ? "frontier-trial: " : "frontier-trial: rank " + std::to_string(rank) + ": ";
  if (result.contains("error")) {
    err << who << result["status"].get<std::string>() << ": " << result["error"].get<std::string>() << "\n";
  } else if (rank != 0) {
    err << who << result["status"].get<std::string>() << "\n";
  }
  return ExitCodeFor(result);
}

namespace {

// A warm slot's trial, in the child the server's intermediate process forked: waits to be adopted by the
// worker, sets itself up as an exec'd trial would be (SetUpChild), then runs the trial (or the
// calibration) in this fresh copy of the server, which has loaded LibTorch and run nothing.
[[noreturn]] void RunWarmTrial(const WarmTrialRequest& request, const WarmTrialFds& fds) {
  for (int waited = 0; getppid() != request.reaper && waited < 5000; ++waited) usleep(1000);
  const cpu_set_t cpus = CpuSetOf(request.cpus);
  const rlimit address_space = AddressSpaceLimit(request.address_space_bytes);
  const ChildSetup setup{request.reaper,
                         -1,
                         fds.stdout_fd,
                         fds.stderr_fd,
                         fds.cgroup_procs_fd,
                         request.cpus.empty() ? nullptr : &cpus,
                         request.address_space_bytes > 0 ? &address_space : nullptr,
                         nullptr,
                         SIGKILL};
  if (const std::optional<ChildFailure> failure = SetUpChild(setup)) FailChild(fds.status_fd, *failure);
  for (int fd : {fds.stdout_fd, fds.stderr_fd, fds.cgroup_procs_fd, fds.status_fd}) {
    if (fd > STDERR_FILENO) close(fd);  // the status pipe's end of file: started
  }
  for (const auto& [name, value] : request.environment) setenv(name.c_str(), value.c_str(), 1);
  int code;
  if (const std::optional<CalibrationRequest>& c = request.calibration) {
    code = RunCalibration(*c, std::cout, std::cerr);
  } else {
    TrialOptions options;
    options.progress_every = request.progress_every;
    if (!request.artifact_dir.empty()) options.artifact_dir = request.artifact_dir;
    if (const char* peaks = std::getenv("FRONTIER_PEAK_FLOPS")) options.peak_flops_json = peaks;
    code = RunTrialSpec(request.spec_path, options, std::cin, std::cout, std::cerr);
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  _exit(code);
}

}  // namespace

int ServeTrials(std::ostream& err) {
  const int socket = STDIN_FILENO;
  if (!SendWarmReply(socket, R"({"ready": 1})")) {
    err << "frontier-trial --serve: standard input is not the worker's socket: " << std::strerror(errno) << "\n";
    return kExitUsage;
  }
  for (;;) {
    WarmTrialRequest request;
    WarmTrialFds fds;
    std::string problem;
    if (!ReceiveWarmTrialRequest(socket, &request, &fds, &problem)) {
      if (problem.empty()) return kExitCompleted;  // the worker closed the slot
      SendWarmReply(socket, nlohmann::json{{"error", problem}}.dump());
      continue;
    }
    // The dataset files the trial will read, kept in this process first (read once, at the first trial
    // that names them), so that the trial finds them in memory instead of reading them beside its own
    // steps; bounded in size (KeepIdxFile), so well within the worker's wait for the reply.
    try {
      if (!request.calibration) KeepTaskDatasetFiles(LoadTrialSpecFile(request.spec_path).task);
    } catch (const std::exception&) {
      // the trial reads its spec itself and names the problem
    }
    // An intermediate process forks the trial and exits at once, so the trial is adopted by the worker.
    int child_pid[2] = {-1, -1};
    pid_t intermediate = -1;
    if (pipe2(child_pid, O_CLOEXEC) == 0) {
      intermediate = fork();
      if (intermediate == 0) {
        close(child_pid[0]);
        const pid_t child = fork();
        if (child == 0) {
          close(child_pid[1]);
          RunWarmTrial(request, fds);
        }
        ssize_t ignored = write(child_pid[1], &child, sizeof child);
        (void)ignored;
        _exit(0);
      }
      close(child_pid[1]);
    }
    pid_t child = -1;
    const int fork_error = errno;
    if (intermediate > 0) {
      ssize_t n;
      do {
        n = read(child_pid[0], &child, sizeof child);
      } while (n < 0 && errno == EINTR);
      if (n != static_cast<ssize_t>(sizeof child)) child = -1;
      while (waitpid(intermediate, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    if (child_pid[0] >= 0) close(child_pid[0]);
    for (int fd : {fds.stdout_fd, fds.stderr_fd, fds.status_fd, fds.cgroup_procs_fd}) {
      if (fd >= 0) close(fd);
    }
    SendWarmReply(socket, child > 0 ? nlohmann::json{{"pid", child}}.dump()
                                    : nlohmann::json{{"error", std::string("fork: ") + std::strerror(fork_error)}}.dump());
  }
}

int RunOpBenchSpec(const std::string& spec_path, int rounds, std::istream& in, std::ostream& out, std::ostream& err) {
  try {
    TrialSpec spec;
    if (spec_path == "-") {
      spec = ParseTrialSpecText(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
    } else {
      spec = LoadTrialSpecFile(spec_path);
    }
    OpBenchOptions options;
    options.rounds = rounds;
    out << RunOpBench(spec, options).dump() << std::endl;
  } catch (const c10::Error& e) {
    err << "frontier-trial: op benchmark failed: " << e.what_without_backtrace() << "\n";
    return kExitFailed;
  } catch (const std::exception& e) {
    err << "frontier-trial: op benchmark failed: " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitCompleted;
}

void AddLabFlags(CLI::App& app, LabCommand& lab) {
  namespace help = trial_help;
  app.add_option("--op-candidate", lab.candidate, help::kOpCandidate)->option_text("SOURCE");
  app.add_option("--op-candidate-run", lab.candidate_run, help::kOpCandidateRun)->option_text("PLUGIN");
  app.add_option("--op-contract", lab.contract, help::kOpContract)->option_text("OP");
  app.add_option("--op", lab.op, help::kOp)->option_text("OP");
  app.add_option("--workdir", lab.workdir, help::kWorkdir)->option_text("DIR");
  app.add_option("--out", lab.out)->option_text("DIR")->group("");
  app.add_flag("--serve-timing", lab.serve)->group("");
  app.add_flag("--reference", lab.reference)->group("");
  app.add_option("--draws", lab.draws, help::kDraws)->option_text("N")->check(CLI::Range(1, 100));
  app.add_option("--seed", lab.seed, help::kSeed)->option_text("N");
  app.add_option("--run-timeout", lab.run_seconds, help::kRunTimeout)->option_text("S")->check(CLI::PositiveNumber);
}

int RunLabCommand(const LabCommand& lab, const std::string& spec_path, int rounds, std::ostream& out,
                  std::ostream& err) {
  if (!lab.contract.empty()) {
    try {
      nlohmann::json contract = OpContract(lab.contract);
      if (!spec_path.empty()) {  // the shapes the spec's model calls the op at
        const TrialSpec spec = LoadTrialSpecFile(spec_path);
        const SpecOpCalls recorded = RecordSpecOpCalls(spec);
        std::string shapes;
        for (const ops::OpCall& call : recorded.calls) {
          if (call.op == lab.contract) shapes += (shapes.empty() ? "" : "; ") + call.Shapes();
        }
        contract["shapes"] = shapes;
        contract["dtype"] = spec.runtime.precision;
        contract["device"] = recorded.dev.device.str();
        contract["threads"] = recorded.threads;
      }
      out << contract.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
      return kExitCompleted;
    } catch (const std::exception& e) {
      err << "frontier-trial: --op-contract: " << e.what() << "\n";
      return kExitUsage;
    }
  }
  if (spec_path.empty() || lab.op.empty()) {
    err << "frontier-trial: --op-candidate and --op-candidate-run need --spec and --op\n";
    return kExitUsage;
  }
  if (!lab.candidate_run.empty()) {
    CandidateRunOptions run;
    run.plugin = lab.candidate_run;
    run.op = lab.op;
    run.spec_path = spec_path;
    run.out = lab.out;
    run.draws = lab.draws;
    run.seed = lab.seed;
    run.serve = lab.serve;
    run.reference = lab.reference;
    return RunCandidate(run, err);
  }
  if (lab.workdir.empty()) {
    err << "frontier-trial: --op-candidate needs --workdir\n";
    return kExitUsage;
  }
  CandidateOptions judge;
  judge.source = lab.candidate;
  judge.op = lab.op;
  judge.spec_path = spec_path;
  judge.workdir = lab.workdir;
  judge.draws = lab.draws;
  judge.seed = lab.seed;
  judge.rounds = rounds;
  judge.run_seconds = lab.run_seconds;
  try {
    out << JudgeCandidate(judge).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  } catch (const std::exception& e) {  // the judge's own failure (never the candidate's): no verdict
    err << "frontier-trial: the judge failed: " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitCompleted;
}

int RunCalibration(const CalibrationRequest& options, std::ostream& out, std::ostream& err) {
  if (!ParseName<DeviceKind>(options.device)) {
    err << "frontier-trial: --device takes cpu or cuda, not '" << options.device << "'\n";
    return kExitUsage;
  }
  std::vector<Precision> dtypes;
  for (const std::string& dtype : options.dtypes) {
    const std::optional<Precision> precision = ParseName<Precision>(dtype);
    if (!precision) {
      err << "frontier-trial: --dtypes takes fp32, bf16 and fp16, not '" << dtype << "'\n";
      return kExitUsage;
    }
    dtypes.push_back(*precision);
  }
  try {
    const DeviceInfo device = SelectDevice(options.device);
    const GemmBudget budget{0.5, device.is_cuda() ? int64_t{8192} : int64_t{2048}};
    out << Calibrate(device, dtypes, options.threads, budget).dump() << std::endl;
  } catch (const std::exception& e) {
    err << "frontier-trial: calibration failed: " << e.what() << "\n";
    return kExitFailed;
  }
  return kExitCompleted;
}

}  // namespace frontier
