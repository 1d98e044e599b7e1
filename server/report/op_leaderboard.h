// The leaderboard of a kernel-lab run (docs/kernel-lab.md): its candidates
// ranked by speed-up over the op's reference, with KernelBench's figures:
// fast_p, the share of all candidates that are correct and faster than p
// times the reference (by the median of the per-round speed-ups; `strict`
// by the lower end of its 95% interval), and the shares of each failure.
// Plain data in, text out: the CLI reads the stored rows into it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace frontier {

// One candidate as the leaderboard needs it.
struct OpCandidateFacts {
  std::string candidate;
  std::string source_kind;  // folder | llm
  int round = 0;
  std::string source_hash;
  std::string outcome;      // timed | compile_error | incorrect | crashed | timed_out | refused
  std::string reason;       // the verdict's reason (every outcome but timed)
  std::string variant;      // the name it registered
  double speedup = 0, speedup_low = 0, speedup_high = 0;  // timed only
  std::optional<double> ms, reference_ms;                 // forward+backward medians
  std::optional<double> peak_mb, reference_peak_mb;
};

struct OpLeaderboard {
  std::string run, op;
  std::vector<OpCandidateFacts> ranked;  // timed by speed-up (best first), then the others in their order
  int candidates = 0;
  double fast_1 = 0, fast_1_5 = 0, fast_1_strict = 0, fast_1_5_strict = 0;
  double compile_failures = 0, gate_failures = 0, crashes = 0, timeouts = 0, refusals = 0;  // shares
  std::optional<OpCandidateFacts> best;  // the fastest timed candidate

  nlohmann::json ToJson() const;
};

OpLeaderboard BuildOpLeaderboard(const std::string& run, const std::string& op,
                                 std::vector<OpCandidateFacts> candidates);

std::string OpLeaderboardTable(const OpLeaderboard& board);
std::string OpLeaderboardCsv(const OpLeaderboard& board);
std::string OpLeaderboardHtml(const OpLeaderboard& board);  // a self-contained page

}  // namespace frontier
