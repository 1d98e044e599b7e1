#include "server/report/op_leaderboard.h"

#include <algorithm>
#include <sstream>

#include "server/report/csv.h"
#include "server/report/format.h"

namespace frontier {
namespace {

using json = nlohmann::json;

std::string Speedup(const OpCandidateFacts& c) {
  if (c.outcome != "timed") return "-";
  return Printf("%.2fx [%.2f, %.2f]", c.speedup, c.speedup_low, c.speedup_high);
}

std::string Number(const std::optional<double>& value, const char* format) {
  return value ? Printf(format, *value) : "-";
}

std::string Source(const OpCandidateFacts& c) {
  return c.source_kind == "llm" ? "llm r" + std::to_string(c.round) : c.source_kind;
}

std::string FirstLine(const std::string& text, size_t max) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() <= max ? line : line.substr(0, max - 3) + "...";
}

std::string Share(double share) { return Printf("%.2f", share); }

}  // namespace

OpLeaderboard BuildOpLeaderboard(const std::string& run, const std::string& op,
                                 std::vector<OpCandidateFacts> candidates) {
  OpLeaderboard board;
  board.run = run;
  board.op = op;
  board.candidates = static_cast<int>(candidates.size());
  std::stable_sort(candidates.begin(), candidates.end(), [](const OpCandidateFacts& a, const OpCandidateFacts& b) {
    const bool ta = a.outcome == "timed", tb = b.outcome == "timed";
    if (ta != tb) return ta;
    return ta && a.speedup > b.speedup;
  });
  const double n = std::max(1, board.candidates);
  for (const OpCandidateFacts& c : candidates) {
    if (c.outcome == "timed") {
      board.fast_1 += c.speedup > 1 ? 1 / n : 0;
      board.fast_1_5 += c.speedup > 1.5 ? 1 / n : 0;
      board.fast_1_strict += c.speedup_low > 1 ? 1 / n : 0;
      board.fast_1_5_strict += c.speedup_low > 1.5 ? 1 / n : 0;
      if (!board.best) board.best = c;
    }
    board.compile_failures += c.outcome == "compile_error" ? 1 / n : 0;
    board.gate_failures += c.outcome == "incorrect" ? 1 / n : 0;
    board.crashes += c.outcome == "crashed" ? 1 / n : 0;
    board.timeouts += c.outcome == "timed_out" ? 1 / n : 0;
    board.refusals += c.outcome == "refused" ? 1 / n : 0;
  }
  board.ranked = std::move(candidates);
  return board;
}

json OpLeaderboard::ToJson() const {
  json list = json::array();
  for (const OpCandidateFacts& c : ranked) {
    json j = {{"candidate", c.candidate}, {"source", c.source_kind}, {"round", c.round},
              {"source_hash", c.source_hash}, {"outcome", c.outcome}, {"variant", c.variant}};
    if (!c.reason.empty()) j["reason"] = c.reason;
    if (c.outcome == "timed") j["speedup"] = {{"median", c.speedup}, {"low", c.speedup_low}, {"high", c.speedup_high}};
    if (c.ms) j["forward_backward_ms"] = *c.ms;
    if (c.reference_ms) j["reference_forward_backward_ms"] = *c.reference_ms;
    if (c.peak_mb) j["peak_mb"] = *c.peak_mb;
    if (c.reference_peak_mb) j["reference_peak_mb"] = *c.reference_peak_mb;
    list.push_back(j);
  }
  json j = {{"run", run},
            {"op", op},
            {"candidates", candidates},
            {"fast_1", fast_1},
            {"fast_1_5", fast_1_5},
            {"fast_1_strict", fast_1_strict},
            {"fast_1_5_strict", fast_1_5_strict},
            {"compile_failure_share", compile_failures},
            {"gate_failure_share", gate_failures},
            {"crash_share", crashes},
            {"timeout_share", timeouts},
            {"refusal_share", refusals},
            {"ranked", list}};
  if (best) j["best"] = {{"candidate", best->candidate}, {"variant", best->variant},
                         {"speedup", {{"median", best->speedup}, {"low", best->speedup_low}, {"high", best->speedup_high}}}};
  return j;
}

std::string OpLeaderboardTable(const OpLeaderboard& board) {
  std::ostringstream os;
  os << "kernel lab " << board.run << ": op " << board.op << ", " << board.candidates << " candidates\n";
  os << Printf("%-4s %-28s %-8s %-14s %-24s %10s %10s %9s %9s  %s\n", "rank", "candidate", "source", "outcome",
               "speed-up [95%]", "fwd+bwd ms", "ref ms", "peak MB", "ref MB", "reason");
  int rank = 0;
  for (const OpCandidateFacts& c : board.ranked) {
    const std::string place = c.outcome == "timed" ? std::to_string(++rank) : "-";
    os << Printf("%-4s %-28s %-8s %-14s %-24s %10s %10s %9s %9s  %s\n", place.c_str(),
                 FirstLine(c.candidate, 28).c_str(), Source(c).c_str(), c.outcome.c_str(), Speedup(c).c_str(),
                 Number(c.ms, "%.3f").c_str(), Number(c.reference_ms, "%.3f").c_str(),
                 Number(c.peak_mb, "%.2f").c_str(), Number(c.reference_peak_mb, "%.2f").c_str(),
                 FirstLine(c.reason, 100).c_str());
  }
  os << "fast_1 " << Share(board.fast_1) << " (strict " << Share(board.fast_1_strict) << "), fast_1.5 "
     << Share(board.fast_1_5) << " (strict " << Share(board.fast_1_5_strict) << "); compile failures "
     << Share(board.compile_failures) << ", gate failures " << Share(board.gate_failures) << ", crashes "
     << Share(board.crashes) << ", time-outs " << Share(board.timeouts) << ", refused " << Share(board.refusals)
     << "\n";
  if (board.best) {
    os << "best: " << board.best->candidate << " (" << board.best->variant << ") " << Speedup(*board.best)
       << " over the reference\n";
  } else {
    os << "best: none (no candidate was correct)\n";
  }
  return os.str();
}

std::string OpLeaderboardCsv(const OpLeaderboard& board) {
  std::ostringstream os;
  os << "rank,candidate,source,round,outcome,variant,speedup,speedup_low,speedup_high,forward_backward_ms,"
        "reference_forward_backward_ms,peak_mb,reference_peak_mb,source_hash,reason\n";
  int rank = 0;
  const auto opt = [](const std::optional<double>& v) { return v ? Printf("%.6g", *v) : std::string(); };
  for (const OpCandidateFacts& c : board.ranked) {
    const bool timed = c.outcome == "timed";
    os << (timed ? std::to_string(++rank) : "") << "," << CsvField(c.candidate) << "," << c.source_kind << ","
       << c.round << "," << c.outcome << "," << CsvField(c.variant) << ","
       << (timed ? Printf("%.6g,%.6g,%.6g", c.speedup, c.speedup_low, c.speedup_high) : std::string(",,")) << ","
       << opt(c.ms) << "," << opt(c.reference_ms) << "," << opt(c.peak_mb) << "," << opt(c.reference_peak_mb) << ","
       << c.source_hash << "," << CsvField(c.reason) << "\n";
  }
  return os.str();
}

std::string OpLeaderboardHtml(const OpLeaderboard& board) {
  std::ostringstream os;
  os << "<!doctype html><html><head><meta charset=\"utf-8\"><title>kernel lab " << EscapeHtml(board.run)
     << "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}td.n{text-align:right}"
        ".timed{background:#eef8ee}</style></head><body>";
  os << "<h1>kernel lab " << EscapeHtml(board.run) << "</h1><p>op <b>" << EscapeHtml(board.op) << "</b>, "
     << board.candidates << " candidates. fast_1 " << Share(board.fast_1) << " (strict "
     << Share(board.fast_1_strict) << "), fast_1.5 " << Share(board.fast_1_5) << " (strict "
     << Share(board.fast_1_5_strict) << "); compile failures " << Share(board.compile_failures)
     << ", gate failures " << Share(board.gate_failures) << ", crashes " << Share(board.crashes)
     << ", time-outs " << Share(board.timeouts) << ", refused " << Share(board.refusals) << ".</p>";
  os << "<table><tr><th>rank</th><th>candidate</th><th>source</th><th>outcome</th><th>speed-up [95%]</th>"
        "<th>fwd+bwd ms</th><th>ref ms</th><th>peak MB</th><th>ref MB</th><th>reason</th></tr>";
  int rank = 0;
  for (const OpCandidateFacts& c : board.ranked) {
    const bool timed = c.outcome == "timed";
    os << "<tr class=\"" << (timed ? "timed" : "other") << "\"><td>" << (timed ? std::to_string(++rank) : "-")
       << "</td><td>" << EscapeHtml(c.candidate) << "</td><td>" << EscapeHtml(Source(c)) << "</td><td>"
       << EscapeHtml(c.outcome) << "</td><td class=\"n\">" << EscapeHtml(Speedup(c)) << "</td><td class=\"n\">"
       << Number(c.ms, "%.3f") << "</td><td class=\"n\">" << Number(c.reference_ms, "%.3f")
       << "</td><td class=\"n\">" << Number(c.peak_mb, "%.2f") << "</td><td class=\"n\">"
       << Number(c.reference_peak_mb, "%.2f") << "</td><td title=\"" << EscapeHtml(c.reason) << "\">"
       << EscapeHtml(FirstLine(c.reason, 120)) << "</td></tr>";
  }
  os << "</table></body></html>\n";
  return os.str();
}

}  // namespace frontier
