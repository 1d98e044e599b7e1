// Text helpers the report's renderers share (internal to frontier_report).
#pragma once

#include <string>

namespace frontier {

// printf into a std::string, any length.
std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// From this magnitude on, FormatNumber prints scientific notation: %f would
// print 16 or more integer digits, past what a double holds (1e200 as 201).
inline constexpr double kScientificFrom = 1e15;

// `value` printed with `format`, a printf format of one %f conversion (flags,
// a precision and text around it: "%.2f", "%+.4f", "%.2fx"); at a magnitude
// of kScientificFrom or more the %f becomes %g with one more significant digit
// than the precision ("%.2f": 1.23e+200). Below it the text is Printf's.
std::string FormatNumber(const char* format, double value);

// `text` with &, <, >, " and ' escaped for HTML text and attribute values.
std::string EscapeHtml(const std::string& text);

}  // namespace frontier
