// A throwaway PostgreSQL 15 server for tests: initdb in a temporary folder as
// the postgres user (initdb refuses root), listening on a free port of
// 127.0.0.1, trust authentication, fsync off. Stopped and deleted on
// destruction. Needs Debian's postgresql-15 (deploy/install-deps.sh).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace frontier::testing {

class PostgresServer {
 public:
  static constexpr const char* kBin = "/usr/lib/postgresql/15/bin";

  PostgresServer() {
    if (!std::filesystem::exists(std::string(kBin) + "/initdb")) {
      throw std::runtime_error(std::string(kBin) + "/initdb not found: install postgresql (deploy/install-deps.sh)");
    }
    char dir[] = "/tmp/frontier-pg-XXXXXX";
    if (!mkdtemp(dir)) throw std::runtime_error("mkdtemp failed");
    dir_ = dir;
    port_ = FreePort();
    Run("chown postgres " + dir_);
    AsPostgres(std::string(kBin) + "/initdb -D " + dir_ + "/data -A trust -U postgres -E UTF8 --no-sync > " + dir_ +
               "/initdb.log 2>&1");
    Start();
  }

  ~PostgresServer() {
    std::system((AsPostgresCommand(std::string(kBin) + "/pg_ctl -D " + dir_ + "/data -m immediate stop") +
                 " > /dev/null 2>&1")
                    .c_str());
    std::filesystem::remove_all(dir_);
  }

  void Start() {
    AsPostgres(std::string(kBin) + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/server.log -w -o \"-p " +
               std::to_string(port_) + " -k " + dir_ + " -c listen_addresses=127.0.0.1 -c fsync=off\" start > /dev/null");
  }
  void Stop() { AsPostgres(std::string(kBin) + "/pg_ctl -D " + dir_ + "/data -m fast -w stop > /dev/null"); }

  void CreateDatabase(const std::string& name) {
    AsPostgres("/usr/bin/psql -q -h 127.0.0.1 -p " + std::to_string(port_) + " -U postgres -d postgres -c 'CREATE DATABASE " +
               name + "' > /dev/null");
  }

  std::string Url(const std::string& database) const {
    return "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/" + database;
  }
  int port() const { return port_; }

 private:
  static int FreePort() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
  }
  static std::string AsPostgresCommand(const std::string& command) {
    return getuid() == 0 ? "runuser -u postgres -- sh -c '" + Escape(command) + "'" : command;
  }
  static std::string Escape(const std::string& s) {
    std::string out;
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out;
  }
  void AsPostgres(const std::string& command) { Run(AsPostgresCommand(command)); }
  void Run(const std::string& command) {
    if (std::system(command.c_str()) != 0) {
      throw std::runtime_error("failed: " + command + " (logs in " + dir_ + ")");
    }
  }

  std::string dir_;
  int port_ = 0;
};

}  // namespace frontier::testing
