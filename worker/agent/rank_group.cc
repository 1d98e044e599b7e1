#include "worker/agent/rank_group.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace frontier {

using std::chrono::milliseconds;

namespace {

// How often the other ranks are looked at while rank 0's output is awaited.
constexpr milliseconds kPeerPoll{50};
// How long the other ranks may take to exit once rank 0 has.
constexpr milliseconds kPeerExitGrace{5000};

bool EndedBadly(const ProcessExit& exit) { return exit.signaled || exit.exit_code != 0; }

}  // namespace

RankGroup::RankGroup(std::vector<std::unique_ptr<TrialProcess>> ranks)
    : ranks_(std::move(ranks)), exits_(ranks_.size()) {}

RankGroup::~RankGroup() {
  // Every TrialProcess kills what is left of its own process group.
}

void RankGroup::CheckPeers() {
  for (size_t r = 1; r < ranks_.size(); ++r) {
    if (exits_[r]) continue;
    std::string ignored;  // the other ranks' standard output is not the trial's
    while (ranks_[r]->ReadLine(milliseconds(0), &ignored) == ReadStatus::kLine) {
    }
    exits_[r] = ranks_[r]->Wait(milliseconds(0));
    if (!exits_[r] || !EndedBadly(*exits_[r]) || failed_ || rank0_output_closed_) continue;
    failed_ = true;
    failed_rank_tail_ = ranks_[r]->StderrTail();
    const std::string who = "rank " + std::to_string(r) + " of " + std::to_string(ranks_.size());
    std::string error = who + " ended with " + exits_[r]->Describe() +
                        " while rank 0 was running; every rank was stopped";
    if (!failed_rank_tail_.empty()) error += "; rank " + std::to_string(r) + "'s stderr: " + failed_rank_tail_;
    failure_ = nlohmann::json{{"event", "result"},
                              {"schema", 1},
                              {"status", "failed"},
                              {"error_kind", "rank"},
                              {"failed_rank", r},
                              {"error", error}}
                   .dump();
    for (size_t other = 0; other < ranks_.size(); ++other) {
      if (other != r) ranks_[other]->Terminate(milliseconds(0));
    }
  }
}

TrialProcess::ReadStatus RankGroup::ReadLine(milliseconds timeout, std::string* line) {
  const std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    CheckPeers();
    if (failed_) {
      if (failure_.empty()) return ReadStatus::kEnd;
      *line = std::move(failure_);
      failure_.clear();
      return ReadStatus::kLine;
    }
    const milliseconds left =
        std::max(milliseconds(0),
                 std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()));
    const ReadStatus read = ranks_[0]->ReadLine(std::min(left, kPeerPoll), line);
    if (read == ReadStatus::kEnd) rank0_output_closed_ = true;
    if (read != ReadStatus::kTimeout || left.count() == 0) return read;
  }
}

std::optional<ProcessExit> RankGroup::Wait(milliseconds timeout) {
  CheckPeers();
  std::optional<ProcessExit> exit = ranks_[0]->Wait(timeout);
  if (!exit) return std::nullopt;
  const std::chrono::steady_clock::time_point grace_end = std::chrono::steady_clock::now() + kPeerExitGrace;
  for (size_t r = 1; r < ranks_.size(); ++r) {
    if (exits_[r]) continue;
    const milliseconds left =
        std::max(milliseconds(0),
                 std::chrono::duration_cast<milliseconds>(grace_end - std::chrono::steady_clock::now()));
    exits_[r] = ranks_[r]->Wait(left);
    if (!exits_[r]) exits_[r] = ranks_[r]->Terminate(milliseconds(0));
  }
  return exit;
}

ProcessExit RankGroup::Terminate(milliseconds grace) {
  const ProcessExit exit = ranks_[0]->Terminate(grace);
  for (size_t r = 1; r < ranks_.size(); ++r) {
    if (!exits_[r]) exits_[r] = ranks_[r]->Terminate(milliseconds(0));
  }
  return exit;
}

std::string RankGroup::StderrTail() const {
  std::string tail = ranks_[0]->StderrTail();
  if (failed_ && !failed_rank_tail_.empty()) tail += (tail.empty() ? "" : " | ") + failed_rank_tail_;
  return tail;
}

std::string RankGroup::MemoryLimitKind() const { return ranks_[0]->MemoryLimitKind(); }

bool RankGroup::OomKilled() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const auto& rank) { return rank->OomKilled(); });
}

}  // namespace frontier
