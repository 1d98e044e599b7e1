// The rank processes of one data-parallel trial (docs/distributed.md) as one
// TrialProcess, so the agent supervises them like any trial: rank 0's
// standard output is the trial's (the other ranks print nothing there), and
// a rank that ends badly while rank 0 still runs ends the trial: every rank
// is stopped, and the result names the rank and how it ended.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "worker/agent/trial_process.h"

namespace frontier {

class RankGroup final : public TrialProcess {
 public:
  // ranks[r] is rank r's process; at least one.
  explicit RankGroup(std::vector<std::unique_ptr<TrialProcess>> ranks);
  ~RankGroup() override;

  // Rank 0's next line. When another rank has ended badly first, the next
  // line is instead a failed result, {"event": "result", "status": "failed",
  // "error_kind": "rank", "error": "rank 1 of 2 ended with signal SIGKILL
  // (Killed) while rank 0 was running; every rank was stopped; rank 1's
  // stderr: ..."}, and the read after it is kEnd.
  ReadStatus ReadLine(std::chrono::milliseconds timeout, std::string* line) override;
  // Rank 0's exit, once rank 0 and (within a short grace) every other rank
  // ended; the ranks still running after it are killed.
  std::optional<ProcessExit> Wait(std::chrono::milliseconds timeout) override;
  ProcessExit Terminate(std::chrono::milliseconds grace) override;
  // Rank 0's tail, then the failed rank's.
  std::string StderrTail() const override;
  std::string MemoryLimitKind() const override;
  bool OomKilled() const override;

 private:
  // Reaps the other ranks that ended; the first that ended badly ends the trial.
  void CheckPeers();

  std::vector<std::unique_ptr<TrialProcess>> ranks_;
  std::vector<std::optional<ProcessExit>> exits_;  // of ranks 1.. as they end
  std::string failure_;                             // the failed result line, until read
  std::string failed_rank_tail_;
  bool failed_ = false;
  bool rank0_output_closed_ = false;
};

}  // namespace frontier
