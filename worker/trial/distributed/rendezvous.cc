#include "worker/trial/distributed/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace frontier::distributed {
namespace {

const char* Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

bool ParseInt(const char* text, long long* out) {
  if (text == nullptr) return false;
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = value;
  return true;
}

}  // namespace

std::optional<Rendezvous> RendezvousFromEnvironment(std::string* problem) {
  problem->clear();
  struct Names {
    const char* rank;
    const char* world;
  };
  const Names kNames[] = {{"FRONTIER_RANK", "FRONTIER_WORLD_SIZE"},
                          {"RANK", "WORLD_SIZE"},
                          {"SLURM_PROCID", "SLURM_NTASKS"}};
  const Names* found = nullptr;
  for (const Names& names : kNames) {
    if (Env(names.rank) != nullptr || Env(names.world) != nullptr) {
      found = &names;
      break;
    }
  }
  if (found == nullptr) return std::nullopt;
  Rendezvous rendezvous;
  long long rank = 0, world = 0;
  if (!ParseInt(Env(found->rank), &rank) || !ParseInt(Env(found->world), &world)) {
    *problem = std::string("distributed rendezvous: ") + found->rank + " and " + found->world +
               " must both be set to integers (got " + found->rank + "='" +
               (Env(found->rank) ? Env(found->rank) : "") + "', " + found->world + "='" +
               (Env(found->world) ? Env(found->world) : "") + "')";
    return std::nullopt;
  }
  rendezvous.rank = static_cast<int>(rank);
  rendezvous.world_size = static_cast<int>(world);
  if (const char* store = Env("FRONTIER_RENDEZVOUS")) {
    rendezvous.store = store;
  } else if (Env("MASTER_ADDR") != nullptr && Env("MASTER_PORT") != nullptr) {
    rendezvous.store = std::string("tcp://") + Env("MASTER_ADDR") + ":" + Env("MASTER_PORT");
  } else {
    *problem = std::string("distributed rendezvous: ") + found->rank + "/" + found->world +
               " are set but neither FRONTIER_RENDEZVOUS (tcp://HOST:PORT or file:///PATH) nor "
               "MASTER_ADDR and MASTER_PORT say where the ranks meet";
    return std::nullopt;
  }
  if (const char* timeout = Env("FRONTIER_DIST_TIMEOUT_S")) {
    char* end = nullptr;
    double value = std::strtod(timeout, &end);
    if (end == timeout || *end != '\0' || !(value > 0)) {
      *problem = std::string("distributed rendezvous: FRONTIER_DIST_TIMEOUT_S='") + timeout +
                 "' is not a positive number of seconds";
      return std::nullopt;
    }
    rendezvous.timeout_s = value;
  }
  if (const char* name = Env("FRONTIER_GLOO_IFNAME")) {
    rendezvous.interface = name;
  } else if (const char* gloo = Env("GLOO_SOCKET_IFNAME")) {
    rendezvous.interface = gloo;
  }
  if (const char* host = Env("FRONTIER_GLOO_HOSTNAME")) rendezvous.hostname = host;
  *problem = CheckRendezvous(rendezvous);
  if (!problem->empty()) return std::nullopt;
  return rendezvous;
}

std::string CheckRendezvous(const Rendezvous& r) {
  if (r.world_size < 1) return "distributed rendezvous: world size " + std::to_string(r.world_size) + " < 1";
  if (r.rank < 0 || r.rank >= r.world_size) {
    return "distributed rendezvous: rank " + std::to_string(r.rank) + " is outside [0, " +
           std::to_string(r.world_size) + ")";
  }
  if (!(r.timeout_s > 0)) return "distributed rendezvous: timeout must be > 0 s";
  if (r.store.rfind("file://", 0) == 0) {
    if (r.store.size() <= 7 || r.store[7] != '/') {
      return "distributed rendezvous: '" + r.store + "': a file store needs an absolute path (file:///PATH)";
    }
    return "";
  }
  if (r.store.rfind("tcp://", 0) == 0) {
    std::string rest = r.store.substr(6);
    size_t colon = rest.rfind(':');
    long long port = 0;
    if (colon == std::string::npos || colon == 0 || !ParseInt(rest.substr(colon + 1).c_str(), &port) ||
        port < 1 || port > 65535) {
      return "distributed rendezvous: '" + r.store + "' is not tcp://HOST:PORT with a port in 1..65535";
    }
    return "";
  }
  return "distributed rendezvous: '" + r.store + "' is neither tcp://HOST:PORT nor file:///PATH";
}

Shard ShardOf(long long batch, int rank, int world_size, BatchPolicy policy) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw std::invalid_argument("ShardOf: rank " + std::to_string(rank) + " is outside [0, " +
                                std::to_string(world_size) + ")");
  }
  if (batch < 1) throw std::invalid_argument("ShardOf: batch " + std::to_string(batch) + " < 1");
  Shard shard;
  if (policy == BatchPolicy::kFixedPerRank) {
    shard.begin = rank * batch;
    shard.count = batch;
    shard.global = batch * world_size;
  } else {
    if (batch < world_size) {
      throw std::invalid_argument("ShardOf: a global batch of " + std::to_string(batch) + " rows cannot be split over " +
                                  std::to_string(world_size) + " ranks (split_global gives every rank >= 1 row)");
    }
    long long base = batch / world_size, extra = batch % world_size;
    shard.begin = rank * base + (rank < extra ? rank : extra);
    shard.count = base + (rank < extra ? 1 : 0);
    shard.global = batch;
  }
  shard.weight = static_cast<double>(shard.count) / static_cast<double>(shard.global);
  return shard;
}

}  // namespace frontier::distributed
