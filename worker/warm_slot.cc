#include "worker/warm_slot.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

namespace frontier {
namespace {

using nlohmann::json;

// A request is a few kilobytes (a spec path, the trial's environment); the
// bound keeps a broken peer from making the server allocate without end.
constexpr size_t kMaxMessageBytes = size_t{1} << 20;
constexpr int kMaxFds = 4;
constexpr int kMaxCalibrationThreads = 4096;
constexpr size_t kMaxCalibrationDtypes = 8;

bool SendMessage(int socket, const std::string& text, const int* fds, int count) {
  iovec data{const_cast<char*>(text.data()), text.size()};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  if (count > 0) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(header), fds, sizeof(int) * count);
  }
  ssize_t sent;
  do {
    sent = sendmsg(socket, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(text.size());
}

}  // namespace

bool SendWarmTrialRequest(int socket, const WarmTrialRequest& request, const WarmTrialFds& fds, std::string* error) {
  json environment = json::array();
  for (const auto& [name, value] : request.environment) environment.push_back({name, value});
  json message = {{"spec", request.spec_path},
                  {"progress_every", request.progress_every},
                  {"artifact_dir", request.artifact_dir},
                  {"environment", environment},
                  {"cpus", request.cpus},
                  {"address_space_bytes", request.address_space_bytes},
                  {"reaper", request.reaper},
                  {"cgroup", fds.cgroup_procs_fd >= 0}};
  if (request.calibration) {
    message["calibration"] = {{"device", request.calibration->device},
                              {"threads", request.calibration->threads},
                              {"dtypes", request.calibration->dtypes}};
  }
  const int sent[kMaxFds] = {fds.stdout_fd, fds.stderr_fd, fds.status_fd, fds.cgroup_procs_fd};
  if (SendMessage(socket, message.dump(), sent, fds.cgroup_procs_fd >= 0 ? 4 : 3)) return true;
  *error = std::string("cannot send the trial to the warm slot: ") + std::strerror(errno);
  return false;
}

bool ReceiveWarmTrialRequest(int socket, WarmTrialRequest* request, WarmTrialFds* fds, std::string* error) {
  std::string text(kMaxMessageBytes, '\0');
  iovec data{text.data(), text.size()};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  std::vector<int> received;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
      received.push_back(fd);
    }
  }
  const auto refuse = [&](const std::string& problem) {
    for (int fd : received) close(fd);
    *error = problem;
    return false;
  };
  if (n <= 0) return refuse(n == 0 ? "" : std::string("cannot read a request: ") + std::strerror(errno));
  if (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) return refuse("a request longer than its bounds");
  text.resize(static_cast<size_t>(n));
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  try {
    if (!j.is_object()) return refuse("a request that is not a JSON object");
    const bool cgroup = j.at("cgroup").get<bool>();
    if (received.size() != (cgroup ? 4u : 3u)) return refuse("a request with the wrong descriptors");
    request->spec_path = j.at("spec").get<std::string>();
    request->progress_every = j.at("progress_every").get<int>();
    request->artifact_dir = j.at("artifact_dir").get<std::string>();
    request->environment.clear();
    for (const json& variable : j.at("environment")) {
      request->environment.emplace_back(variable.at(0).get<std::string>(), variable.at(1).get<std::string>());
    }
    request->cpus = j.at("cpus").get<std::vector<int>>();
    request->address_space_bytes = j.at("address_space_bytes").get<int64_t>();
    request->reaper = j.at("reaper").get<pid_t>();
    request->calibration.reset();
    if (const auto calibration = j.find("calibration"); calibration != j.end()) {
      CalibrationRequest c{calibration->at("device").get<std::string>(),
                           calibration->at("threads").get<int>(),
                           calibration->at("dtypes").get<std::vector<std::string>>()};
      if (c.device != "cpu" && c.device != "cuda")
        return refuse("a calibration of an unknown device: " + c.device);
      if (c.threads < 0 || c.threads > kMaxCalibrationThreads)
        return refuse("a calibration's threads out of range");
      if (c.dtypes.empty() || c.dtypes.size() > kMaxCalibrationDtypes)
        return refuse("a calibration's dtypes out of range");
      request->calibration = std::move(c);
    }
  } catch (const json::exception& e) {
    return refuse(std::string("a malformed request: ") + e.what());
  }
  *fds = WarmTrialFds{received[0], received[1], received[2], received.size() > 3 ? received[3] : -1};
  return true;
}

bool SendWarmReply(int socket, const std::string& json_text) { return SendMessage(socket, json_text, nullptr, 0); }

std::optional<std::string> ReceiveWarmReply(int socket, int timeout_ms) {
  pollfd ready{socket, POLLIN, 0};
  int polled;
  do {
    polled = poll(&ready, 1, timeout_ms);
  } while (polled < 0 && errno == EINTR);
  if (polled <= 0) return std::nullopt;
  std::string text(64 * 1024, '\0');
  ssize_t n;
  do {
    n = recv(socket, text.data(), text.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  text.resize(static_cast<size_t>(n));
  return text;
}

}  // namespace frontier
