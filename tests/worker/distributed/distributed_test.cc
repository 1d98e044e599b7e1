// Data-parallel trials on CPU (worker/trial/distributed, docs/distributed.md).
//
// Multi-rank tests start this program again once per rank (fork + exec of
// /proc/self/exe with FRONTIER_DIST_TEST_CHILD set and the rendezvous in
// FRONTIER_RANK / FRONTIER_WORLD_SIZE / FRONTIER_RENDEZVOUS), one LibTorch
// thread each. Every rank writes one line per step to its own file; the
// parent compares the ranks with each other and with a single-process
// reference trained on the whole global batch.
#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <torch/torch.h>

#include "worker/host.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "worker/trial/distributed/data_parallel.h"
#include "worker/trial/distributed/rendezvous.h"

namespace fd = frontier::distributed;
namespace fs = std::filesystem;

namespace {

// ----------------------------------------------------------------------------
// The model and data every rank and the reference share.

struct Net : torch::nn::Module {
  explicit Net(int hidden) {
    a = register_module("a", torch::nn::Linear(8, hidden));
    b = register_module("b", torch::nn::Linear(hidden, hidden));
    c = register_module("c", torch::nn::Linear(hidden, 4));
    // A buffer the forward uses, so a rank that skipped the broadcast of
    // buffers would diverge.
    scale = register_buffer("scale", torch::rand({8}) + 0.5);
  }
  torch::Tensor forward(torch::Tensor x) {
    return c(torch::tanh(b(torch::tanh(a(x * scale)))));
  }
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr};
  torch::Tensor scale;
};

struct TrainSetup {
  int steps = 10;
  int64_t batch = 32;  // the global batch
  int hidden = 32;
  double lr = 0.1;
  torch::Dtype dtype = torch::kFloat32;
};

struct Data {
  torch::Tensor x, y;
};

// The data first (same seed everywhere), then the model with `model_seed`:
// rank 0 seeds like the reference, the other ranks differently, so only the
// broadcast makes their initial weights equal.
Data MakeData(const TrainSetup& setup) {
  torch::manual_seed(1234);
  Data data;
  data.x = torch::randn({setup.steps * setup.batch, 8}).to(setup.dtype);
  data.y = torch::randint(0, 4, {setup.steps * setup.batch}, torch::kLong);
  return data;
}

std::shared_ptr<Net> MakeNet(const TrainSetup& setup, uint64_t model_seed) {
  torch::manual_seed(model_seed);
  auto net = std::make_shared<Net>(setup.hidden);
  net->to(setup.dtype);
  return net;
}

void SgdStep(Net& net, double lr) {
  torch::NoGradGuard no_grad;
  for (auto& p : net.parameters()) p.sub_(p.grad() * lr);
}

void ZeroGrad(Net& net) {
  for (auto& p : net.parameters()) {
    if (p.grad().defined()) p.grad().zero_();
  }
}

torch::Tensor FlatGrad(Net& net) {
  std::vector<torch::Tensor> parts;
  for (auto& p : net.parameters()) parts.push_back(p.grad().reshape({-1}));
  return torch::cat(parts);
}

uint64_t Fnv(const torch::Tensor& t) {
  torch::Tensor c = t.contiguous();
  auto* bytes = static_cast<const unsigned char*>(c.data_ptr());
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
  return h;
}

int64_t ParamBytes(Net& net) {
  int64_t bytes = 0;
  for (auto& p : net.parameters()) bytes += p.numel() * p.element_size();
  return bytes;
}

// One process, the whole global batch: what N ranks must reproduce.
std::vector<double> ReferenceLosses(const TrainSetup& setup) {
  Data data = MakeData(setup);
  auto net = MakeNet(setup, 100);
  std::vector<double> losses;
  for (int step = 0; step < setup.steps; ++step) {
    ZeroGrad(*net);
    auto x = data.x.narrow(0, step * setup.batch, setup.batch);
    auto y = data.y.narrow(0, step * setup.batch, setup.batch);
    auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    SgdStep(*net, setup.lr);
    losses.push_back(loss.item<double>());
  }
  return losses;
}

const char* Env(const char* name, const char* otherwise) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : otherwise;
}

// ----------------------------------------------------------------------------
// A rank (the child side). Output lines:
//   init <hash of the parameters and buffers after construction>
//   step <i> <global loss> <allreduce_s> <exposed_s> <bytes> <buckets>
//        <in_backward> <step_s> <slowest_s> <grad hash> <identical 0/1> <param bytes>
//   error <message>                         (then exit status 3)

int ChildMain() {
  torch::set_num_threads(1);
  TrainSetup setup;
  setup.steps = std::atoi(Env("DT_STEPS", "10"));
  setup.batch = std::atoll(Env("DT_BATCH", "32"));
  setup.hidden = std::atoi(Env("DT_HIDDEN", "32"));
  if (std::string(Env("DT_DTYPE", "float")) == "double") setup.dtype = torch::kFloat64;
  const int die_at = std::atoi(Env("DT_DIE_AT", "-1"));
  const int stop_at = std::atoi(Env("DT_STOP_AT", "-1"));
  const double weight_override = std::atof(Env("DT_WEIGHT", "0"));
  std::ofstream out(Env("DT_OUT", "/dev/stdout"));
  out.precision(17);

  std::string problem;
  auto rendezvous = fd::RendezvousFromEnvironment(&problem);
  if (!rendezvous) {
    out << "error " << (problem.empty() ? "no rendezvous in the environment" : problem) << "\n";
    return 3;
  }
  try {
    auto group = fd::ProcessGroup::Connect(*rendezvous);
    fd::DataParallelOptions options;
    options.bucket_cap_mb = std::atof(Env("DT_CAP_MB", "25"));
    options.overlap = std::string(Env("DT_OVERLAP", "1")) == "1";
    options.batch_policy = *frontier::ParseName<frontier::BatchPolicy>(Env("DT_POLICY", "split_global"));
    // DT_BATCH is the policy's batch (global or per rank); the data hold
    // `global` rows per step, drawn alike on every rank.
    const long long policy_batch = setup.batch;
    setup.batch = fd::ShardOf(policy_batch, rendezvous->rank, rendezvous->world_size, options.batch_policy).global;
    Data data = MakeData(setup);
    auto net = MakeNet(setup, 100 + 17 * static_cast<uint64_t>(rendezvous->rank));
    fd::DataParallel dp(*group, net->parameters(), net->buffers(), options);
    {
      std::vector<torch::Tensor> all;
      for (auto& p : net->parameters()) all.push_back(p.detach().reshape({-1}));
      for (auto& b : net->buffers()) all.push_back(b.reshape({-1}));
      out << "init " << Fnv(torch::cat(all)) << "\n" << std::flush;
    }
    for (int step = 0; step < setup.steps; ++step) {
      if (step == die_at && group->rank() == group->world_size() - 1) {
        out << "dying " << step << "\n" << std::flush;
        ::kill(::getpid(), SIGKILL);
      }
      if (step == stop_at && group->rank() == group->world_size() - 1) {
        out << "stopping " << step << "\n" << std::flush;
        ::kill(::getpid(), SIGSTOP);  // alive but silent: only a timeout can tell
      }
      auto start = std::chrono::steady_clock::now();
      ZeroGrad(*net);
      fd::Shard shard = dp.LocalShard(policy_batch);
      auto x = data.x.narrow(0, step * setup.batch + shard.begin, shard.count);
      auto y = data.y.narrow(0, step * setup.batch + shard.begin, shard.count);
      auto loss = torch::nn::functional::cross_entropy(net->forward(x), y);
      dp.BeforeBackward(weight_override > 0 ? weight_override : shard.weight);
      loss.backward();
      fd::CommFigures figures = dp.AfterBackward();
      SgdStep(*net, setup.lr);
      double step_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double slowest = dp.SlowestRank(step_s);
      double global_loss = group->AllReduceSum(loss.item<double>() * shard.weight, "the loss");
      torch::Tensor grad = FlatGrad(*net);
      bool identical = true;
      for (auto& other : group->AllGather(grad, "the gradients")) identical = identical && torch::equal(other, grad);
      out << "step " << step << " " << global_loss << " " << figures.allreduce_s << " " << figures.exposed_s << " "
          << figures.bytes << " " << figures.buckets << " " << figures.buckets_launched_in_backward << " " << step_s
          << " " << slowest << " " << Fnv(grad) << " " << (identical ? 1 : 0) << " " << ParamBytes(*net) << "\n"
          << std::flush;
    }
    group->Barrier("the end of training");
  } catch (const std::exception& e) {
    out << "error " << e.what() << "\n" << std::flush;
    return 3;
  }
  return 0;
}

// ----------------------------------------------------------------------------
// The parent side: start the ranks, wait with a deadline, read their lines.

struct StepLine {
  int step = 0;
  double loss = 0, allreduce_s = 0, exposed_s = 0, step_s = 0, slowest_s = 0;
  int64_t bytes = 0, param_bytes = 0;
  int buckets = 0, in_backward = 0, identical = 0;
  uint64_t grad_hash = 0;
};

struct RankResult {
  pid_t pid = 0;
  int status = 0;
  bool exited = false;
  std::string init, error, text;
  std::vector<StepLine> steps;
};

RankResult Read(const std::string& path) {
  RankResult result;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    result.text += line + "\n";
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (kind == "init") {
      words >> result.init;
    } else if (kind == "error") {
      result.error = line.substr(6);
    } else if (kind == "step") {
      StepLine s;
      words >> s.step >> s.loss >> s.allreduce_s >> s.exposed_s >> s.bytes >> s.buckets >> s.in_backward >> s.step_s >>
          s.slowest_s >> s.grad_hash >> s.identical >> s.param_bytes;
      result.steps.push_back(s);
    }
  }
  return result;
}

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/frontier-dist-XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct RankRun {
  std::vector<RankResult> ranks;
  double elapsed_s = 0;
  bool timed_out = false;
};

// Starts `world` ranks of this program with `env` and waits at most
// `deadline_s`; on the deadline every rank is killed (and the test fails).
// With `kill_rest_after_rank0`, the other ranks are killed once rank 0 has exited.
RankRun RunRanks(int world, const std::map<std::string, std::string>& env, const TempDir& dir, double deadline_s = 120,
                 bool kill_rest_after_rank0 = false) {
  std::vector<pid_t> pids;
  auto start = std::chrono::steady_clock::now();
  for (int rank = 0; rank < world; ++rank) {
    std::map<std::string, std::string> all = {
        {"FRONTIER_DIST_TEST_CHILD", "1"},       {"FRONTIER_RANK", std::to_string(rank)},
        {"FRONTIER_WORLD_SIZE", std::to_string(world)},
        {"FRONTIER_RENDEZVOUS", "file://" + dir.path() + "/store"},
        {"FRONTIER_GLOO_HOSTNAME", "127.0.0.1"}, {"FRONTIER_DIST_TIMEOUT_S", "30"},
        {"OMP_NUM_THREADS", "1"},                {"DT_OUT", dir.path() + "/rank" + std::to_string(rank) + ".txt"}};
    for (auto& [k, v] : env) all[k] = v;
    std::vector<std::string> strings;
    for (char** e = environ; *e != nullptr; ++e) {
      std::string entry = *e;
      if (all.count(entry.substr(0, entry.find('='))) == 0) strings.push_back(entry);
    }
    for (auto& [k, v] : all) strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string log = dir.path() + "/rank" + std::to_string(rank) + ".log";
    char exe[] = "/proc/self/exe";
    char* argv[] = {exe, nullptr};
    pid_t pid = ::fork();
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphan if this test dies
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execve(exe, argv, envp.data());
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  RankRun run;
  run.ranks.resize(world);
  int left = world;
  while (left > 0) {
    for (int rank = 0; rank < world; ++rank) {
      if (run.ranks[rank].exited) continue;
      int status = 0;
      if (::waitpid(pids[rank], &status, WNOHANG) == pids[rank]) {
        run.ranks[rank].exited = true;
        run.ranks[rank].status = status;
        --left;
      }
    }
    if (kill_rest_after_rank0 && run.ranks[0].exited) {
      for (int rank = 1; rank < world; ++rank) {
        if (!run.ranks[rank].exited) {
          ::kill(pids[rank], SIGKILL);
          ::waitpid(pids[rank], &run.ranks[rank].status, 0);
          run.ranks[rank].exited = true;
          --left;
        }
      }
    }
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (left > 0 && elapsed > deadline_s) {
      run.timed_out = true;
      for (int rank = 0; rank < world; ++rank) {
        if (!run.ranks[rank].exited) {
          ::kill(pids[rank], SIGKILL);
          ::waitpid(pids[rank], &run.ranks[rank].status, 0);
          run.ranks[rank].exited = true;
        }
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  run.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int rank = 0; rank < world; ++rank) {
    pid_t pid = pids[rank];
    int status = run.ranks[rank].status;
    run.ranks[rank] = Read(dir.path() + "/rank" + std::to_string(rank) + ".txt");
    run.ranks[rank].pid = pid;
    run.ranks[rank].status = status;
    run.ranks[rank].exited = true;
    std::ifstream log(dir.path() + "/rank" + std::to_string(rank) + ".log");
    std::stringstream text;
    text << log.rdbuf();
    run.ranks[rank].text += text.str();
  }
  return run;
}

bool ExitedZero(const RankResult& r) { return WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0; }

// Float32: the 2-rank step sums the same products in another order (two
// half-batch means, each weighted 1/2 exactly, then one addition in the
// all-reduce, against one mean over 32 rows), so each gradient differs by a
// few ulps (float eps 1.2e-7) and 10 SGD steps at lr 0.1 keep the losses
// (about 1.4) within ~1e-6 of each other; 1e-5 relative leaves a margin,
// while wrong averaging (e.g. summing instead of averaging) moves the
// second loss by ~1e-2. Float64 under the same argument: 1e-12.
double Tolerance(torch::Dtype dtype) { return dtype == torch::kFloat64 ? 1e-12 : 1e-5; }

void ExpectTrajectoryLikeReference(const TrainSetup& setup, const std::map<std::string, std::string>& env) {
  TempDir dir;
  RankRun run = RunRanks(2, env, dir);
  ASSERT_FALSE(run.timed_out) << run.ranks[0].text << run.ranks[1].text;
  std::vector<double> reference = ReferenceLosses(setup);
  for (int rank = 0; rank < 2; ++rank) {
    const RankResult& r = run.ranks[rank];
    ASSERT_TRUE(ExitedZero(r)) << "rank " << rank << " status " << r.status << ": " << r.text;
    ASSERT_EQ(r.steps.size(), static_cast<size_t>(setup.steps)) << r.text;
  }
  // Identical initialization although the ranks seeded their models differently.
  EXPECT_FALSE(run.ranks[0].init.empty());
  EXPECT_EQ(run.ranks[0].init, run.ranks[1].init);
  const double tol = Tolerance(setup.dtype);
  double worst = 0;
  for (int step = 0; step < setup.steps; ++step) {
    const StepLine& a = run.ranks[0].steps[step];
    worst = std::max(worst, std::abs(a.loss - reference[step]));
    const StepLine& b = run.ranks[1].steps[step];
    EXPECT_NEAR(a.loss, reference[step], tol * std::max(1.0, std::abs(reference[step]))) << "step " << step;
    EXPECT_EQ(a.loss, b.loss) << "step " << step;
    // Gradients after the all-reduce: bit for bit the same on both ranks.
    EXPECT_EQ(a.grad_hash, b.grad_hash) << "step " << step;
    EXPECT_EQ(a.identical, 1) << "step " << step;
    EXPECT_EQ(b.identical, 1) << "step " << step;
    for (const StepLine* s : {&a, &b}) {
      EXPECT_GT(s->allreduce_s, 0) << "step " << step;
      EXPECT_GE(s->exposed_s, 0) << "step " << step;
      EXPECT_GT(s->param_bytes, 0);
      EXPECT_EQ(s->bytes, s->param_bytes) << "step " << step;
      EXPECT_GE(s->slowest_s, s->step_s) << "step " << step;
    }
    EXPECT_EQ(a.slowest_s, b.slowest_s);
  }
  std::printf("largest |loss(2 ranks) - loss(1 rank)| over %d steps: %.3g (tolerance %.0e relative)\n", setup.steps,
              worst, tol);
}

TEST(DataParallel, TwoRanksMatchOneRankWithTheGlobalBatchOneBucket) {
  TrainSetup setup;
  ExpectTrajectoryLikeReference(setup, {{"DT_CAP_MB", "25"}});
}

TEST(DataParallel, TwoRanksMatchOneRankWithManyBucketsOverlapped) {
  TrainSetup setup;
  // 0.002 MiB = 2097 bytes: the 32x32 weight (4096 bytes) gets a bucket of
  // its own, so there are several buckets and the first ones start in backward.
  ExpectTrajectoryLikeReference(setup, {{"DT_CAP_MB", "0.002"}});
}

TEST(DataParallel, TwoRanksMatchOneRankInDoublePrecision) {
  TrainSetup setup;
  setup.dtype = torch::kFloat64;
  ExpectTrajectoryLikeReference(setup, {{"DT_DTYPE", "double"}, {"DT_CAP_MB", "0.002"}, {"DT_OVERLAP", "0"}});
}

// 33 rows split 17/16: the weights 17/33 and 16/33 keep the global mean.
TEST(DataParallel, AnUnevenSplitStillMatchesOneRank) {
  TrainSetup setup;
  setup.batch = 33;
  ExpectTrajectoryLikeReference(setup, {{"DT_BATCH", "33"}});
}

// fixed_per_rank: 16 rows per rank are one process's 32-row batch.
TEST(DataParallel, TwoRanksOfFixedBatchMatchOneRankWithTheirUnion) {
  TrainSetup setup;  // the reference's batch: 2 x 16
  ExpectTrajectoryLikeReference(setup, {{"DT_POLICY", "fixed_per_rank"}, {"DT_BATCH", "16"}});
}

TEST(DataParallel, SmallBucketsStartDuringBackward) {
  TempDir dir;
  RankRun run = RunRanks(2, {{"DT_CAP_MB", "0.002"}, {"DT_STEPS", "3"}}, dir);
  ASSERT_FALSE(run.timed_out);
  for (const RankResult& r : run.ranks) {
    ASSERT_TRUE(ExitedZero(r)) << r.text;
    ASSERT_EQ(r.steps.size(), 3u) << r.text;
    for (const StepLine& s : r.steps) {
      EXPECT_GE(s.buckets, 3);
      // The last layer's bucket is complete before backward reaches the first
      // layer: it must have started from a hook, not after backward.
      EXPECT_GE(s.in_backward, 1);
      EXPECT_LT(s.in_backward, s.buckets + 1);
    }
  }
  TempDir late;
  RankRun after = RunRanks(2, {{"DT_CAP_MB", "0.002"}, {"DT_STEPS", "2"}, {"DT_OVERLAP", "0"}}, late);
  for (const RankResult& r : after.ranks) {
    ASSERT_TRUE(ExitedZero(r)) << r.text;
    for (const StepLine& s : r.steps) EXPECT_EQ(s.in_backward, 0);
  }
}

// The check above can fail: summing the ranks' gradients instead of
// averaging them (weight 1) leaves the reference's trajectory.
TEST(DataParallel, WrongAveragingIsCaught) {
  TrainSetup setup;
  TempDir dir;
  RankRun run = RunRanks(2, {{"DT_WEIGHT", "1"}}, dir);
  ASSERT_TRUE(ExitedZero(run.ranks[0])) << run.ranks[0].text;
  ASSERT_EQ(run.ranks[0].steps.size(), static_cast<size_t>(setup.steps));
  std::vector<double> reference = ReferenceLosses(setup);
  double worst = 0;
  for (int step = 0; step < setup.steps; ++step) {
    worst = std::max(worst, std::abs(run.ranks[0].steps[step].loss - reference[step]));
  }
  EXPECT_GT(worst, 100 * Tolerance(setup.dtype));
  std::printf("summing instead of averaging: largest loss difference %.3g\n", worst);
}

TEST(DataParallel, TcpStoreOnAFreePort) {
  TempDir dir;
  int port = frontier::FreeTcpPort();
  RankRun run = RunRanks(2, {{"FRONTIER_RENDEZVOUS", "tcp://127.0.0.1:" + std::to_string(port)}, {"DT_STEPS", "3"}}, dir);
  ASSERT_FALSE(run.timed_out);
  for (const RankResult& r : run.ranks) {
    ASSERT_TRUE(ExitedZero(r)) << r.text;
    ASSERT_EQ(r.steps.size(), 3u);
    EXPECT_EQ(r.steps.back().identical, 1);
  }
  EXPECT_EQ(run.ranks[0].steps.back().grad_hash, run.ranks[1].steps.back().grad_hash);
}

TEST(DataParallel, ADeadRankFailsTheOtherCleanly) {
  TempDir dir;
  // The last rank kills itself (SIGKILL) before step 3; rank 0 must fail with
  // a DistributedError, not hang: the Gloo timeout is 30 s, and the test's
  // own deadline (90 s) kills both and fails if it does not.
  RankRun run = RunRanks(2, {{"DT_DIE_AT", "3"}}, dir, 90);
  ASSERT_FALSE(run.timed_out) << "rank 0 hung after its peer died:\n" << run.ranks[0].text;
  const RankResult& survivor = run.ranks[0];
  const RankResult& dead = run.ranks[1];
  EXPECT_TRUE(WIFSIGNALED(dead.status) && WTERMSIG(dead.status) == SIGKILL) << dead.text;
  EXPECT_EQ(dead.steps.size(), 3u);
  ASSERT_TRUE(WIFEXITED(survivor.status)) << survivor.text;
  EXPECT_EQ(WEXITSTATUS(survivor.status), 3) << survivor.text;
  EXPECT_EQ(survivor.steps.size(), 3u) << survivor.text;
  EXPECT_NE(survivor.error.find("distributed: rank 0 of 2 (gloo)"), std::string::npos) << survivor.error;
  EXPECT_NE(survivor.error.find("failed"), std::string::npos) << survivor.error;
  EXPECT_NE(survivor.error.find("step 3"), std::string::npos) << survivor.error;
  EXPECT_NE(survivor.error.find("a peer rank died"), std::string::npos) << survivor.error;
  // No orphans: both were reaped by this process, nothing answers their pids.
  for (const RankResult& r : run.ranks) {
    errno = 0;
    EXPECT_EQ(::kill(r.pid, 0), -1);
    EXPECT_EQ(errno, ESRCH);
  }
  std::printf("dead peer noticed after %.2f s (whole run): %s\n", run.elapsed_s, survivor.error.c_str());
}

TEST(DataParallel, ARankThatStopsAnsweringFailsTheOtherAfterTheTimeout) {
  TempDir dir;
  // The last rank stops itself (SIGSTOP) before step 3: its sockets stay
  // open, so only the 4 s collective timeout can end rank 0's wait. The
  // test kills the stopped rank once rank 0 has exited.
  RankRun run = RunRanks(2, {{"DT_STOP_AT", "3"}, {"FRONTIER_DIST_TIMEOUT_S", "4"}}, dir, 90, true);
  ASSERT_FALSE(run.timed_out) << "rank 0 hung after its peer stopped:\n" << run.ranks[0].text;
  const RankResult& survivor = run.ranks[0];
  ASSERT_TRUE(WIFEXITED(survivor.status)) << survivor.text;
  EXPECT_EQ(WEXITSTATUS(survivor.status), 3) << survivor.text;
  EXPECT_EQ(survivor.steps.size(), 3u) << survivor.text;
  EXPECT_NE(survivor.error.find("distributed: rank 0 of 2 (gloo): step 3"), std::string::npos) << survivor.error;
  EXPECT_NE(survivor.error.find("within 4 s"), std::string::npos) << survivor.error;
  std::printf("silent peer noticed after %.2f s (whole run): %s\n", run.elapsed_s, survivor.error.c_str());
}

TEST(DataParallel, ARankThatNeverJoinsFailsTheRendezvousWithinTheTimeout) {
  TempDir dir;
  // One rank of a world of two: the other never comes.
  RankRun run = RunRanks(1, {{"FRONTIER_WORLD_SIZE", "2"}, {"FRONTIER_DIST_TIMEOUT_S", "3"}}, dir, 60);
  ASSERT_FALSE(run.timed_out) << run.ranks[0].text;
  EXPECT_TRUE(WIFEXITED(run.ranks[0].status) && WEXITSTATUS(run.ranks[0].status) == 3) << run.ranks[0].text;
  EXPECT_NE(run.ranks[0].error.find("distributed: rank 0 of 2"), std::string::npos) << run.ranks[0].error;
}

// ----------------------------------------------------------------------------
// In-process: one rank, and the torch-free parts.

TEST(DataParallel, OneRankKeepsTheGradientAndCountsEveryParameterByte) {
  TempDir dir;
  fd::Rendezvous r;
  r.store = "file://" + dir.path() + "/store";
  r.hostname = "127.0.0.1";
  r.timeout_s = 30;
  auto group = fd::ProcessGroup::Connect(r);
  TrainSetup setup;
  auto net = MakeNet(setup, 7);
  auto twin = MakeNet(setup, 7);
  fd::DataParallelOptions options;
  options.bucket_cap_mb = 1e-9;  // one bucket per parameter
  fd::DataParallel dp(*group, net->parameters(), net->buffers(), options);
  EXPECT_EQ(dp.bucket_count(), static_cast<int>(net->parameters().size()));
  EXPECT_EQ(dp.gradient_bytes(), ParamBytes(*net));
  // Reverse registration order: the last parameter's bucket starts first.
  EXPECT_EQ(dp.bucket_layout().front().front(), net->parameters().size() - 1);
  Data data = MakeData(setup);
  auto x = data.x.narrow(0, 0, 32);
  auto y = data.y.narrow(0, 0, 32);
  dp.BeforeBackward(1.0);
  torch::nn::functional::cross_entropy(net->forward(x), y).backward();
  fd::CommFigures figures = dp.AfterBackward();
  torch::nn::functional::cross_entropy(twin->forward(x), y).backward();
  EXPECT_TRUE(torch::equal(FlatGrad(*net), FlatGrad(*twin)));
  EXPECT_EQ(figures.bytes, ParamBytes(*net));
  EXPECT_EQ(figures.buckets, dp.bucket_count());
  EXPECT_GT(figures.allreduce_s, 0);
  EXPECT_THROW(dp.AfterBackward(), std::logic_error);
}

TEST(Shard, SplitGlobalCoversTheBatchOnce) {
  for (int world : {1, 2, 3, 5}) {
    for (long long batch : {5LL, 32LL, 33LL, 100LL}) {
      long long next = 0;
      double weights = 0;
      for (int rank = 0; rank < world; ++rank) {
        fd::Shard s = fd::ShardOf(batch, rank, world, fd::BatchPolicy::kSplitGlobal);
        EXPECT_EQ(s.begin, next);
        EXPECT_GE(s.count, batch / world);
        EXPECT_LE(s.count, batch / world + 1);
        EXPECT_EQ(s.global, batch);
        next += s.count;
        weights += s.weight;
      }
      EXPECT_EQ(next, batch);
      EXPECT_NEAR(weights, 1.0, 1e-12);
    }
  }
  EXPECT_THROW(fd::ShardOf(1, 0, 2, fd::BatchPolicy::kSplitGlobal), std::invalid_argument);
  EXPECT_THROW(fd::ShardOf(8, 2, 2, fd::BatchPolicy::kSplitGlobal), std::invalid_argument);
}

TEST(Shard, FixedPerRankGivesEveryRankTheWholeBatch) {
  fd::Shard s = fd::ShardOf(16, 1, 4, fd::BatchPolicy::kFixedPerRank);
  EXPECT_EQ(s.begin, 16);
  EXPECT_EQ(s.count, 16);
  EXPECT_EQ(s.global, 64);
  EXPECT_DOUBLE_EQ(s.weight, 0.25);
  EXPECT_EQ(frontier::ParseName<frontier::BatchPolicy>("fixed_per_rank"), fd::BatchPolicy::kFixedPerRank);
  EXPECT_EQ(frontier::ParseName<frontier::BatchPolicy>("split_global"), fd::BatchPolicy::kSplitGlobal);
  EXPECT_FALSE(frontier::ParseName<frontier::BatchPolicy>("split"));
  EXPECT_EQ(frontier::NameOf(fd::BatchPolicy::kFixedPerRank), "fixed_per_rank");
}

class EnvGuard {
 public:
  EnvGuard() {
    for (const char* name : kNames) {
      if (const char* v = std::getenv(name)) saved_[name] = v;
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (const char* name : kNames) ::unsetenv(name);
    for (auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  static constexpr const char* kNames[] = {"FRONTIER_RANK",   "FRONTIER_WORLD_SIZE",   "FRONTIER_RENDEZVOUS",
                                           "RANK",            "WORLD_SIZE",            "MASTER_ADDR",
                                           "MASTER_PORT",     "SLURM_PROCID",          "SLURM_NTASKS",
                                           "FRONTIER_DIST_TIMEOUT_S", "FRONTIER_GLOO_IFNAME", "GLOO_SOCKET_IFNAME",
                                           "FRONTIER_GLOO_HOSTNAME"};
  std::map<std::string, std::string> saved_;
};

TEST(Rendezvous, FromTheEnvironment) {
  EnvGuard guard;
  std::string problem;
  EXPECT_FALSE(fd::RendezvousFromEnvironment(&problem));
  EXPECT_EQ(problem, "");

  ::setenv("SLURM_PROCID", "3", 1);
  ::setenv("SLURM_NTASKS", "4", 1);
  EXPECT_FALSE(fd::RendezvousFromEnvironment(&problem));
  EXPECT_NE(problem.find("MASTER_ADDR"), std::string::npos) << problem;
  ::setenv("MASTER_ADDR", "node1", 1);
  ::setenv("MASTER_PORT", "29511", 1);
  ::setenv("GLOO_SOCKET_IFNAME", "veth1", 1);
  auto r = fd::RendezvousFromEnvironment(&problem);
  ASSERT_TRUE(r) << problem;
  EXPECT_EQ(r->rank, 3);
  EXPECT_EQ(r->world_size, 4);
  EXPECT_EQ(r->store, "tcp://node1:29511");
  EXPECT_EQ(r->interface, "veth1");

  ::setenv("FRONTIER_RANK", "1", 1);
  ::setenv("FRONTIER_WORLD_SIZE", "2", 1);
  ::setenv("FRONTIER_RENDEZVOUS", "file:///tmp/x", 1);
  ::setenv("FRONTIER_DIST_TIMEOUT_S", "12.5", 1);
  r = fd::RendezvousFromEnvironment(&problem);
  ASSERT_TRUE(r) << problem;
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->store, "file:///tmp/x");
  EXPECT_EQ(r->timeout_s, 12.5);

  ::setenv("FRONTIER_RANK", "2", 1);
  EXPECT_FALSE(fd::RendezvousFromEnvironment(&problem));
  EXPECT_NE(problem.find("rank 2 is outside [0, 2)"), std::string::npos) << problem;
  ::setenv("FRONTIER_RANK", "one", 1);
  EXPECT_FALSE(fd::RendezvousFromEnvironment(&problem));
  EXPECT_NE(problem.find("FRONTIER_RANK"), std::string::npos) << problem;
}

TEST(Rendezvous, ChecksTheStoreAddress) {
  fd::Rendezvous r;
  r.store = "tcp://host:0";
  EXPECT_NE(fd::CheckRendezvous(r).find("port in 1..65535"), std::string::npos);
  r.store = "tcp://host:29500";
  EXPECT_EQ(fd::CheckRendezvous(r), "");
  r.store = "file://relative";
  EXPECT_NE(fd::CheckRendezvous(r).find("absolute path"), std::string::npos);
  r.store = "etcd://x";
  EXPECT_NE(fd::CheckRendezvous(r).find("neither"), std::string::npos);
  EXPECT_THROW(fd::ProcessGroup::Connect(r), fd::DistributedError);
  EXPECT_GT(frontier::FreeTcpPort(), 0);
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("FRONTIER_DIST_TEST_CHILD") != nullptr) return ChildMain();
  torch::set_num_threads(1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
