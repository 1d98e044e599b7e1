// What every benchmark tool's main shares (tests/bench/): an error that
// reaches the main (a refused input such as a space out of bounds, a flag's
// bad value, a store that cannot be opened) is printed with the tool's name
// and its message and ends the tool with exit 1, never as an uncaught
// exception (std::terminate, exit 134). tests/bench/check_readme_benchmarks.sh
// runs each documented benchmark on a tiny size.
#ifndef FRONTIER_TESTS_BENCH_BENCH_MAIN_H_
#define FRONTIER_TESTS_BENCH_BENCH_MAIN_H_

#include <charconv>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>

namespace frontier::bench {

// main's body, run so that an exception is an error message and exit 1.
template <class Body>
int GuardedMain(const char* tool, Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << tool << ": " << e.what() << "\n";
    return 1;
  }
}

// A flag's integer value; "--trials: 'ten' is not an integer" otherwise.
inline long long IntFlag(const std::string& flag, const std::string& text) {
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || at != end || text.empty()) {
    throw std::invalid_argument(flag + ": '" + text + "' is not an integer");
  }
  return value;
}

}  // namespace frontier::bench

#endif  // FRONTIER_TESTS_BENCH_BENCH_MAIN_H_
