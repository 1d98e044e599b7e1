// CSV output (RFC 4180), shared by the report's CSV renderer and the CLI's
// `--output csv` listings so that both quote the same way.
#pragma once

#include <string>

namespace frontier {

// One CSV field: returned unchanged unless it holds a comma, a double quote,
// a CR or an LF; then enclosed in double quotes, each inner quote doubled
// (RFC 4180 section 2, rules 6 and 7).
std::string CsvField(const std::string& field);

}  // namespace frontier
