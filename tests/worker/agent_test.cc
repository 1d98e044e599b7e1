// The worker agent against an in-process fake coordinator and fake
// frontier-trial binaries (shell scripts that print JSON lines, fail, crash
// or hang). No LibTorch, no GPU; intervals are milliseconds.
#include "worker/agent/agent.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "frontier/v1/frontier.grpc.pb.h"
#include "proto/clock.h"
#include "worker/agent/placement.h"
#include "worker/agent/trial_process.h"
#include "worker/host.h"
#include "os/cpus.h"

namespace frontier {
namespace {

// OpenBLAS's generic kernels on a CPU it does not know are replaced by the CPU's own (host.h).
TEST(HostTest, OpenBlasCoreForACpuOpenBlasDoesNotKnow) {
  EXPECT_EQ(OpenBlasCoreFor("Prescott", true, true), "SkylakeX");
  EXPECT_EQ(OpenBlasCoreFor("prescott", false, true), "Haswell");
  EXPECT_EQ(OpenBlasCoreFor("Prescott", false, false), "");  // nothing better to choose
  EXPECT_EQ(OpenBlasCoreFor("Haswell", true, true), "");     // a detection that stands
  EXPECT_EQ(OpenBlasCoreFor("SkylakeX", true, true), "");
  EXPECT_EQ(OpenBlasCoreFor("", true, true), "");
}

// What a trial left is read as it is when opened: a regular file's bytes; a link or a FIFO at its name is
// refused at once (not followed, not waited on).
TEST(HostTest, OpenRegularFileReadsOnlyARegularFileAndNeverBlocks) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("frontier-open-regular-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ASSERT_EQ(WriteNewFile((dir / "file").string(), "twelve bytes"), "");
  fs::create_symlink(dir / "file", dir / "link");
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);

  int64_t size = -1;
  const int fd = OpenRegularFile((dir / "file").string(), &size);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(size, 12);
  std::string text(64, '\0');
  text.resize(static_cast<size_t>(ReadUpTo(fd, text.data(), static_cast<int64_t>(text.size()))));
  EXPECT_EQ(text, "twelve bytes");  // fewer than asked: the end of the file
  ::close(fd);
  EXPECT_EQ(OpenRegularFile((dir / "link").string(), &size), -1);
  EXPECT_EQ(OpenRegularFile((dir / "fifo").string(), &size), -1);  // a FIFO with no writer: no wait
  EXPECT_EQ(OpenRegularFile(dir.string(), &size), -1);
  EXPECT_EQ(OpenRegularFile((dir / "missing").string(), &size), -1);
  fs::remove_all(dir);
}

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr const char* kSpec =
    R"({"schema":1,"seed":1,"task":{"dataset":"synthetic","input":{"channels":1,"height":8,"width":8,"classes":3},)"
    R"("batch_size":8,"steps":4,"warmup_steps":1,"eval_every":0},)"
    R"("arch":{"stem":{"kind":"conv3x3","width":8,"stride":1},"stages":[{"block":"basic","width":8,"depth":1}]},)"
    R"("runtime":{"threads":0}})";
constexpr const char* kResultLine =
    R"({"event":"result","schema":1,"status":"completed","trial_id":"t1","step_time_ms":{"median":1.5},)"
    R"("val_accuracy":0.5})";
constexpr milliseconds kEventually{10000};

// Polls `condition` until it holds or `timeout` passes.
bool Eventually(const std::function<bool()>& condition, milliseconds timeout = kEventually) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

// A forwarded result line without the worker's "placement" (where the trial
// ran), which the agent adds to every result; the rest is as printed.
nlohmann::json WithoutPlacement(const std::string& result_json) {
  nlohmann::json result = nlohmann::json::parse(result_json);
  EXPECT_TRUE(result.contains("placement")) << result_json;
  result.erase("placement");
  return result;
}

// A WorkerService that hands out scripted trials and records every call.
class FakeCoordinator final : public v1::WorkerService::Service {
 public:
  void AddTrial(const std::string& trial_id, const std::string& spec_json = kSpec, int attempt = 1) {
    std::lock_guard<std::mutex> lock(mutex_);
    v1::LeaseTrialResponse lease;
    lease.set_has_trial(true);
    lease.set_trial_id(trial_id);
    lease.set_attempt(attempt);
    lease.set_spec_json(spec_json);
    lease.set_lease_timeout_ms(1000);
    queue_.push_back(lease);
    added_.notify_all();
  }
  void SetHeartbeat(bool lease_valid, bool stop) {
    std::lock_guard<std::mutex> lock(mutex_);
    lease_valid_ = lease_valid;
    heartbeat_stop_ = stop;
  }
  void StopOnProgress(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    progress_stop_reason_ = reason;
  }
  // Behaves like a restarted coordinator that lost its worker table.
  void ForgetWorkers() {
    std::lock_guard<std::mutex> lock(mutex_);
    known_workers_.clear();
  }

  std::vector<v1::RegisterWorkerRequest> Registrations() const { return Locked(registrations_); }
  std::vector<std::string> Leased() const { return Locked(leased_); }
  std::vector<v1::HeartbeatRequest> Heartbeats() const { return Locked(heartbeats_); }
  std::vector<v1::ReportProgressRequest> Progress() const { return Locked(progress_); }
  std::vector<v1::CompleteTrialRequest> Completions() const { return Locked(completions_); }
  std::vector<v1::FailTrialRequest> Failures() const { return Locked(failures_); }
  std::vector<v1::UploadArtifactRequest> Uploads() const { return Locked(uploads_); }
  // Uploads from then on are refused with `status`.
  void RefuseUploads(grpc::Status status) {
    std::lock_guard<std::mutex> lock(mutex_);
    upload_refusal_ = status;
  }
  size_t Reports() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return completions_.size() + failures_.size();
  }

  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest* request,
                              v1::RegisterWorkerResponse* response) override {
    std::lock_guard<std::mutex> lock(mutex_);
    registrations_.push_back(*request);
    const std::string id = "worker-" + std::to_string(registrations_.size());
    known_workers_.insert(id);
    response->set_worker_id(id);
    response->set_lease_timeout_ms(1000);
    response->set_heartbeat_interval_ms(50);
    return grpc::Status::OK;
  }

  grpc::Status LeaseTrial(grpc::ServerContext* context, const v1::LeaseTrialRequest* request,
                          v1::LeaseTrialResponse* response) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!known_workers_.count(request->worker_id())) return UnknownWorker();
    const auto deadline = std::chrono::steady_clock::now() + milliseconds(request->wait_ms());
    while (queue_.empty() && std::chrono::steady_clock::now() < deadline && !context->IsCancelled()) {
      added_.wait_for(lock, milliseconds(20));
    }
    if (queue_.empty() || context->IsCancelled()) return grpc::Status::OK;
    *response = queue_.front();
    queue_.pop_front();
    leased_.push_back(response->trial_id());
    return grpc::Status::OK;
  }

  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!known_workers_.count(request->worker_id())) return UnknownWorker();
    heartbeats_.push_back(*request);
    response->set_lease_valid(lease_valid_);
    response->set_stop(heartbeat_stop_);
    return grpc::Status::OK;
  }

  grpc::Status ReportProgress(grpc::ServerContext*, const v1::ReportProgressRequest* request,
                              v1::ReportProgressResponse* response) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!known_workers_.count(request->worker_id())) return UnknownWorker();
    progress_.push_back(*request);
    response->set_stop(!progress_stop_reason_.empty());
    response->set_reason(progress_stop_reason_);
    return grpc::Status::OK;
  }

  grpc::Status CompleteTrial(grpc::ServerContext*, const v1::CompleteTrialRequest* request,
                             v1::CompleteTrialResponse* response) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!known_workers_.count(request->worker_id())) return UnknownWorker();
    completions_.push_back(*request);
    response->set_accepted(true);
    if (request->lease_next() && !queue_.empty()) {  // as the coordinator: the next trial with the answer
      *response->mutable_next() = queue_.front();
      queue_.pop_front();
      leased_.push_back(response->next().trial_id());
      ++leased_with_completion_;
    }
    return grpc::Status::OK;
  }
  int LeasedWithCompletion() const { return Locked(leased_with_completion_); }
  int LeaseNextAsked() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(std::count_if(completions_.begin(), completions_.end(),
                                          [](const v1::CompleteTrialRequest& c) { return c.lease_next(); }));
  }

  grpc::Status FailTrial(grpc::ServerContext*, const v1::FailTrialRequest* request,
                         v1::FailTrialResponse* response) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!known_workers_.count(request->worker_id())) return UnknownWorker();
    failures_.push_back(*request);
    response->set_accepted(true);
    return grpc::Status::OK;
  }

  grpc::Status UploadArtifact(grpc::ServerContext*, const v1::UploadArtifactRequest* request,
                              v1::UploadArtifactResponse* response) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!known_workers_.count(request->worker_id())) return UnknownWorker();
    if (!completions_.empty() || !failures_.empty()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "uploaded after the trial was reported");
    }
    uploads_.push_back(*request);
    if (!upload_refusal_.ok()) return upload_refusal_;
    response->set_stored(request->offset() + static_cast<int64_t>(request->data().size()));
    return grpc::Status::OK;
  }

 private:
  static grpc::Status UnknownWorker() { return grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown worker"); }

  template <typename T>
  T Locked(const T& value) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return value;
  }

  mutable std::mutex mutex_;
  std::condition_variable added_;
  std::deque<v1::LeaseTrialResponse> queue_;
  std::set<std::string> known_workers_;
  bool lease_valid_ = true;
  bool heartbeat_stop_ = false;
  std::string progress_stop_reason_;
  std::vector<v1::RegisterWorkerRequest> registrations_;
  std::vector<std::string> leased_;
  int leased_with_completion_ = 0;
  std::vector<v1::HeartbeatRequest> heartbeats_;
  std::vector<v1::ReportProgressRequest> progress_;
  std::vector<v1::CompleteTrialRequest> completions_;
  std::vector<v1::FailTrialRequest> failures_;
  std::vector<v1::UploadArtifactRequest> uploads_;
  grpc::Status upload_refusal_ = grpc::Status::OK;
};

// Agent::Run on its own thread; stops the agent if a test leaves it running.
class RunningAgent {
 public:
  explicit RunningAgent(std::unique_ptr<Agent> agent)
      : agent_(std::move(agent)), run_(std::async(std::launch::async, [this] { return agent_->Run(); })) {}
  ~RunningAgent() {
    if (run_.valid() && run_.wait_for(milliseconds(0)) != std::future_status::ready) {
      agent_->RequestStop();
      run_.wait();
    }
  }
  Agent& agent() { return *agent_; }
  // True when Run returned OK within `timeout`.
  bool Finished(milliseconds timeout = kEventually) {
    if (run_.wait_for(timeout) != std::future_status::ready) return false;
    const grpc::Status status = run_.get();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return status.ok();
  }

 private:
  std::unique_ptr<Agent> agent_;
  std::future<grpc::Status> run_;
};

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (std::filesystem::temp_directory_path() / "frontier-agent-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    std::filesystem::create_directories(dir_ + "/work");
    port_ = StartCoordinator("127.0.0.1:0");
  }

  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + milliseconds(100));
    std::filesystem::remove_all(dir_);
  }

  int StartCoordinator(const std::string& address) {
    int port = 0;
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&coordinator_);
    server_ = builder.BuildAndStart();
    return port;
  }

  AgentOptions Options() const {
    AgentOptions options;
    options.host = "test-host";
    options.device_name = "cpu: test";
    options.work_dir = dir_ + "/work";
    options.threads_per_trial = 3;
    options.progress_every = 1;
    options.max_trials = 1;
    options.trial_timeout = milliseconds(10000);
    options.drain_timeout = milliseconds(5000);
    options.kill_grace = milliseconds(100);
    options.lease_wait = milliseconds(200);
    options.rpc_timeout = milliseconds(2000);
    options.progress_interval = milliseconds(10000);
    options.retry_initial_backoff = milliseconds(20);
    options.retry_max_backoff = milliseconds(200);
    return options;
  }

  // A fake trial that waits up to 5 s until it sees a second one running
  // (both touch a file in dir_), then prints a result; with `fail_alone` it
  // exits 1 when it never saw one.
  std::string PairedTrial(bool fail_alone) const {
    const std::string running = "$(ls " + dir_ + " | grep -c running-) -ge 2";
    return Script("pair.sh", "touch " + dir_ + "/running-$$\nfor i in $(seq 100); do\n  [ " + running +
                                 " ] && break\n  sleep 0.05\ndone\n" +
                                 (fail_alone ? "[ " + running + " ] || exit 1\n" : "") + "echo '" +
                                 std::string(kResultLine) + "'");
  }

  // A fake frontier-trial: `body` runs under /bin/sh with $2 the spec file.
  std::string Script(const std::string& name, const std::string& body) const {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
    return path;
  }

  std::unique_ptr<RunningAgent> Start(const AgentOptions& options, const std::string& trial_binary,
                                      std::shared_ptr<MonotonicClock> clock = nullptr) {
    auto channel = MakeCoordinatorChannel("127.0.0.1:" + std::to_string(port_), milliseconds(200));
    return std::make_unique<RunningAgent>(
        std::make_unique<Agent>(options, v1::WorkerService::NewStub(channel),
                                std::make_unique<ProcessTrialLauncher>(trial_binary), std::move(clock)));
  }

  // Runs `trial_binary` on one trial "t1" and returns once it is reported.
  void RunOneTrial(const std::string& trial_binary, const AgentOptions& options) {
    coordinator_.AddTrial("t1");
    auto agent = Start(options, trial_binary);
    ASSERT_TRUE(agent->Finished());
    ASSERT_EQ(coordinator_.Reports(), 1u);
  }

  v1::FailTrialRequest OnlyFailure() const {
    const auto failures = coordinator_.Failures();
    EXPECT_THAT(failures, SizeIs(1));
    EXPECT_THAT(coordinator_.Completions(), SizeIs(0));
    return failures.empty() ? v1::FailTrialRequest() : failures[0];
  }

  std::string ReadFile(const std::string& name) const {
    std::ifstream file(dir_ + "/" + name);
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }

  // True when the process whose pid the script wrote to `name` is gone (or a zombie).
  bool ProcessGone(const std::string& name) const {
    const std::string pid = ReadFile(name);
    std::ifstream stat("/proc/" + pid.substr(0, pid.find('\n')) + "/stat");
    std::string line;
    if (pid.empty() || !std::getline(stat, line)) return true;
    return line.find(") Z") != std::string::npos;
  }

  std::string dir_;
  FakeCoordinator coordinator_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(AgentTest, CompletedResultIsForwardedVerbatimWithThrottledProgress) {
  const std::string trial =
      Script("ok.sh", "cp \"$2\" " + dir_ +
                          "/seen-spec.json\n"
                          "echo '{\"event\":\"start\",\"trial_id\":\"t1\"}'\n"
                          "echo 'a stray line that is not JSON'\n"
                          "echo '{\"event\":\"progress\",\"step\":1,\"loss\":2.0}'\n"
                          "echo '{\"event\":\"progress\",\"step\":2,\"loss\":1.5}'\n"
                          "echo '{\"event\":\"eval\",\"step\":2,\"val_accuracy\":0.5}'\n"
                          "echo '" +
                          std::string(kResultLine) + "'\n");
  RunOneTrial(trial, Options());

  const auto registrations = coordinator_.Registrations();
  ASSERT_THAT(registrations, SizeIs(1));
  EXPECT_EQ(registrations[0].host(), "test-host");
  EXPECT_EQ(registrations[0].device(), "cpu");
  EXPECT_EQ(registrations[0].device_count(), 1);
  EXPECT_EQ(registrations[0].version(), kWorkerVersion);

  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1));
  EXPECT_EQ(completions[0].worker_id(), "worker-1");
  EXPECT_EQ(completions[0].trial_id(), "t1");
  EXPECT_EQ(completions[0].attempt(), 1);
  EXPECT_EQ(WithoutPlacement(completions[0].result_json()), nlohmann::json::parse(kResultLine));
  const auto placement = nlohmann::json::parse(completions[0].result_json())["placement"];
  EXPECT_EQ(placement["worker"], "test-host");
  EXPECT_EQ(placement["slot"], 0);
  EXPECT_EQ(placement["pinned"], false);
  EXPECT_EQ(placement["shared_cores"], false);

  // The second progress event came within progress_interval of the first; evaluations always go.
  const auto progress = coordinator_.Progress();
  ASSERT_THAT(progress, SizeIs(2));
  EXPECT_EQ(progress[0].event_json(), R"({"event":"progress","step":1,"loss":2.0})");
  EXPECT_EQ(progress[1].event_json(), R"({"event":"eval","step":2,"val_accuracy":0.5})");
  EXPECT_EQ(progress[1].trial_id(), "t1");

  const auto spec = nlohmann::json::parse(ReadFile("seen-spec.json"));
  EXPECT_EQ(spec["runtime"]["threads"], 3);
  EXPECT_EQ(spec["runtime"]["device"], "cpu");
  EXPECT_EQ(spec["arch"]["stem"]["width"], 8);
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/work")) << "spec files are removed after the trial";
}

TEST_F(AgentTest, DivergedResultIsAResult) {
  const std::string line =
      R"({"event":"result","schema":1,"status":"diverged","error":"loss is nan at step 3"})";
  RunOneTrial(Script("diverged.sh", "echo '" + line + "'\nexit 3"), Options());
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1));
  EXPECT_EQ(WithoutPlacement(completions[0].result_json()), nlohmann::json::parse(line));
}

TEST_F(AgentTest, FailedResultIsRetryableUnlessSpecPrecisionOutOfMemoryOrIncorrect) {
  const struct {
    const char* error_kind;
    bool retryable;
  } cases[] = {{"spec", false},      {"precision", false}, {"out_of_memory", false},
               {"incorrect", false}, {"runtime", true},    {"data", true}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.error_kind);
    const std::string trial_id = std::string("t-") + c.error_kind;
    const std::string line = std::string(R"({"event":"result","schema":1,"status":"failed","error_kind":")") +
                             c.error_kind + R"(","error":"arch.stages: broken"})";
    coordinator_.AddTrial(trial_id);
    auto agent = Start(Options(), Script("failed.sh", "echo '" + line + "'\nexit 2"));
    ASSERT_TRUE(agent->Finished());
    const auto failures = coordinator_.Failures();
    ASSERT_FALSE(failures.empty());
    EXPECT_EQ(failures.back().trial_id(), trial_id);
    const bool oom = std::string(c.error_kind) == "out_of_memory";
    EXPECT_EQ(failures.back().error(), oom ? "out of memory: arch.stages: broken" : "arch.stages: broken");
    EXPECT_EQ(failures.back().retryable(), c.retryable);
    nlohmann::json expected = nlohmann::json::parse(line);
    if (oom) expected["error"] = "out of memory: arch.stages: broken";
    EXPECT_EQ(WithoutPlacement(failures.back().result_json()), expected);
  }
  EXPECT_THAT(coordinator_.Completions(), SizeIs(0));
}

TEST_F(AgentTest, CrashIsRetryableAndNamesTheSignalAndStderr) {
  RunOneTrial(Script("crash.sh",
                     "echo '{\"event\":\"progress\",\"step\":1}'\n"
                     "echo 'CUDA error: an illegal memory access' >&2\n"
                     "kill -SEGV $$"),
              Options());
  const auto failure = OnlyFailure();
  EXPECT_TRUE(failure.retryable());
  EXPECT_THAT(failure.error(), HasSubstr("frontier-trial ended without a result (signal SIGSEGV"));
  EXPECT_THAT(failure.error(), HasSubstr("stderr: CUDA error: an illegal memory access"));
  EXPECT_EQ(failure.result_json(), "");
}

TEST_F(AgentTest, ExitWithoutResultIsACrash) {
  RunOneTrial(Script("usage.sh", "echo 'frontier-trial: bad flag' >&2\nexit 64"), Options());
  const auto failure = OnlyFailure();
  EXPECT_TRUE(failure.retryable());
  EXPECT_THAT(
      failure.error(),
      HasSubstr("frontier-trial ended without a result (exit code 64); stderr: frontier-trial: bad flag"));
}

TEST_F(AgentTest, ResultPrintedBeforeACrashAtExitStillCounts) {
  RunOneTrial(Script("crash-at-exit.sh", "echo '" + std::string(kResultLine) + "'\nkill -ABRT $$"),
              Options());
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1));
  EXPECT_EQ(WithoutPlacement(completions[0].result_json()), nlohmann::json::parse(kResultLine));
}

TEST_F(AgentTest, AResultIsNotHeldBackByAProcessTheTrialLeftHoldingItsOutput) {
  // Prints its result and exits, leaving a background process with its standard output open.
  RunOneTrial(Script("leaves-one.sh", "sleep 1000 &\necho $! > " + dir_ + "/left.pid\necho '" +
                                          std::string(kResultLine) + "'"),
              Options());
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1)) << "not a time-out: the trial had ended";
  EXPECT_EQ(WithoutPlacement(completions[0].result_json()), nlohmann::json::parse(kResultLine));
  EXPECT_TRUE(Eventually([&] { return ProcessGone("left.pid"); })) << "what is left in its process group ends";
}

TEST_F(AgentTest, StderrThatIsNotUtf8ReachesTheCoordinatorAsUtf8) {
  // A byte that is not UTF-8 and a character cut in half (as the tail's cut or a progress bar leaves one),
  // in the message of a crash that is out of memory under the worker's limit (RLIMIT_AS on this host) or
  // a crash: both go into JSON and protobuf strings, which refuse such bytes.
  AgentOptions options = Options();
  options.memory_limit_mb = 64;
  RunOneTrial(Script("latin1.sh", "printf 'caf\\351 \\342\\226\\210\\342\\226 out of memory\\n' >&2\nexit 3"),
              options);
  const auto failure = OnlyFailure();
  EXPECT_THAT(failure.error(), HasSubstr("stderr: caf? \xe2\x96\x88?? out of memory"));
}

TEST_F(AgentTest, HungTrialIsKilledWithItsProcessGroupAfterTheTimeout) {
  // Ignores SIGTERM (so only the SIGKILL after the grace ends it) and leaves a grandchild holding stdout.
  const std::string trial = Script("hang.sh",
                                   "trap '' TERM\n"
                                   "echo '{\"event\":\"progress\",\"step\":1}'\n"
                                   "sleep 1000 &\n"
                                   "echo $! > " +
                                       dir_ +
                                       "/grandchild.pid\n"
                                       "while :; do wait; done");
  AgentOptions options = Options();
  options.trial_timeout = milliseconds(500);
  const auto started = std::chrono::steady_clock::now();
  RunOneTrial(trial, options);
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(5000));
  const auto failure = OnlyFailure();
  EXPECT_TRUE(failure.retryable());
  EXPECT_EQ(failure.error(), "frontier-trial timed out after 0.5 s");
  EXPECT_EQ(nlohmann::json::parse(failure.result_json()).value("error_kind", ""), "timeout")
      << "the coordinator's retry policy tells time-outs apart by it";
  EXPECT_TRUE(ProcessGone("grandchild.pid"));
}

// A monotonic clock that moves only when the test advances it.
class FakeMonotonicClock final : public MonotonicClock {
 public:
  int64_t NowMs() override { return now_ms_.load(); }
  void Advance(milliseconds by) { now_ms_ += by.count(); }

 private:
  std::atomic<int64_t> now_ms_{1'000'000};
};

// AgentTest with the agent on a FakeMonotonicClock, running one trial that
// writes its pid to trial.pid and runs until it is killed.
class AgentClockTest : public AgentTest {
 protected:
  std::unique_ptr<RunningAgent> StartEndlessTrial(const AgentOptions& options) {
    coordinator_.AddTrial("t1");
    auto agent =
        Start(options, Script("forever.sh", "echo $$ > " + dir_ + "/trial.pid\nwhile :; do sleep 0.05; done"),
              clock_);
    EXPECT_TRUE(Eventually([&] { return !ReadFile("trial.pid").empty(); }));
    return agent;
  }

  std::shared_ptr<FakeMonotonicClock> clock_ = std::make_shared<FakeMonotonicClock>();
};

TEST_F(AgentClockTest, HeartbeatsAndTheTrialTimeoutFollowTheInjectedClock) {
  AgentOptions options = Options();
  options.trial_timeout = milliseconds(60000);
  auto agent = StartEndlessTrial(options);
  // The coordinator wants a heartbeat every 50 ms of the agent's clock: none while it stands still
  // (a real clock would have sent several in this time).
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_THAT(coordinator_.Heartbeats(), SizeIs(0));
  clock_->Advance(milliseconds(50));
  ASSERT_TRUE(Eventually([&] { return coordinator_.Heartbeats().size() == 1; }));
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_THAT(coordinator_.Heartbeats(), SizeIs(1));
  // A minute later by the clock: the trial has timed out, well before a minute passed.
  clock_->Advance(milliseconds(60000));
  ASSERT_TRUE(agent->Finished());
  const auto failure = OnlyFailure();
  EXPECT_TRUE(failure.retryable());
  EXPECT_EQ(failure.error(), "frontier-trial timed out after 60 s");
  EXPECT_THAT(coordinator_.Heartbeats(), SizeIs(1));
  EXPECT_TRUE(ProcessGone("trial.pid"));
}

TEST_F(AgentClockTest, DrainDeadlineFollowsTheInjectedClock) {
  AgentOptions options = Options();
  options.drain_timeout = milliseconds(600000);
  auto agent = StartEndlessTrial(options);
  agent->agent().RequestDrain();
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_EQ(coordinator_.Reports(), 0u) << "the drain timeout has not passed on the agent's clock";
  clock_->Advance(milliseconds(600000));
  ASSERT_TRUE(agent->Finished());
  const auto failure = OnlyFailure();
  EXPECT_TRUE(failure.retryable());
  EXPECT_EQ(failure.error(), "worker shutting down");
  EXPECT_TRUE(ProcessGone("trial.pid"));
}

TEST_F(AgentTest, LostLeaseKillsTheTrialAndReportsNothing) {
  coordinator_.SetHeartbeat(/*lease_valid=*/false, /*stop=*/false);
  coordinator_.AddTrial("t1");
  auto agent = Start(
      Options(), Script("forever.sh", "echo $$ > " + dir_ +
                                          "/trial.pid\n"
                                          "while :; do echo '{\"event\":\"progress\"}'; sleep 0.05; done"));
  ASSERT_TRUE(agent->Finished());
  EXPECT_THAT(coordinator_.Heartbeats(), SizeIs(1));
  EXPECT_EQ(coordinator_.Heartbeats()[0].trial_id(), "t1");
  EXPECT_EQ(coordinator_.Reports(), 0u);
  EXPECT_TRUE(ProcessGone("trial.pid"));
}

TEST_F(AgentTest, HeartbeatStopFailsTheTrialAsStopped) {
  coordinator_.SetHeartbeat(/*lease_valid=*/true, /*stop=*/true);
  RunOneTrial(Script("forever.sh", "while :; do sleep 0.05; done"), Options());
  const auto failure = OnlyFailure();
  EXPECT_FALSE(failure.retryable());
  EXPECT_THAT(failure.error(), HasSubstr("stopped: "));
}

TEST_F(AgentTest, ProgressReplyStopFailsTheTrialWithTheReason) {
  coordinator_.StopOnProgress("asha: below the rung's top third");
  RunOneTrial(Script("forever.sh", "while :; do echo '{\"event\":\"eval\",\"step\":1}'; sleep 0.05; done"),
              Options());
  const auto failure = OnlyFailure();
  EXPECT_FALSE(failure.retryable());
  EXPECT_EQ(failure.error(), "stopped: asha: below the rung's top third");
}

TEST_F(AgentTest, RegistersOnceTheCoordinatorComesUp) {
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  coordinator_.AddTrial("t1");
  auto agent = Start(Options(), Script("ok.sh", "echo '" + std::string(kResultLine) + "'"));
  std::this_thread::sleep_for(milliseconds(600));
  EXPECT_THAT(coordinator_.Registrations(), SizeIs(0));
  ASSERT_EQ(StartCoordinator("127.0.0.1:" + std::to_string(port_)), port_);
  ASSERT_TRUE(agent->Finished());
  EXPECT_THAT(coordinator_.Registrations(), SizeIs(1));
  EXPECT_THAT(coordinator_.Completions(), SizeIs(1));
}

TEST_F(AgentTest, RegistersAgainWhenTheCoordinatorForgetsTheWorker) {
  coordinator_.AddTrial("t1");
  auto agent = Start(Options(), Script("slow.sh", "sleep 0.3\necho '" + std::string(kResultLine) + "'"));
  ASSERT_TRUE(Eventually([&] { return coordinator_.Leased().size() == 1; }));
  coordinator_.ForgetWorkers();
  ASSERT_TRUE(agent->Finished());
  EXPECT_THAT(coordinator_.Registrations(), SizeIs(2));
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1));
  EXPECT_EQ(completions[0].worker_id(), "worker-2");
}

TEST_F(AgentTest, SlotsRunTrialsConcurrently) {
  // Each trial succeeds only if it sees the other one running.
  const std::string trial = PairedTrial(/*fail_alone=*/true);
  coordinator_.AddTrial("t1");
  coordinator_.AddTrial("t2");
  AgentOptions options = Options();
  options.slots = 2;
  options.max_trials = 2;
  auto agent = Start(options, trial);
  ASSERT_TRUE(agent->Finished());
  EXPECT_THAT(coordinator_.Completions(), SizeIs(2));
  EXPECT_EQ(coordinator_.Registrations()[0].device_count(), 2);
}

TEST_F(AgentTest, ACompletionBringsTheSlotsNextTrialAndMaxTrialsStillHolds) {
  const std::string trial = Script("ok.sh", "echo '" + std::string(kResultLine) + "'");
  for (const char* id : {"t1", "t2", "t3", "t4"}) coordinator_.AddTrial(id);
  AgentOptions options = Options();
  options.max_trials = 3;
  auto agent = Start(options, trial);
  ASSERT_TRUE(agent->Finished());
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(3));
  EXPECT_EQ(completions[0].trial_id(), "t1");
  EXPECT_EQ(completions[1].trial_id(), "t2");
  EXPECT_EQ(completions[2].trial_id(), "t3");
  // t2 and t3 came with the completions before them; the third completion
  // asks for nothing (max_trials reached), so t4 is never leased.
  EXPECT_EQ(coordinator_.LeasedWithCompletion(), 2);
  EXPECT_EQ(coordinator_.LeaseNextAsked(), 2);
  EXPECT_FALSE(completions[2].lease_next());
  EXPECT_THAT(coordinator_.Leased(), ElementsAre("t1", "t2", "t3"));
}

TEST_F(AgentTest, AnEmptyNextLeaseFallsBackToTheLongPoll) {
  const std::string trial = Script("ok.sh", "echo '" + std::string(kResultLine) + "'");
  coordinator_.AddTrial("t1");
  AgentOptions options = Options();
  options.max_trials = 2;
  auto agent = Start(options, trial);
  // t1's completion asks for a next trial and gets none; the slot then
  // long-polls and runs the trial that arrives later.
  for (int i = 0; i < 200 && coordinator_.Completions().empty(); ++i)
    std::this_thread::sleep_for(milliseconds(10));
  ASSERT_THAT(coordinator_.Completions(), SizeIs(1));
  EXPECT_TRUE(coordinator_.Completions()[0].lease_next());
  coordinator_.AddTrial("t2");
  ASSERT_TRUE(agent->Finished());
  ASSERT_THAT(coordinator_.Completions(), SizeIs(2));
  EXPECT_EQ(coordinator_.Completions()[1].trial_id(), "t2");
  EXPECT_EQ(coordinator_.LeasedWithCompletion(), 0);
}

TEST_F(AgentTest, CudaSlotsGetTheirDeviceAndGpu) {
  AgentOptions options = Options();
  options.device = DeviceKind::kCuda;
  RunOneTrial(Script("env.sh", "cp \"$2\" " + dir_ +
                                   "/seen-spec.json\n"
                                   "echo \"$CUDA_VISIBLE_DEVICES\" > " +
                                   dir_ +
                                   "/gpu\n"
                                   "echo '" +
                                   std::string(kResultLine) + "'"),
              options);
  EXPECT_EQ(ReadFile("gpu"), "0\n");
  EXPECT_EQ(nlohmann::json::parse(ReadFile("seen-spec.json"))["runtime"]["device"], "cuda");
}

TEST_F(AgentTest, CudaSlotsUseTheGpusTheWorkerWasGiven) {
  AgentOptions options = Options();
  options.device = DeviceKind::kCuda;
  options.visible_devices = {"3", "5"};  // e.g. Slurm gave this worker GPUs 3 and 5
  RunOneTrial(Script("env.sh", "echo \"$CUDA_VISIBLE_DEVICES\" > " + dir_ + "/gpu\necho '" +
                                   std::string(kResultLine) + "'"),
              options);
  EXPECT_EQ(ReadFile("gpu"), "3\n");
}

TEST_F(AgentTest, DrainFinishesTheRunningTrialAndLeasesNoMore) {
  coordinator_.AddTrial("t1");
  coordinator_.AddTrial("t2");
  AgentOptions options = Options();
  options.max_trials = 0;
  auto agent = Start(options, Script("slow.sh", "touch " + dir_ + "/started\nsleep 0.3\necho '" +
                                                    std::string(kResultLine) + "'"));
  // Drain once the trial runs: a drain while the lease answer is still in
  // flight cancels that call, and the coordinator's lease then expires.
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir_ + "/started"); }));
  agent->agent().RequestDrain();
  ASSERT_TRUE(agent->Finished());
  EXPECT_THAT(coordinator_.Leased(), SizeIs(1));
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1));
  EXPECT_EQ(completions[0].trial_id(), "t1");
}

TEST_F(AgentTest, IdleDrainReturnsPromptly) {
  AgentOptions options = Options();
  options.max_trials = 0;
  options.lease_wait = milliseconds(30000);
  auto agent = Start(options, Script("unused.sh", "exit 1"));
  ASSERT_TRUE(Eventually([&] { return coordinator_.Registrations().size() == 1; }));
  agent->agent().RequestDrain();
  EXPECT_TRUE(agent->Finished(milliseconds(2000))) << "the pending long poll is cancelled";
}

TEST_F(AgentTest, DrainTimeoutKillsTheTrialAsRetryable) {
  AgentOptions options = Options();
  options.drain_timeout = milliseconds(200);
  coordinator_.AddTrial("t1");
  auto agent =
      Start(options, Script("forever.sh", "touch " + dir_ + "/started\nwhile :; do sleep 0.05; done"));
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir_ + "/started"); }));
  agent->agent().RequestDrain();
  ASSERT_TRUE(agent->Finished());
  const auto failure = OnlyFailure();
  EXPECT_TRUE(failure.retryable());
  EXPECT_EQ(failure.error(), "worker shutting down");
}

TEST_F(AgentTest, StopKillsTheTrialAtOnce) {
  coordinator_.AddTrial("t1");
  const std::string script = "trap '' TERM\ntouch " + dir_ + "/started\nwhile :; do sleep 0.05; done";
  auto agent = Start(Options(), Script("forever.sh", script));
  // Started, not only leased: a stop between the lease and the trial's start kills no trial (a CI run
  // on a loaded machine stopped the worker there and saw no failure reported).
  ASSERT_TRUE(Eventually([&] { return std::filesystem::exists(dir_ + "/started"); }));
  agent->agent().RequestDrain();
  agent->agent().RequestStop();
  ASSERT_TRUE(agent->Finished(milliseconds(2000)));
  const auto failure = OnlyFailure();
  EXPECT_TRUE(failure.retryable());
  EXPECT_EQ(failure.error(), "worker shutting down");
}

TEST_F(AgentTest, MissingTrialBinaryFailsTheTrialAsRetryable) {
  RunOneTrial(dir_ + "/no-such-trial-binary", Options());
  const auto failure = OnlyFailure();
  EXPECT_TRUE(failure.retryable());
  EXPECT_THAT(failure.error(), HasSubstr("cannot start " + dir_ + "/no-such-trial-binary"));
}

TEST_F(AgentTest, SpecThatIsNotJsonFailsForGood) {
  coordinator_.AddTrial("t1", "{not json");
  auto agent = Start(Options(), Script("unused.sh", "exit 1"));
  ASSERT_TRUE(agent->Finished());
  const auto failure = OnlyFailure();
  EXPECT_FALSE(failure.retryable());
  EXPECT_THAT(failure.error(), HasSubstr("spec_json"));
}

TEST_F(AgentTest, ArtifactDirIsPassedToTheTrial) {
  AgentOptions options = Options();
  options.artifact_dir = dir_ + "/artifacts";
  RunOneTrial(
      Script("args.sh", "echo \"$5 $6\" > " + dir_ + "/args\necho '" + std::string(kResultLine) + "'"),
      options);
  EXPECT_EQ(ReadFile("args"), "--artifact-dir " + dir_ + "/artifacts\n");
  EXPECT_THAT(coordinator_.Completions(), SizeIs(1));
}

// A command trial's spec (docs/trial-protocol.md) running `argv`.
std::string CommandSpec(const nlohmann::json& argv, const nlohmann::json& extra = nlohmann::json::object()) {
  nlohmann::json command = {{"argv", argv}};
  if (extra.is_object()) command.update(extra);
  return nlohmann::json{{"schema", 1},
                        {"protocol", 1},
                        {"seed", 2},
                        {"params", {{"width", 48}, {"attention", "linear"}}},
                        {"task", {{"steps", 20}}},
                        {"command", command}}
      .dump();
}

TEST_F(AgentTest, CommandTrialRunsInItsWorkdirWithTheProtocolEnvironment) {
  std::filesystem::create_directories(dir_ + "/project");
  const std::string train = Script("train.sh", "pwd > " + dir_ +
                                                   "/cwd\n"
                                                   "echo \"$#\" > " +
                                                   dir_ +
                                                   "/argc\n"
                                                   "env | grep -E '^(FRONTIER_|GLIBC_TUNABLES=)' | sort > " +
                                                   dir_ +
                                                   "/env\n"
                                                   "cp \"$FRONTIER_TRIAL_SPEC\" " +
                                                   dir_ +
                                                   "/seen-spec.json\n"
                                                   "echo '" +
                                                   std::string(kResultLine) + "'");
  coordinator_.AddTrial("t1", CommandSpec({"/bin/sh", train}, {{"workdir", dir_ + "/project"}}));
  AgentOptions options = Options();
  options.artifact_dir = dir_ + "/artifacts";
  options.cpu_memory_library = dir_ + "/libfrontier_cpu_memory.so";
  auto agent = Start(options, dir_ + "/frontier-trial-is-not-used");
  ASSERT_TRUE(agent->Finished());
  ASSERT_THAT(coordinator_.Completions(), SizeIs(1)) << coordinator_.Failures()[0].error();
  EXPECT_EQ(ReadFile("cwd"), dir_ + "/project\n");
  EXPECT_EQ(ReadFile("argc"), "0\n") << "the worker adds no arguments to a command";
  const std::string env = ReadFile("env");
  EXPECT_THAT(env, HasSubstr("FRONTIER_PROTOCOL=1\n"));
  EXPECT_THAT(env, HasSubstr("FRONTIER_TRIAL_ID=t1\n"));
  EXPECT_THAT(env, HasSubstr("FRONTIER_SEED=2\n"));
  EXPECT_THAT(env, HasSubstr("FRONTIER_DEVICE=cpu\n"));
  EXPECT_THAT(env, HasSubstr("FRONTIER_THREADS=3\n"));
  EXPECT_THAT(env, HasSubstr("FRONTIER_ARTIFACT_DIR=" + dir_ + "/artifacts/t1\n"));
  EXPECT_THAT(env, HasSubstr("FRONTIER_STOP_FILE=" + dir_ + "/work/"));
  EXPECT_THAT(env, HasSubstr("FRONTIER_TRIAL_SPEC=" + dir_ + "/work/"));
  EXPECT_THAT(env, HasSubstr("FRONTIER_CPU_MEMORY_LIB=" + dir_ + "/libfrontier_cpu_memory.so\n"));
  EXPECT_THAT(env, HasSubstr("GLIBC_TUNABLES=glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold="
                             "1073741824:glibc.malloc.top_pad=67108864\n"))
      << "frontier-trial's heap policy for a command trial";
  const auto spec = nlohmann::json::parse(ReadFile("seen-spec.json"));
  EXPECT_EQ(spec["params"]["attention"], "linear");
  EXPECT_EQ(spec["runtime"]["threads"], 3);
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/artifacts/t1"));
}

TEST_F(AgentTest, ATrialsArtifactFolderGoesToTheCoordinatorInChunksBeforeItsResult) {
  // 1.5 MiB in two chunks, a file in a subfolder, an empty file, and a link that is not followed.
  const std::string train =
      Script("artifacts.sh",
             "mkdir -p \"$FRONTIER_ARTIFACT_DIR/plots\"\n"
             "head -c 1572864 /dev/zero | tr '\\0' 'x' > \"$FRONTIER_ARTIFACT_DIR/trace.json\"\n"
             "printf 'step,loss\\n' > \"$FRONTIER_ARTIFACT_DIR/plots/loss.csv\"\n"
             ": > \"$FRONTIER_ARTIFACT_DIR/empty\"\n"
             "ln -s /etc/hostname \"$FRONTIER_ARTIFACT_DIR/link\"\n"
             "echo '" +
                 std::string(kResultLine) + "'");
  coordinator_.AddTrial("t1", CommandSpec({"/bin/sh", train}));
  AgentOptions options = Options();
  options.artifact_dir = dir_ + "/artifacts";
  auto agent = Start(options, dir_ + "/frontier-trial-is-not-used");
  ASSERT_TRUE(agent->Finished());
  ASSERT_THAT(coordinator_.Completions(), SizeIs(1));  // the fake refuses uploads after the result
  std::map<std::string, std::string> files;
  std::vector<std::string> order;
  for (const v1::UploadArtifactRequest& chunk : coordinator_.Uploads()) {
    EXPECT_EQ(chunk.trial_id(), "t1");
    EXPECT_EQ(chunk.attempt(), 1);
    EXPECT_LE(chunk.data().size(), size_t{1} << 20);
    EXPECT_EQ(chunk.offset(), static_cast<int64_t>(files[chunk.name()].size())) << chunk.name();
    files[chunk.name()] += chunk.data();
    if (chunk.last()) order.push_back(chunk.name());
  }
  EXPECT_EQ(order, (std::vector<std::string>{"empty", "plots/loss.csv", "trace.json"}));
  EXPECT_EQ(files["trace.json"], std::string(1572864, 'x'));
  EXPECT_EQ(files["plots/loss.csv"], "step,loss\n");
  EXPECT_EQ(files.count("link"), 0u) << "a symbolic link was followed";
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_ + "/artifacts/t1/trace.json")) << "the local copy stays";
}

TEST_F(AgentTest, ACoordinatorThatKeepsNoArtifactsStillGetsTheResult) {
  coordinator_.RefuseUploads(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "keeps no artifacts"));
  const std::string train =
      Script("two-files.sh",
             "echo a > \"$FRONTIER_ARTIFACT_DIR/a\"; echo b > \"$FRONTIER_ARTIFACT_DIR/b\"\n"
             "echo '" +
                 std::string(kResultLine) + "'");
  coordinator_.AddTrial("t1", CommandSpec({"/bin/sh", train}));
  AgentOptions options = Options();
  options.artifact_dir = dir_ + "/artifacts";
  auto agent = Start(options, dir_ + "/frontier-trial-is-not-used");
  ASSERT_TRUE(agent->Finished());
  EXPECT_THAT(coordinator_.Completions(), SizeIs(1));
  EXPECT_THAT(coordinator_.Uploads(), SizeIs(1)) << "the first refusal ends the upload";
}

TEST_F(AgentTest, CommandTrialFailuresNameWhatHappened) {
  const struct {
    const char* name;
    std::string body;
    nlohmann::json extra;
    const char* error;
    bool retryable;
  } cases[] = {
      {"exit 0 without a result",
       "echo '{\"event\":\"start\"}'; exit 0",
       {},
       "ended without a result (exit code 0)",
       true},
      {"killed by a signal", "kill -KILL $$", {}, "ended without a result (signal SIGKILL", true},
      {"a result of the wrong schema",
       "echo '{\"event\":\"result\",\"schema\":7,\"status\":\"completed\"}'",
       {},
       "breaks the trial protocol: schema is 7, expected 1",
       false},
      {"a completed result without step times",
       "echo '{\"event\":\"result\",\"schema\":1,\"status\":\"completed\"}'",
       {},
       "breaks the trial protocol: a completed result needs step_time_ms.median > 0",
       false},
      {"hangs past its time limit",
       "trap '' TERM; while :; do sleep 0.05; done",
       {{"time_limit_s", 0.3}},
       "timed out after 0.3 s",
       true},
      {"prints a line that is not JSON",
       "echo 'epoch 1: loss 0.3'; sleep 30",
       {},
       "printed a line that is not a JSON object (standard output is for the protocol's lines; logs go to "
       "standard error): epoch 1: loss 0.3",
       false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string script = Script("cmd.sh", c.body);
    const std::string trial_id = std::string("t-") + std::to_string(&c - cases);
    coordinator_.AddTrial(trial_id, CommandSpec({"/bin/sh", script}, c.extra));
    auto agent = Start(Options(), dir_ + "/frontier-trial-is-not-used");
    ASSERT_TRUE(agent->Finished());
    const auto failures = coordinator_.Failures();
    ASSERT_FALSE(failures.empty());
    EXPECT_EQ(failures.back().trial_id(), trial_id);
    EXPECT_THAT(failures.back().error(), HasSubstr(c.error));
    EXPECT_THAT(failures.back().error(), HasSubstr("the command `/bin/sh " + script + "`"));
    EXPECT_EQ(failures.back().retryable(), c.retryable);
  }
  EXPECT_THAT(coordinator_.Completions(), SizeIs(0));
}

TEST_F(AgentTest, CommandNotFoundOrMalformedFailsWithTheReason) {
  coordinator_.AddTrial("t-missing", CommandSpec({dir_ + "/no-such-train.py"}));
  coordinator_.AddTrial("t-empty", CommandSpec(nlohmann::json::array()));
  coordinator_.AddTrial("t-workdir", CommandSpec({"/bin/true"}, {{"workdir", dir_ + "/nowhere"}}));
  AgentOptions options = Options();
  options.max_trials = 3;
  auto agent = Start(options, dir_ + "/frontier-trial-is-not-used");
  ASSERT_TRUE(agent->Finished());
  const auto failures = coordinator_.Failures();
  ASSERT_THAT(failures, SizeIs(3));
  EXPECT_THAT(failures[0].error(), HasSubstr("cannot start " + dir_ + "/no-such-train.py"));
  EXPECT_EQ(failures[1].error(), "invalid command trial spec: command.argv: expected a non-empty list");
  EXPECT_FALSE(failures[1].retryable());
  EXPECT_EQ(failures[2].error(), "invalid command trial spec: command.workdir: " + dir_ +
                                     "/nowhere is not a folder on this worker");
}

TEST_F(AgentTest, StoppedCommandTrialSeesTheStopFileAndIsKilledAfterTheGrace) {
  coordinator_.StopOnProgress("asha: below the rung's top third");
  // Ignores SIGTERM; records whether the stop file appeared before it was killed.
  const std::string script =
      Script("stubborn.sh", "trap 'echo term >> " + dir_ +
                                "/seen' TERM\n"
                                "echo $$ > " +
                                dir_ +
                                "/trial.pid\n"
                                "echo '{\"event\":\"eval\",\"step\":1,\"val_accuracy\":0.1}'\n"
                                "while :; do [ -e \"$FRONTIER_STOP_FILE\" ] && echo stop-file >> " +
                                dir_ + "/seen; sleep 0.02; done");
  coordinator_.AddTrial("t1", CommandSpec({"/bin/sh", script}));
  auto agent = Start(Options(), dir_ + "/frontier-trial-is-not-used");
  ASSERT_TRUE(agent->Finished());
  const auto failure = OnlyFailure();
  EXPECT_EQ(failure.error(), "stopped: asha: below the rung's top third");
  EXPECT_FALSE(failure.retryable());
  EXPECT_THAT(ReadFile("seen"), HasSubstr("stop-file"));
  EXPECT_THAT(ReadFile("seen"), HasSubstr("term"));
  EXPECT_TRUE(ProcessGone("trial.pid"));
}

TEST_F(AgentTest, WhatATrialPutsWhereTheWorkerWritesIsReplacedNotFollowed) {
  // Where the worker writes in its shared work folder: a link to another file at the spec file's name (as
  // an earlier trial could leave it), and a FIFO the trial itself makes at its stop file's name.
  std::ofstream(dir_ + "/victim") << "keep\n";
  std::filesystem::create_symlink(dir_ + "/victim", dir_ + "/work/t1-attempt1.json");
  coordinator_.StopOnProgress("asha: below the rung's top third");
  RunOneTrial(Script("fifo.sh", "cp \"$2\" " + dir_ +
                                    "/seen-spec\n"
                                    "mkfifo \"$FRONTIER_STOP_FILE\"\n"
                                    "echo $$ > " +
                                    dir_ +
                                    "/trial.pid\n"
                                    "echo '{\"event\":\"eval\",\"step\":1}'\n"
                                    "while :; do sleep 0.05; done"),
              Options());
  EXPECT_EQ(ReadFile("victim"), "keep\n");
  EXPECT_THAT(ReadFile("seen-spec"), HasSubstr("\"schema\": 1"));
  const auto failure = OnlyFailure();
  EXPECT_EQ(failure.error(), "stopped: asha: below the rung's top third");
  EXPECT_TRUE(ProcessGone("trial.pid"));
}

// Puts `dir` first on PATH (or replaces PATH) for the test's lifetime.
class PathGuard {
 public:
  explicit PathGuard(const std::string& path) {
    const char* old = std::getenv("PATH");
    old_ = old ? old : "";
    setenv("PATH", path.c_str(), 1);
  }
  ~PathGuard() { setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

std::string SpecWithProfileTool(const std::string& tool) {
  nlohmann::json spec = nlohmann::json::parse(kSpec);
  spec["profile"] = {{"steps", 1}, {"tool", tool}};
  return spec.dump();
}

TEST_F(AgentTest, NsysWrapsTheTrialOnCudaWorkers) {
  const std::string trial = Script("trial.sh", "echo '" + std::string(kResultLine) + "'");
  std::filesystem::create_directories(dir_ + "/bin");
  // A fake nsys: records its arguments, writes the report it was asked for and runs the trial.
  Script("bin/nsys",
         "echo \"$@\" > " + dir_ +
             "/nsys-args\n"
             "for a in \"$@\"; do case \"$a\" in --output=*) out=\"${a#--output=}\";; esac; done\n"
             ": > \"$out.nsys-rep\"\n"
             "while [ \"$1\" != \"" +
             trial +
             "\" ]; do shift; done\n"
             "exec \"$@\"");
  PathGuard path(dir_ + "/bin:" + std::string(std::getenv("PATH") ? std::getenv("PATH") : "/usr/bin:/bin"));
  AgentOptions options = Options();
  options.device = DeviceKind::kCuda;
  options.artifact_dir = dir_ + "/artifacts";
  coordinator_.AddTrial("t1", SpecWithProfileTool("nsys"));
  auto agent = Start(options, trial);
  ASSERT_TRUE(agent->Finished());

  const std::string artifacts = dir_ + "/artifacts/t1";
  EXPECT_EQ(ReadFile("nsys-args"),
            "profile --output=" + artifacts + "/trace --force-overwrite=true --trace=cuda,nvtx,osrt " +
                trial + " --spec " + options.work_dir + "/t1-attempt1.json --progress-every 1" +
                " --artifact-dir " + dir_ + "/artifacts\n");
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1));
  const auto result = nlohmann::json::parse(completions[0].result_json());
  EXPECT_EQ(result["status"], "completed");
  EXPECT_EQ(result["val_accuracy"], 0.5);
  const auto& profile = result["profile"];
  EXPECT_EQ(profile["tool"], "nsys");
  EXPECT_EQ(profile["report"], artifacts + "/trace.nsys-rep");
  EXPECT_EQ(profile["artifact_dir"], artifacts);
  EXPECT_EQ(profile["worker"], "test-host");
  EXPECT_FALSE(profile["host"].get<std::string>().empty());
  EXPECT_EQ(profile["command"].get<std::string>().rfind(dir_ + "/bin/nsys profile", 0), 0u)
      << profile["command"];
  EXPECT_FALSE(profile.contains("error")) << profile["error"];
}

TEST_F(AgentTest, MissingNsysRunsTheTrialUnprofiledAndSaysWhy) {
  if (access("/usr/bin/nsys", X_OK) == 0 || access("/bin/nsys", X_OK) == 0)
    GTEST_SKIP() << "nsys is installed";
  PathGuard path("/usr/bin:/bin");
  AgentOptions options = Options();
  options.device = DeviceKind::kCuda;
  coordinator_.AddTrial("t1", SpecWithProfileTool("nsys"));
  auto agent = Start(options, Script("trial.sh", "echo \"$1\" > " + dir_ + "/argv1\necho '" +
                                                     std::string(kResultLine) + "'"));
  ASSERT_TRUE(agent->Finished());
  EXPECT_EQ(ReadFile("argv1"), "--spec\n") << "the trial ran directly";
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1));
  const auto result = nlohmann::json::parse(completions[0].result_json());
  EXPECT_EQ(result["status"], "completed");
  EXPECT_EQ(result["profile"]["tool"], "nsys");
  EXPECT_EQ(result["profile"]["error"],
            "nsys not found on PATH of worker test-host; the trial ran unprofiled");
}

TEST_F(AgentTest, NcuOnACpuWorkerRunsUnprofiledAndSaysWhy) {
  std::filesystem::create_directories(dir_ + "/bin");
  Script("bin/ncu", "touch " + dir_ + "/ncu-ran\nexit 1");
  PathGuard path(dir_ + "/bin:/usr/bin:/bin");
  coordinator_.AddTrial("t1", SpecWithProfileTool("ncu"));
  auto agent = Start(Options(), Script("trial.sh", "echo '" + std::string(kResultLine) + "'"));
  ASSERT_TRUE(agent->Finished());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ncu-ran"));
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1));
  const auto result = nlohmann::json::parse(completions[0].result_json());
  EXPECT_EQ(result["profile"]["error"],
            "ncu profiles CUDA work; worker test-host runs trials on cpu, so the trial ran unprofiled");
}

// A fake frontier-trial that calibrates (printing `calibration`, logging its
// arguments to calibrations.log) and otherwise writes its FRONTIER_PEAK_FLOPS
// to peak-<trial>.json and completes.
std::string CalibratingTrial(const std::string& dir, const std::string& calibration) {
  return "if [ \"$1\" = --calibrate ]; then\n"
         "  echo \"$@\" >> " +
         dir +
         "/calibrations.log\n"
         "  " +
         calibration +
         "\n"
         "  exit 0\n"
         "fi\n"
         "printf '%s' \"$FRONTIER_PEAK_FLOPS\" > " +
         dir +
         "/peak-$FRONTIER_TRIAL_ID.json\n"
         "echo '" +
         std::string(kResultLine) + "'\n";
}

TEST_F(AgentTest, CalibratesOnceBeforeRegisteringAndEveryTrialGetsThatPeak) {
  const std::string line =
      R"({"event":"calibration","device":"cpu","device_name":"cpu: test","threads":3,)"
      R"("peaks":{"fp32":1.5e11,"bf16":2.5e10},"sources":{"fp32":"calibrated:cpu-gemm","bf16":"calibrated:cpu-gemm"},)"
      R"("measured_at":"2026-12-01T15:00:00Z"})";
  AgentOptions options = Options();
  options.calibrate = true;
  options.host_lock = dir_ + "/host.lock";
  options.max_trials = 3;
  for (const char* id : {"t1", "t2", "t3"}) coordinator_.AddTrial(id);
  auto agent = Start(options, Script("calibrating.sh", CalibratingTrial(dir_, "echo '" + line + "'")));
  ASSERT_TRUE(agent->Finished());
  ASSERT_THAT(coordinator_.Completions(), SizeIs(3));

  EXPECT_EQ(ReadFile("calibrations.log"), "--calibrate --device cpu --dtypes fp32,bf16 --threads 3\n")
      << "one calibration, with the trials' thread count";
  const auto registrations = coordinator_.Registrations();
  ASSERT_THAT(registrations, SizeIs(1));
  EXPECT_EQ(registrations[0].peak_flops().at("fp32"), 1.5e11);
  EXPECT_EQ(registrations[0].peak_flops().at("bf16"), 2.5e10);

  const std::string first = ReadFile("peak-t1.json");
  const auto peak = nlohmann::json::parse(first);
  EXPECT_EQ(peak["fp32"], 1.5e11);
  EXPECT_EQ(peak["source"], "calibrated:cpu-gemm");
  EXPECT_EQ(peak["measured_at"], "2026-12-01T15:00:00Z");
  EXPECT_EQ(peak["threads"], 3);
  EXPECT_EQ(peak["device"], "cpu");
  EXPECT_EQ(ReadFile("peak-t2.json"), first) << "every trial of the worker gets the same peak";
  EXPECT_EQ(ReadFile("peak-t3.json"), first);
}

// A space's trials at another thread count than the calibration's (1 on a worker whose trials get 3)
// get a peak measured at theirs, once, in their precision; the others keep the start's.
TEST_F(AgentTest, TrialsAtAnotherThreadCountGetThePeakMeasuredThereOnce) {
  AgentOptions options = Options();
  options.calibrate = true;
  options.host_lock = dir_ + "/host.lock";
  options.max_trials = 3;
  std::string one_thread = kSpec;
  one_thread.replace(one_thread.find(R"("threads":0)"), 11, R"("threads":1)");
  coordinator_.AddTrial("t1", one_thread);
  coordinator_.AddTrial("t2", one_thread);
  coordinator_.AddTrial("t3");
  const std::string calibration =
      "threads=0; [ \"$6\" = --threads ] && threads=$7\n"
      "  echo \"{\\\"event\\\":\\\"calibration\\\",\\\"device\\\":\\\"cpu\\\",\\\"threads\\\":$threads,"
      "\\\"peaks\\\":{\\\"fp32\\\":${threads}e10},\\\"sources\\\":{\\\"fp32\\\":\\\"calibrated:cpu-gemm\\\"}}\"";
  auto agent = Start(options, Script("calibrating.sh", CalibratingTrial(dir_, calibration)));
  ASSERT_TRUE(agent->Finished());
  ASSERT_THAT(coordinator_.Completions(), SizeIs(3));
  EXPECT_EQ(ReadFile("calibrations.log"),
            "--calibrate --device cpu --dtypes fp32,bf16 --threads 3\n"
            "--calibrate --device cpu --dtypes fp32 --threads 1\n")
      << "the start's calibration, then one at 1 thread for both 1-thread trials";
  const auto t1 = nlohmann::json::parse(ReadFile("peak-t1.json"));
  EXPECT_EQ(t1["threads"], 1);
  EXPECT_EQ(t1["fp32"], 1e10);
  EXPECT_EQ(t1["source"], "calibrated:cpu-gemm");
  EXPECT_EQ(ReadFile("peak-t2.json"), ReadFile("peak-t1.json"));
  const auto t3 = nlohmann::json::parse(ReadFile("peak-t3.json"));
  EXPECT_EQ(t3["threads"], 3);
  EXPECT_EQ(t3["fp32"], 3e10);
}

TEST_F(AgentTest, AFailedCalibrationLeavesEachTrialToMeasureItsOwnPeak) {
  AgentOptions options = Options();
  options.calibrate = true;
  RunOneTrial(Script("calibrating.sh", CalibratingTrial(dir_, "echo 'no GEMM today' >&2; exit 2")), options);
  EXPECT_THAT(coordinator_.Completions(), SizeIs(1));
  EXPECT_TRUE(coordinator_.Registrations()[0].peak_flops().empty());
  EXPECT_EQ(ReadFile("peak-t1.json"), "") << "no FRONTIER_PEAK_FLOPS without a calibration";
}

TEST_F(AgentTest, CalibrationWaitsForTheTrialsRunningOnTheHost) {
  AgentOptions options = Options();
  options.calibrate = true;
  options.host_lock = dir_ + "/host.lock";
  // Another worker's trial runs on this host.
  HostLock host(options.host_lock);
  auto running = host.Shared(nullptr);
  ASSERT_NE(running, nullptr);
  coordinator_.AddTrial("t1");
  auto agent = Start(options, Script("calibrating.sh", CalibratingTrial(dir_, "echo '{}'")));
  // Registration comes after the calibration, which waits for the trial.
  EXPECT_FALSE(Eventually([&] { return !coordinator_.Registrations().empty(); }, milliseconds(500)));
  running.reset();
  ASSERT_TRUE(agent->Finished());
  EXPECT_THAT(coordinator_.Registrations(), SizeIs(1));
  EXPECT_THAT(coordinator_.Completions(), SizeIs(1));
}

TEST_F(AgentTest, EachSlotRunsPinnedToItsOwnCores) {
  const std::vector<int> usable = UsableCpus();
  if (usable.size() < 2) GTEST_SKIP() << "needs two cores";
  AgentOptions options = Options();
  options.slots = 2;
  options.max_trials = 2;
  options.slot_cpus = {{usable[0]}, {usable[1]}};
  options.host_lock = dir_ + "/host.lock";
  coordinator_.AddTrial("t1");
  coordinator_.AddTrial("t2");
  auto agent =
      Start(options, Script("pinned.sh", "grep Cpus_allowed_list /proc/self/status | cut -f2 > " + dir_ +
                                             "/cpus-$FRONTIER_TRIAL_ID\n"
                                             "echo \"$FRONTIER_CPUS\" > " +
                                             dir_ +
                                             "/env-$FRONTIER_TRIAL_ID\n"
                                             "echo '" +
                                             std::string(kResultLine) + "'"));
  ASSERT_TRUE(agent->Finished());
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(2));
  std::set<std::string> seen;
  for (const auto& completion : completions) {
    const auto placement = nlohmann::json::parse(completion.result_json())["placement"];
    const std::string cpus = ReadFile("cpus-" + completion.trial_id());
    EXPECT_EQ(cpus, placement["cpus"].get<std::string>() + "\n") << "the result names the cores it ran on";
    EXPECT_EQ(ReadFile("env-" + completion.trial_id()), cpus);
    EXPECT_EQ(placement["pinned"], true);
    EXPECT_EQ(placement["shared_cores"], false);
    seen.insert(cpus);
  }
  EXPECT_THAT(seen, SizeIs(2)) << "the two slots ran on different cores";
}

TEST_F(AgentTest, TrialsThatShareACoreSaySo) {
  const std::vector<int> usable = UsableCpus();
  // Both slots on one core (as two workers given overlapping --cpus would be),
  // and each trial waits until it sees the other running.
  AgentOptions options = Options();
  options.slots = 2;
  options.max_trials = 2;
  options.slot_cpus = {{usable[0]}, {usable[0]}};
  options.host_lock = dir_ + "/host.lock";
  coordinator_.AddTrial("t1");
  coordinator_.AddTrial("t2");
  auto agent = Start(options, PairedTrial(/*fail_alone=*/false));
  ASSERT_TRUE(agent->Finished());
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(2));
  for (const auto& completion : completions) {
    EXPECT_EQ(nlohmann::json::parse(completion.result_json())["placement"]["shared_cores"], true)
        << completion.trial_id();
  }
}

TEST_F(AgentTest, OutOfMemoryFailsOnceWithTheLimit) {
  AgentOptions options = Options();
  options.memory_limit_mb = 64;
  const std::string line = R"({"event":"result","schema":1,"status":"failed","error_kind":"out_of_memory",)"
                           R"("error":"CUDA out of memory. Tried to allocate 2.00 GiB"})";
  RunOneTrial(
      Script("oom.sh", "[ \"$FRONTIER_MEMORY_LIMIT_MB\" = 64 ] || exit 9\necho '" + line + "'\nexit 2"),
      options);
  const auto failure = OnlyFailure();
  EXPECT_FALSE(failure.retryable()) << "a deterministic OOM is not retried";
  EXPECT_THAT(failure.error(), HasSubstr("out of memory under the worker's limit of 64 MiB per trial ("));
  EXPECT_THAT(failure.error(), HasSubstr("CUDA out of memory. Tried to allocate 2.00 GiB"));
  const auto result = nlohmann::json::parse(failure.result_json());
  EXPECT_EQ(result["error_kind"], "out_of_memory");
  EXPECT_EQ(result["memory_limit_mb"], 64);
  EXPECT_EQ(result["error"], failure.error());
}

// How this host applies a trial's memory limit, read from a probe child
// started with it before the test runs (as trial_process_test.cc's
// LimitsTheChildsMemory reads it): "cgroup memory.max" where the worker's
// cgroup delegates memory, else "RLIMIT_AS". The environment, not the agent.
std::string MemoryLimitKindHere(int64_t limit_mb) {
  ProcessTrialLauncher launcher("/bin/true");
  TrialCommand command;
  command.memory_limit_mb = limit_mb;
  std::string error;
  std::unique_ptr<TrialProcess> probe = launcher.Start(command, &error);
  if (probe == nullptr) return "no probe: " + error;
  const std::string kind = probe->MemoryLimitKind();
  if (!probe->Wait(milliseconds(5000))) probe->Terminate(milliseconds(100));
  return kind;
}

TEST_F(AgentTest, ACrashOnAnAllocationUnderTheLimitIsOutOfMemory) {
  // Only under RLIMIT_AS is an allocation crash out of memory (under a cgroup
  // limit the OOM killer's count says so): skipped where this host gives trials
  // a cgroup limit, decided before the trial runs, never from the outcome.
  const std::string kind = MemoryLimitKindHere(64);
  if (kind == "cgroup memory.max") GTEST_SKIP() << "a cgroup memory limit applies here, not RLIMIT_AS";
  ASSERT_EQ(kind, "RLIMIT_AS");
  const std::string crash =
      "echo \"terminate called after throwing an instance of 'std::bad_alloc'\" >&2\nkill -ABRT $$";
  AgentOptions options = Options();
  options.memory_limit_mb = 64;
  RunOneTrial(Script("abort.sh", crash), options);
  const auto failure = OnlyFailure();
  EXPECT_FALSE(failure.retryable()) << failure.error();
  EXPECT_THAT(failure.error(),
              HasSubstr("out of memory under the worker's limit of 64 MiB per trial (RLIMIT_AS)"));
  EXPECT_THAT(failure.error(), HasSubstr("std::bad_alloc"));
  const auto result = nlohmann::json::parse(failure.result_json());
  EXPECT_EQ(result["error_kind"], "out_of_memory");
  EXPECT_EQ(result["memory_limit_kind"], "RLIMIT_AS");
  EXPECT_EQ(result["memory_limit_mb"], 64);
}

TEST_F(AgentTest, ACrashWithoutAMemoryLimitStaysRetryable) {
  RunOneTrial(Script("abort.sh",
                     "echo \"terminate called after throwing an instance of 'std::bad_alloc'\" >&2\n"
                     "kill -ABRT $$"),
              Options());
  const auto failure = OnlyFailure();
  EXPECT_TRUE(failure.retryable()) << "without the worker's limit an allocation crash may be the host's";
  EXPECT_THAT(failure.error(), HasSubstr("ended without a result (signal SIGABRT"));
}

// The real runner, when FRONTIER_TRIAL_BINARY names it (a LibTorch build).
TEST_F(AgentTest, RealTrialRunnerCompletes) {
  const char* binary = std::getenv("FRONTIER_TRIAL_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "set FRONTIER_TRIAL_BINARY to run frontier-trial for real";
  AgentOptions options = Options();
  options.threads_per_trial = 1;
  options.progress_interval = milliseconds(0);
  RunOneTrial(binary, options);
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(1));
  const auto result = nlohmann::json::parse(completions[0].result_json());
  EXPECT_EQ(result["status"], "completed");
  EXPECT_EQ(result["threads"], 1);
  EXPECT_FALSE(coordinator_.Progress().empty());
}

// The real runner: the worker calibrates once, every trial's MFU uses that
// peak, and a variant that cannot fit the memory limit fails once as
// out_of_memory.
TEST_F(AgentTest, RealTrialRunnerUsesTheCalibratedPeakAndFailsOutOfMemoryOnce) {
  const char* binary = std::getenv("FRONTIER_TRIAL_BINARY");
  if (binary == nullptr) GTEST_SKIP() << "set FRONTIER_TRIAL_BINARY to run frontier-trial for real";
  AgentOptions options = Options();
  options.threads_per_trial = 1;
  options.calibrate = true;
  options.calibration_dtypes = {"fp32"};
  options.host_lock = dir_ + "/host.lock";
  options.memory_limit_mb = 1536;  // frontier-trial's own address space is about 0.9 GiB
  options.max_trials = 3;
  options.trial_timeout = milliseconds(120000);
  nlohmann::json big = nlohmann::json::parse(kSpec);
  big["arch"]["stages"][0]["width"] = 8192;  // a 3x3 convolution of 8192 channels: 2.4 GB of weights
  coordinator_.AddTrial("t1");
  coordinator_.AddTrial("t2");
  coordinator_.AddTrial("big", big.dump());
  auto agent = Start(options, binary);
  ASSERT_TRUE(agent->Finished(milliseconds(300000)));
  const auto registrations = coordinator_.Registrations();
  ASSERT_THAT(registrations, SizeIs(1));
  ASSERT_EQ(registrations[0].peak_flops().count("fp32"), 1u);
  const double calibrated = registrations[0].peak_flops().at("fp32");
  EXPECT_GT(calibrated, 0);
  const auto completions = coordinator_.Completions();
  ASSERT_THAT(completions, SizeIs(2));
  for (const auto& completion : completions) {
    const auto result = nlohmann::json::parse(completion.result_json());
    EXPECT_EQ(result["peak_flops"]["source"], "calibrated:cpu-gemm") << completion.trial_id();
    EXPECT_EQ(result["peak_flops"]["flops_per_s"].get<double>(), calibrated) << completion.trial_id();
    EXPECT_LE(result["mfu"].get<double>(), 1.0);
  }
  const auto failures = coordinator_.Failures();
  ASSERT_THAT(failures, SizeIs(1));
  EXPECT_EQ(failures[0].trial_id(), "big");
  EXPECT_FALSE(failures[0].retryable());
  EXPECT_THAT(failures[0].error(), HasSubstr("out of memory under the worker's limit of 1536 MiB per trial"));
  EXPECT_EQ(nlohmann::json::parse(failures[0].result_json())["error_kind"], "out_of_memory");
}

// A data-parallel trial's spec: kSpec with runtime.ranks (and nodes).
std::string RanksSpec(int ranks, int nodes = 1) {
  nlohmann::json spec = nlohmann::json::parse(kSpec);
  spec["runtime"]["ranks"] = ranks;
  spec["runtime"]["nodes"] = nodes;
  return spec.dump();
}

// A fake frontier-trial rank: records what it was given in rank-<rank>,
// then rank 0 prints the result (the other ranks print nothing, as frontier-trial's).
constexpr const char* kRankScript =
    "r=${FRONTIER_RANK:-$SLURM_PROCID}\n"
    "{ echo \"rank=$r world=${FRONTIER_WORLD_SIZE:-$SLURM_NTASKS} rdzv=$FRONTIER_RENDEZVOUS "
    "cpus=$(grep Cpus_allowed_list /proc/self/status | cut -f2) env_cpus=$FRONTIER_CPUS\"; "
    "grep -o '\"threads\": [0-9]*' \"$2\"; } > DIR/rank-$r\n"
    "[ \"$r\" = 0 ] && echo 'RESULT'\n"
    "exit 0\n";

std::string RankScript(const std::string& dir) {
  std::string script = kRankScript;
  script.replace(script.find("DIR"), 3, dir);
  script.replace(script.find("RESULT"), 6, kResultLine);
  return script;
}

TEST_F(AgentTest, LocalRanksEachGetTheirRankCoresAndTheRendezvous) {
  const std::vector<int> usable = UsableCpus();
  if (usable.size() < 2) GTEST_SKIP() << "needs two cores";
  AgentOptions options = Options();  // threads_per_trial 3: the two ranks share it, 1 each
  options.slot_cpus = {{usable[0], usable[1]}};
  coordinator_.AddTrial("t1", RanksSpec(2));
  auto agent = Start(options, Script("rank.sh", RankScript(dir_)));
  ASSERT_TRUE(agent->Finished());
  ASSERT_THAT(coordinator_.Completions(), SizeIs(1));
  const std::string rank0 = ReadFile("rank-0"), rank1 = ReadFile("rank-1");
  EXPECT_THAT(rank0, testing::HasSubstr("rank=0 world=2 rdzv=file://"));
  EXPECT_THAT(rank1, testing::HasSubstr("rank=1 world=2 rdzv=file://"));
  const auto rendezvous = [](const std::string& text) {
    const size_t at = text.find("rdzv=");
    return text.substr(at, text.find(' ', at) - at);
  };
  EXPECT_EQ(rendezvous(rank0), rendezvous(rank1)) << "both ranks meet at the same store";
  EXPECT_THAT(rank0, testing::HasSubstr("cpus=" + std::to_string(usable[0]) +
                                        " env_cpus=" + std::to_string(usable[0])));
  EXPECT_THAT(rank1, testing::HasSubstr("cpus=" + std::to_string(usable[1]) +
                                        " env_cpus=" + std::to_string(usable[1])));
  EXPECT_THAT(rank0, testing::HasSubstr("\"threads\": 1"));
  EXPECT_FALSE(std::filesystem::exists(rendezvous(rank0).substr(12)))
      << "the FileStore is removed after the trial";
}

TEST_F(AgentTest, ADeadRankFailsTheTrialNamingItAndStopsTheOtherRanks) {
  coordinator_.AddTrial("t1", RanksSpec(2));
  const auto started = std::chrono::steady_clock::now();
  auto agent = Start(Options(), Script("ranks.sh",
                                       "if [ \"$FRONTIER_RANK\" = 1 ]; then\n"
                                       "  echo 'rank 1 going down' >&2; sleep 0.3; kill -9 $$\n"
                                       "fi\n"
                                       "echo $$ > " +
                                           dir_ +
                                           "/rank0.pid\n"
                                           "echo '{\"event\":\"progress\",\"step\":1,\"loss\":1.0}'\n"
                                           "exec sleep 30\n"));
  ASSERT_TRUE(agent->Finished());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10))
      << "rank 0 was not left running";
  const v1::FailTrialRequest failure = OnlyFailure();
  EXPECT_THAT(failure.error(), testing::HasSubstr("rank 1 of 2 ended with signal SIGKILL"));
  EXPECT_THAT(failure.error(), testing::HasSubstr("rank 1 going down"));
  EXPECT_TRUE(failure.retryable());
  EXPECT_EQ(nlohmann::json::parse(failure.result_json())["failed_rank"], 1);
  EXPECT_TRUE(ProcessGone("rank0.pid")) << "rank 0 was stopped";
}

TEST_F(AgentTest, SrunStartsTheRanksAsOneStepAcrossTheNodes) {
  // tests/deploy/fake_srun as srun on the PATH the worker looks srun up in.
  const std::string bin = dir_ + "/bin";
  std::filesystem::create_directories(bin);
  std::filesystem::create_symlink(FRONTIER_SOURCE_DIR "/tests/deploy/fake_srun", bin + "/srun");
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", (bin + ":" + path).c_str(), 1);
  AgentOptions options = Options();
  options.rank_launcher = "srun";
  options.rendezvous_host = "node-a";
  coordinator_.AddTrial("t1", RanksSpec(4, 2));
  auto agent = Start(options, Script("rank.sh", RankScript(dir_)));
  const bool finished = agent->Finished();
  setenv("PATH", path.c_str(), 1);
  ASSERT_TRUE(finished);
  ASSERT_THAT(coordinator_.Completions(), SizeIs(1));
  for (int r = 0; r < 4; ++r) {
    EXPECT_THAT(ReadFile("rank-" + std::to_string(r)),
                testing::HasSubstr("rank=" + std::to_string(r) + " world=4 rdzv=tcp://node-a:"));
  }
}

TEST_F(AgentTest, MoreThanOneNodeNeedsSrun) {
  coordinator_.AddTrial("t1", RanksSpec(2, 2));
  auto agent =
      Start(Options(), Script("never.sh", "touch " + dir_ + "/ran\necho '" + std::string(kResultLine) + "'"));
  ASSERT_TRUE(agent->Finished());
  const v1::FailTrialRequest failure = OnlyFailure();
  EXPECT_THAT(failure.error(), testing::HasSubstr("runtime.nodes is 2"));
  EXPECT_THAT(failure.error(), testing::HasSubstr("--rank-launcher srun"));
  EXPECT_FALSE(failure.retryable());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ran"));
}

}  // namespace
}  // namespace frontier
