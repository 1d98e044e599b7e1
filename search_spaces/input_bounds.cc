#include "search_spaces/input_bounds.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace frontier {
namespace {

InputFault FaultAt(std::string_view text, size_t offset, std::string problem) {
  offset = std::min(offset, text.size());
  const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + offset, '\n'));
  return InputFault{line, offset, std::move(problem)};
}

std::string Hex(unsigned char byte) {
  char out[8];
  std::snprintf(out, sizeof out, "0x%02x", byte);
  return out;
}

// The length of the valid UTF-8 sequence at text[i], or 0 (RFC 3629).
size_t Utf8Length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length;
  unsigned char low = 0x80, high = 0xbf;  // the range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;   // overlong
    if (lead == 0xed) high = 0x9f;  // surrogates
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;   // overlong
    if (lead == 0xf4) high = 0x8f;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return length;
}

}  // namespace

std::optional<InputFault> FindEncodingFault(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\0') return FaultAt(text, i, "NUL byte; the text must not contain NUL");
    const size_t length = Utf8Length(text, i);
    if (length == 0) {
      return FaultAt(text, i,
                     "invalid UTF-8 (byte " + Hex(static_cast<unsigned char>(text[i])) + "); the text must be UTF-8");
    }
    i += length;
  }
  return std::nullopt;
}

std::optional<InputFault> FindNestingFault(std::string_view text, int max_depth, bool json_strings) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"' && json_strings) {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return FaultAt(text, i, "nested deeper than " + std::to_string(max_depth) + " levels");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::nullopt;
}

std::string Abbreviated(std::string_view text, size_t max_bytes) {
  size_t cut = text.size();
  if (cut > max_bytes) {
    cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;  // not inside a character
  }
  std::string out;
  out.reserve(cut);
  for (size_t i = 0; i < cut;) {  // one line of UTF-8: no control characters, no invalid bytes
    const char c = text[i];
    const size_t length = Utf8Length(text.substr(0, cut), i);
    if (c == '\n') {
      out += "\\n";
    } else if (length == 0 || (static_cast<unsigned char>(c) < 0x20 && c != '\t')) {
      out += '?';
    } else {
      out.append(text.data() + i, length);
      i += length;
      continue;
    }
    ++i;
  }
  if (cut < text.size()) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

InputError::InputError(InputFault fault) : std::runtime_error(Describe(fault)), fault_(std::move(fault)) {}

std::string Describe(const InputFault& fault) {
  return "line " + std::to_string(fault.line) + " (byte " + std::to_string(fault.offset) + "): " + fault.problem;
}

nlohmann::json ParseBoundedJson(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    throw InputError(FaultAt(text, max_bytes, std::to_string(text.size()) + " bytes; the limit is " +
                                                  std::to_string(max_bytes)));
  }
  if (std::optional<InputFault> fault = FindEncodingFault(text)) throw InputError(*fault);
  if (std::optional<InputFault> fault = FindNestingFault(text, kMaxNesting, /*json_strings=*/true)) {
    throw InputError(*fault);
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts from 1, at the character that failed.
    throw InputError(FaultAt(text, e.byte > 0 ? e.byte - 1 : 0, std::string("not valid JSON: ") + e.what()));
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    throw InputError(FaultAt(text, 0, std::string("not valid JSON: ") + e.what()));
  }
}

}  // namespace frontier
