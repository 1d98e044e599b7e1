// The `frontier` commands that talk to a running coordinator (docs/cli.md):
// each makes its RPCs through `client`, prints to stdout (progress and
// summaries of submit to stderr) and returns the exit code (cli.h). Throw
// std::runtime_error for an unreadable file.
#pragma once

#include <optional>
#include <string>

#include "server/cli/client.h"

namespace frontier {

// The whole file; throws std::runtime_error when it cannot be read.
std::string ReadFile(const std::string& path);

// The search-space file at `path`, checked before it is sent as the
// coordinator checks it again (search_space.h): nullopt, after printing
// "frontier: submit PATH: <file>:<line>: <problem>" (the words of a refusal by
// the coordinator), when it is invalid. Throws std::runtime_error when it
// cannot be opened.
std::optional<std::string> ReadSpaceFile(const std::string& path);

// `frontier submit SPACE`: the experiment id (table) or its JSON; an invalid
// space file is refused before anything is sent (kCliInvalid).
int Submit(Client& client, const std::string& space_file, const std::string& output);
// `frontier status EXP`, or with `cancel` `frontier cancel EXP`: the experiment line or its JSON
// (read_commands.h has status from any source; this one is cancel's).
int ShowExperiment(Client& client, const std::string& id, bool cancel, const std::string& output);
// `frontier watch EXP`: one line per event until the experiment ends; OK when it completed.
int Watch(Client& client, const std::string& id);
}  // namespace frontier
