#include "server/store/artifact_store.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "server/store/store.h"

namespace frontier {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxNameBytes = 255;
constexpr int kMaxNameParts = 8;
constexpr const char* kIncoming = ".incoming";
constexpr const char* kAttemptFile = ".attempt";

bool SafePart(const std::string& part) {
  if (part.empty() || part[0] == '.') return false;
  return std::all_of(part.begin(), part.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

std::string Quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text.substr(0, 80)) {
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  }
  return out + (text.size() > 80 ? "...'" : "'");
}

[[noreturn]] void Fail(ArtifactError::Kind kind, const std::string& what) { throw ArtifactError(kind, what); }

// Every regular file under `dir` but the attempt marker: their count and bytes.
void Tally(const fs::path& dir, int* files, int64_t* bytes) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec) || it->path().filename() == kAttemptFile) continue;
    ++*files;
    *bytes += static_cast<int64_t>(it->file_size(ec));
  }
}

}  // namespace

std::optional<std::string> ArtifactNameProblem(const std::string& name) {
  if (name.empty()) return std::string("an empty artifact name");
  if (name.size() > kMaxNameBytes) {
    return "artifact name of " + std::to_string(name.size()) + " bytes; the limit is " +
           std::to_string(kMaxNameBytes);
  }
  if (name[0] == '/') return "artifact name " + Quoted(name) + " is absolute; names are relative to the trial's folder";
  int parts = 0;
  size_t begin = 0;
  while (begin <= name.size()) {
    const size_t end = std::min(name.find('/', begin), name.size());
    const std::string part = name.substr(begin, end - begin);
    if (!SafePart(part)) {
      return "artifact name " + Quoted(name) + ": part " + Quoted(part) +
             " is not of [A-Za-z0-9._-] or starts with '.' (no '..', no hidden files, no empty parts)";
    }
    if (++parts > kMaxNameParts) {
      return "artifact name " + Quoted(name) + " has more than " + std::to_string(kMaxNameParts) + " parts";
    }
    begin = end + 1;
  }
  return std::nullopt;
}

ArtifactStore::ArtifactStore(std::string root, ArtifactLimits limits) : root_(std::move(root)), limits_(limits) {
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec || !fs::is_directory(root_, ec)) {
    Fail(ArtifactError::Kind::kIo, "cannot create the artifact store '" + root_ + "': " + ec.message());
  }
}

std::string ArtifactStore::TrialPath(const std::string& trial_id) {
  const std::string experiment = ExperimentOfTrial(trial_id);
  if (!SafePart(trial_id) || !SafePart(experiment)) {
    Fail(ArtifactError::Kind::kInvalid, "trial id " + Quoted(trial_id) + " names no trial of an experiment");
  }
  return experiment + "/" + trial_id;
}

std::string ArtifactStore::TrialDir(const std::string& trial_id) const {
  return (fs::path(root_) / TrialPath(trial_id)).string();
}

int64_t ArtifactStore::Write(const std::string& trial_id, int attempt, const std::string& name, int64_t offset,
                             const std::string& data, bool last) {
  if (std::optional<std::string> problem = ArtifactNameProblem(name)) Fail(ArtifactError::Kind::kInvalid, *problem);
  if (static_cast<int64_t>(data.size()) > limits_.max_chunk_bytes) {
    Fail(ArtifactError::Kind::kInvalid, "chunk of " + std::to_string(data.size()) + " bytes of " + Quoted(name) +
                                            "; the limit is " + std::to_string(limits_.max_chunk_bytes) +
                                            " bytes a chunk");
  }
  if (offset < 0) Fail(ArtifactError::Kind::kInvalid, "negative offset " + std::to_string(offset));
  if (attempt < 1) Fail(ArtifactError::Kind::kInvalid, "attempt " + std::to_string(attempt) + "; leases start at 1");
  const fs::path dir = TrialDir(trial_id);
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) Fail(ArtifactError::Kind::kIo, "cannot create " + dir.string() + ": " + ec.message());

  // The attempt the stored files belong to: a newer one starts over.
  int stored_attempt = 0;
  std::ifstream(dir / kAttemptFile) >> stored_attempt;
  if (stored_attempt > attempt) {
    Fail(ArtifactError::Kind::kStale, "attempt " + std::to_string(attempt) + " of " + trial_id +
                                          " is older than attempt " + std::to_string(stored_attempt) +
                                          ", whose artifacts are stored");
  }
  if (stored_attempt < attempt) {
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
    std::ofstream(dir / kAttemptFile) << attempt << "\n";
  }

  const fs::path incoming = dir / kIncoming / name;
  const fs::path complete = dir / name;
  const bool started = fs::is_regular_file(incoming, ec);
  const int64_t have = started ? static_cast<int64_t>(fs::file_size(incoming, ec)) : 0;
  if (offset != 0 && offset != have) {
    Fail(ArtifactError::Kind::kInvalid, "chunk at offset " + std::to_string(offset) + " of " + Quoted(name) + ", but " +
                                            std::to_string(have) +
                                            " bytes of it are stored: a file's chunks go in order from offset 0");
  }
  int files = 0;
  int64_t bytes = 0;
  Tally(dir, &files, &bytes);
  if (!started && !fs::exists(complete, ec) && files + 1 > limits_.max_files) {
    Fail(ArtifactError::Kind::kExhausted, "trial " + trial_id + " already has " + std::to_string(files) +
                                              " artifact files; the limit is " + std::to_string(limits_.max_files));
  }
  const int64_t after = bytes - (offset == 0 ? have : 0) + static_cast<int64_t>(data.size());
  if (after > limits_.max_trial_bytes) {
    Fail(ArtifactError::Kind::kExhausted, "trial " + trial_id + "'s artifacts would take " + std::to_string(after) +
                                              " bytes; the limit is " + std::to_string(limits_.max_trial_bytes) +
                                              " bytes a trial");
  }
  fs::create_directories(incoming.parent_path(), ec);
  if (fs::exists(incoming, ec) && !fs::is_regular_file(incoming, ec)) {
    Fail(ArtifactError::Kind::kInvalid, Quoted(name) + " is a folder of the trial's artifacts, not a file");
  }
  {
    std::ofstream out(incoming, std::ios::binary | (offset == 0 ? std::ios::trunc : std::ios::app));
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    if (!out) Fail(ArtifactError::Kind::kIo, "cannot write " + incoming.string());
  }
  const int64_t size = offset + static_cast<int64_t>(data.size());
  if (last) {
    fs::create_directories(complete.parent_path(), ec);
    fs::rename(incoming, complete, ec);
    if (ec) Fail(ArtifactError::Kind::kIo, "cannot store " + complete.string() + ": " + ec.message());
    for (fs::path empty = incoming.parent_path(); empty != dir && fs::remove(empty, ec);) empty = empty.parent_path();
  }
  return size;
}

std::vector<ArtifactFile> ArtifactStore::List(const std::string& trial_id) const {
  const std::string dir = TrialDir(trial_id);
  std::lock_guard<std::mutex> lock(mu_);
  return ListDir(dir);
}

std::vector<std::pair<std::string, std::vector<ArtifactFile>>> ArtifactStore::ListExperiment(
    const std::string& experiment_id) const {
  std::vector<std::pair<std::string, std::vector<ArtifactFile>>> trials;
  if (!SafePart(experiment_id)) return trials;
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  for (auto it = fs::directory_iterator(fs::path(root_) / experiment_id, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string trial = it->path().filename().string();
    if (!SafePart(trial) || !it->is_directory(ec)) continue;
    std::vector<ArtifactFile> files = ListDir(it->path().string());
    if (!files.empty()) trials.emplace_back(trial, std::move(files));
  }
  std::sort(trials.begin(), trials.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return trials;
}

std::vector<ArtifactFile> ArtifactStore::ListDir(const std::string& trial_dir) const {
  const fs::path dir = trial_dir;
  std::vector<ArtifactFile> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().filename() == kIncoming) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec) || it->path().filename() == kAttemptFile) continue;
    files.push_back({it->path().lexically_relative(dir).generic_string(), static_cast<int64_t>(it->file_size(ec))});
  }
  std::sort(files.begin(), files.end(), [](const ArtifactFile& a, const ArtifactFile& b) { return a.name < b.name; });
  return files;
}

std::string ArtifactStore::Read(const std::string& trial_id, const std::string& name, int64_t offset,
                                int64_t* size) const {
  if (std::optional<std::string> problem = ArtifactNameProblem(name)) Fail(ArtifactError::Kind::kInvalid, *problem);
  const fs::path path = fs::path(TrialDir(trial_id)) / name;
  std::lock_guard<std::mutex> lock(mu_);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) Fail(ArtifactError::Kind::kNotFound, "trial " + trial_id + " has no artifact " + Quoted(name));
  *size = static_cast<int64_t>(fs::file_size(path, ec));
  if (offset < 0 || offset > *size) {
    Fail(ArtifactError::Kind::kOutOfRange,
         "offset " + std::to_string(offset) + " of " + Quoted(name) + " of " + std::to_string(*size) + " bytes");
  }
  std::ifstream in(path, std::ios::binary);
  in.seekg(offset);
  std::string data(static_cast<size_t>(std::min(limits_.max_chunk_bytes, *size - offset)), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  if (!in) Fail(ArtifactError::Kind::kIo, "cannot read " + path.string());
  return data;
}

}  // namespace frontier
