// What the worker agent and the trial runner share about the machine they
// run on: its name, program lookup on PATH and the folder layout of trial
// artifacts. Plain C++ (no gRPC, no LibTorch): the agent (frontier_worker)
// and the runner (frontier_trial) both link it, so one rule serves both sides.
#pragma once

#include <string>

namespace frontier {

// gethostname(2); empty when it fails.
std::string HostName();

// The full path of the executable `program` in $PATH (an empty entry is the
// current folder), or "" when there is none. A name with a '/' is returned as
// it is when it is executable, else "".
std::string FindOnPath(const std::string& program);

// The folder name of a trial's artifacts under an artifact directory: the
// trial id with every character other than [A-Za-z0-9._-] replaced by '_';
// "trial" for an empty id, "." or "..". frontier-trial writes there and the
// agent looks there (docs/profiling.md).
std::string TrialFolderName(const std::string& trial_id);

// A TCP port on `host` (an IPv4 address; "0.0.0.0": every interface) that
// was free a moment ago (bound to port 0 and closed): what a launcher passes
// to a data-parallel trial's ranks as their TCPStore's port. Throws
// std::runtime_error when no socket can be bound.
int FreeTcpPort(const std::string& host = "127.0.0.1");

}  // namespace frontier
