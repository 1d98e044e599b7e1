#include "worker/agent/trial_artifacts.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

#include "search_spaces/input_bounds.h"
#include "worker/agent/agent.h"
#include "worker/host.h"

namespace frontier {
namespace {

// UploadArtifact's chunks: the coordinator's limit per chunk (server/store/artifact_store.h).
constexpr size_t kArtifactChunkBytes = size_t{1} << 20;

}  // namespace

std::filesystem::path TrialArtifactDir(const std::string& artifact_dir, const std::string& trial_id) {
  std::error_code ignored;
  return (std::filesystem::absolute(artifact_dir.empty() ? "artifacts" : artifact_dir, ignored) /
          TrialFolderName(trial_id))
      .lexically_normal();
}

void Agent::UploadArtifacts(const Lease& lease) {
  if (!options_.upload_artifacts) return;
  namespace fs = std::filesystem;
  const fs::path dir = TrialArtifactDir(options_.artifact_dir, lease.trial_id);
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_symlink(ec)) continue;  // a link's target is not the trial's to send
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  int64_t sent = 0;
  int stored = 0;
  for (const fs::path& file : files) {
    const std::string name = file.lexically_relative(dir).generic_string();
    if (FindEncodingFault(name)) {  // the request's name is a protobuf string: UTF-8 only
      spdlog::warn("trial {}: artifact {} not sent: its name is not UTF-8", lease.trial_id, Abbreviated(name, 200));
      continue;
    }
    // Opened as it is now, not as it was listed: a process the trial left may have put a link or a FIFO
    // there since. At most the bytes the file had when opened are sent.
    int64_t size = 0;
    const int fd = OpenRegularFile(file.string(), &size);
    const bool regular = fd >= 0;
    std::string chunk(kArtifactChunkBytes, '\0');
    int64_t offset = 0;
    bool last = false;
    grpc::Status status;
    while (regular && !last) {
      const int64_t want = std::min<int64_t>(static_cast<int64_t>(chunk.size()), size - offset);
      const int64_t got = ReadUpTo(fd, chunk.data(), want);
      if (got < want) size = offset + got;  // shorter than it was: what is there
      last = offset + got >= size;
      v1::UploadArtifactResponse response;
      status = Call("UploadArtifact", Retry::kOnce, options_.rpc_timeout,
                    [&](grpc::ClientContext* context, const std::string& worker_id) {
                      v1::UploadArtifactRequest request;
                      request.set_worker_id(worker_id);
                      request.set_trial_id(lease.trial_id);
                      request.set_attempt(lease.attempt);
                      request.set_name(name);
                      request.set_offset(offset);
                      request.set_data(chunk.data(), static_cast<size_t>(got));
                      request.set_last(last);
                      return stub_->UploadArtifact(context, request, &response);
                    });
      if (!status.ok()) break;
      offset += got;
    }
    if (fd >= 0) ::close(fd);
    if (status.ok() && last) {
      sent += offset;
      ++stored;
      continue;
    }
    if (status.ok()) {
      spdlog::warn("trial {}: artifact {} not sent: cannot read {} (gone, or no longer a regular file)",
                   lease.trial_id, name, file.string());
      continue;
    }
    spdlog::warn("trial {}: artifact {} not stored by the coordinator: {}", lease.trial_id, name,
                 status.error_message());
    // A bad name costs that file; no store, no lease or a full trial end the upload.
    if (status.error_code() != grpc::StatusCode::INVALID_ARGUMENT) break;
  }
  if (stored > 0) {
    spdlog::info("trial {}: {} of {} artifacts stored by the coordinator ({} bytes)", lease.trial_id, stored,
                 files.size(), sent);
  }
}

}  // namespace frontier
