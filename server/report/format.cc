#include "server/report/format.h"

#include "server/report/report.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace frontier {

std::string Printf(const char* format, ...) {
  char buffer[256];
  va_list args;
  va_start(args, format);
  const int size = std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  if (size < static_cast<int>(sizeof(buffer))) return std::string(buffer, size > 0 ? size : 0);
  std::string out(size + 1, '\0');
  va_start(args, format);
  std::vsnprintf(out.data(), out.size(), format, args);
  va_end(args);
  out.resize(size);
  return out;
}

std::string FormatNumber(const char* format, double value) {
  if (!(std::fabs(value) >= kScientificFrom)) return Printf(format, value);
  const std::string fixed = format;
  const size_t percent = fixed.find('%');
  const size_t conversion = fixed.find('f', percent);
  const std::string spec = fixed.substr(percent + 1, conversion - percent - 1);  // flags, width, precision
  const size_t dot = spec.find('.');
  const int precision = dot == std::string::npos ? 6 : std::atoi(spec.c_str() + dot + 1);
  const std::string scientific = fixed.substr(0, percent + 1) + spec.substr(0, dot) + "." +
                                 std::to_string(precision + 1) + "g" + fixed.substr(conversion + 1);
  return Printf(scientific.c_str(), value);
}

std::string EscapeHtml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string FirstLineOf(const std::string& text, size_t max_bytes) {
  const std::string line = text.substr(0, text.find_first_of("\r\n"));
  std::string out;
  for (const char c : line.substr(0, max_bytes)) {
    const auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? ' ' : c;
  }
  if (line.size() <= max_bytes) return out;
  while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();
  if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) out.pop_back();  // a lead byte
  return out + "...";
}

}  // namespace frontier
