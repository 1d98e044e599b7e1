// Command-line parsing shared by frontier-worker and frontier-trial (CLI11,
// header-only): both take `--flag value` and `--flag=value`, print --help to
// standard output and exit 0, and answer a bad command line with the
// problem, the help and exit status 64.
#pragma once

#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace frontier {

inline constexpr int kUsageExit = 64;

// "<program>: <problem>" and `usage` on standard error; returns kUsageExit.
inline int PrintUsageError(const std::string& program, const std::string& problem, const std::string& usage) {
  std::cerr << program << ": " << problem << "\n" << usage;
  return kUsageExit;
}

// Parses argv into `app`'s options: nullopt to go on, else the exit code.
// "--flag=" gives the flag an empty value (CLI11 alone would call it missing).
inline std::optional<int> ParseFlags(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args;  // in reverse order, as CLI::App::parse takes them
  for (int i = argc - 1; i >= 1; --i) {
    const std::string arg = argv[i];
    if (arg.size() > 3 && arg.rfind("--", 0) == 0 && arg.back() == '=' && arg.find('=') == arg.size() - 1) {
      args.push_back("");
      args.push_back(arg.substr(0, arg.size() - 1));
    } else {
      args.push_back(arg);
    }
  }
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::ParseError& e) {
    return PrintUsageError(app.get_name(), e.what(), app.help());
  }
  return std::nullopt;
}

// A folder flag that must not be empty.
inline CLI::Validator NonEmptyFolder() {
  return CLI::Validator([](std::string& dir) { return dir.empty() ? "takes a folder" : ""; }, "");
}

// A whole-number flag of at least `min`.
inline CLI::Validator AtLeast(int min) {
  return CLI::Validator(
      [min](std::string& text) {
        try {
          size_t used = 0;
          if (std::stol(text, &used) >= min && used == text.size()) return std::string();
        } catch (const std::exception&) {
        }
        return "takes a whole number >= " + std::to_string(min) + ", not '" + text + "'";
      },
      "N");
}

}  // namespace frontier
