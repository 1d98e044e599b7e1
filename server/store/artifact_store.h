// The coordinator's artifact store: the files trials wrote to their artifact
// folder (a profile's trace.json and operators.json, anything a command trial
// writes to $FRONTIER_ARTIFACT_DIR), uploaded by their worker in bounded
// chunks (WorkerService.UploadArtifact) so that they outlive the worker, and
// read back by users (ExperimentService.ListArtifacts/ReadArtifact, `frontier
// artifacts`). A folder: ROOT/EXPERIMENT/TRIAL/NAME, with a file's chunks in
// ROOT/EXPERIMENT/TRIAL/.incoming/NAME until its last one arrives. Names are
// checked (ArtifactNameProblem): nothing is ever written outside the trial's
// folder. Thread-safe (one mutex). Never throws for what a client sends
// beyond ArtifactError.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace frontier {

struct ArtifactLimits {
  int64_t max_chunk_bytes = 1 << 20;    // per UploadArtifact call (and per ReadArtifact answer)
  int64_t max_trial_bytes = 512 << 20;  // all of one trial's files, incoming ones included
  int max_files = 256;                  // files of one trial, incoming ones included
};

// Why `name` cannot be an artifact's name, or nullopt when it can: a
// relative '/'-separated path of at most 8 parts, each of [A-Za-z0-9._-] and
// not starting with '.' (no "..", no hidden files), 255 bytes at most.
std::optional<std::string> ArtifactNameProblem(const std::string& name);

class ArtifactError : public std::runtime_error {
 public:
  enum class Kind {
    kInvalid,    // a bad name, trial id, chunk size or offset
    kExhausted,  // past the trial's bytes or file count
    kNotFound,   // no such file
    kOutOfRange, // a read past the file's end
    kStale,      // an attempt older than the one stored
    kIo,         // the folder could not be written or read
  };
  ArtifactError(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }

 private:
  Kind kind_;
};

struct ArtifactFile {
  std::string name;
  int64_t size = 0;
};

class ArtifactStore {
 public:
  // Creates `root` when missing (throws ArtifactError kIo when it cannot).
  explicit ArtifactStore(std::string root, ArtifactLimits limits = {});

  const std::string& root() const { return root_; }
  const ArtifactLimits& limits() const { return limits_; }

  // Appends `data` at `offset` of the trial's file `name` (offset 0 starts
  // it over); with `last` the file is complete and listed. A chunk of an
  // attempt newer than the stored one first removes the older attempt's
  // files. Returns the bytes of the file stored so far.
  int64_t Write(const std::string& trial_id, int attempt, const std::string& name, int64_t offset,
                const std::string& data, bool last);
  // The trial's complete files, by name; empty when it has none.
  std::vector<ArtifactFile> List(const std::string& trial_id) const;
  // The experiment's trials that have files, by trial id, with their files.
  std::vector<std::pair<std::string, std::vector<ArtifactFile>>> ListExperiment(const std::string& experiment_id) const;
  // Up to limits().max_chunk_bytes of the file from `offset`; *size is the
  // file's size.
  std::string Read(const std::string& trial_id, const std::string& name, int64_t offset, int64_t* size) const;
  // "EXPERIMENT/TRIAL": the trial's folder under root(), as links name it.
  static std::string TrialPath(const std::string& trial_id);

 private:
  std::string TrialDir(const std::string& trial_id) const;
  std::vector<ArtifactFile> ListDir(const std::string& dir) const;  // requires mu_

  std::string root_;
  ArtifactLimits limits_;
  mutable std::mutex mu_;
};

}  // namespace frontier
