// Text helpers the report's renderers share (internal to frontier_report).
#pragma once

#include <string>

namespace frontier {

// printf into a std::string, any length.
std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// `text` with &, <, >, " and ' escaped for HTML text and attribute values.
std::string EscapeHtml(const std::string& text);

}  // namespace frontier
