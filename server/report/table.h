// The report as rows of text cells and the notes that explain them, shared by
// the terminal table (RenderTable) and the HTML page (internal to
// frontier_report).
#pragma once

#include <string>
#include <vector>

#include "server/report/report.h"

namespace frontier {

struct TextTable {
  std::vector<std::string> header;
  std::vector<bool> right_aligned;
  std::vector<std::vector<std::string>> rows;  // one per config, in the report's order
};

// One row per config, its number first: the columns that matter (config
// label, seeds, quality, throughput, speed-up, quality delta, parity, front),
// or with `wide` every column.
TextTable BuildTextTable(const Report& report, bool wide);

// The table as aligned text: a header, a rule and the rows, two spaces
// between columns. With `max_width` > 0 the `flexible` column is cut (with an
// ellipsis) until the lines fit, but never below 12 columns.
std::string RenderTextTable(const TextTable& table, size_t max_width, size_t flexible = 0);
// The columns' widths RenderTextTable lays the table out with, and the table laid out with them.
std::vector<size_t> TextTableWidths(const TextTable& table, size_t max_width, size_t flexible = 0);
std::string RenderTextTable(const TextTable& table, const std::vector<size_t>& widths);

struct OnboardView;
// The onboard view (views.h) as rows: one per (config, format) point, its
// number the config's row: latency, quality, the onboard front (o), the
// training front (*), a rank change, and on the int8 row the parity after
// quantization; with `wide` also the p99 latency and the size.
TextTable BuildOnboardTable(const Report& report, const OnboardView& view, bool wide);

// "val_accuracy (maximize), ..." or "none".
std::string DescribeObjectives(const std::vector<Objective>& objectives);
// "peak_memory_mb <= 4096, ..." or "none".
std::string DescribeConstraints(const std::vector<Constraint>& constraints);

// Lines explaining the table: the rules behind each figure, the hypervolume and
// why each infeasible config is.
std::vector<std::string> ReportNotes(const Report& report);

}  // namespace frontier
