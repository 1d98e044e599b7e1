// Bounds on text that comes from outside the process: search-space files,
// trial specs, results and progress events that workers report. Each reader
// checks them before a parser sees the text, so that no input can exhaust
// the stack (nesting), the memory or the time of the process reading it.
// docs/hardening.md lists every reader and its bounds.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace frontier {

// Lists, mappings and objects inside one another; every document of the
// project needs fewer than 10.
inline constexpr int kMaxNesting = 64;

// The most of one input (a name, a key, a value) a message quotes; error
// messages stay one short line, well inside gRPC's 8 KiB of status metadata.
inline constexpr size_t kMaxQuotedBytes = 200;

// Where a text breaks a bound and how: 1-based line, 0-based byte offset.
struct InputFault {
  int line = 1;
  size_t offset = 0;
  std::string problem;
};

// The first NUL byte or invalid UTF-8 sequence (a stray continuation byte,
// a truncated, overlong or surrogate sequence, a code point above U+10FFFF).
std::optional<InputFault> FindEncodingFault(std::string_view text);

// The first '[' or '{' that opens more than `max_depth` at once. With
// `json_strings` the brackets inside JSON strings do not count; without, every
// bracket counts (a conservative bound for YAML, whose plain scalars may hold
// brackets too).
std::optional<InputFault> FindNestingFault(std::string_view text, int max_depth, bool json_strings);

// Thrown by ParseBoundedJson; what() reads "line L (byte B): <problem>".
class InputError : public std::runtime_error {
 public:
  explicit InputError(InputFault fault);
  const InputFault& fault() const { return fault_; }

 private:
  InputFault fault_;
};

// `text` on one line of valid UTF-8 (a newline as \n, other control
// characters and each byte of an invalid UTF-8 sequence as '?'), cut to at
// most `max_bytes` at a character boundary and followed by "... (N bytes)"
// when it was longer: for messages that quote an input, which JSON and
// protobuf strings must carry (both refuse bytes that are not UTF-8).
std::string Abbreviated(std::string_view text, size_t max_bytes);

// "line L (byte B): <problem>"
std::string Describe(const InputFault& fault);

// Parses JSON text that is at most `max_bytes`, UTF-8 without NUL, nested at
// most kMaxNesting deep, with every number in range. Throws InputError, for a
// syntax error too.
nlohmann::json ParseBoundedJson(std::string_view text, size_t max_bytes);

}  // namespace frontier
