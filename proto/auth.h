// Who may call what, and over which transport. Shared by the coordinator
// (server side) and every client (CLI, workers), gRPC-only, torch-free.
//
// Tokens: when the server has tokens, every RPC but the health service must
// carry `authorization: Bearer <token>`. A token names a user and a role:
// `user` and `admin` tokens grant ExperimentService, `worker` tokens
// WorkerService only (a worker token cannot submit or cancel); a user may
// cancel only the experiments it submitted, an admin any. Named users come
// from a token file (TokenTable, `frontier-server --tokens`), reloaded on
// SIGHUP; the older pair of shared tokens (one user token, one worker token)
// still works and names its holders "user" and "worker". Tokens come from
// files or environment variables, never from flags that `ps` would show, and
// are kept in memory only as SHA-256 digests; no message prints one.
// TLS: a server certificate and key, optionally a client CA that makes TLS
// mutual; clients trust a CA file and may present a certificate.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

namespace frontier {

enum class Role { kUser, kAdmin, kWorker };
const char* RoleName(Role role);  // "user", "admin", "worker"

// Who made a call.
struct Identity {
  std::string user;  // empty when the coordinator has no tokens (anyone may do anything)
  Role role = Role::kUser;
};

// Named users from a token file: one line per token, `USER ROLE TOKEN`
// (ROLE user, admin or worker; USER letters, digits and . _ @ -, at most 64;
// TOKEN at least 16 characters without spaces); blank lines and lines
// starting with # are ignored. The path may be a directory instead: every
// regular file in it whose name does not start with '.' is read as such a
// file (one file per user or team, or a mounted Kubernetes Secret), and a
// token may appear once across all of them. Kept as SHA-256 digests.
// Thread-safe: Find may run while Reload swaps the table.
class TokenTable {
 public:
  // Reads `path`. Throws std::runtime_error naming the file and the line
  // (never the token) when it is unreadable or a line is wrong.
  explicit TokenTable(std::string path);
  // Reads the file again (token rotation). On an error the table is kept as
  // it was and the error thrown. Returns the number of tokens now.
  size_t Reload();
  std::optional<Identity> Find(const std::string& token) const;
  const std::string& path() const { return path_; }

 private:
  static std::map<std::string, Identity> Read(const std::string& path);
  std::string path_;
  mutable std::mutex mu_;
  std::map<std::string, Identity> by_digest_;
};

struct ServerSecurity {
  std::string user_token;    // the shared user token; empty: none (user RPCs open unless other tokens exist)
  std::string worker_token;  // the shared worker token; empty: none
  std::shared_ptr<TokenTable> users;        // named users (--tokens); shared by the copies of this struct
  std::string tls_cert_file, tls_key_file;  // both or neither
  std::string tls_client_ca_file;           // set: clients must present a certificate it signed
  bool auth_enabled() const { return !user_token.empty() || !worker_token.empty() || users; }
};

struct ClientSecurity {
  std::string token;
  std::string tls_ca_file;                  // set: connect with TLS, trusting this CA
  std::string tls_cert_file, tls_key_file;  // client certificate for mutual TLS
};

// A token from a file (whitespace trimmed) or, when the file is empty, an
// environment variable; "" when neither is set. Throws std::runtime_error
// for an unreadable or empty file.
std::string ReadToken(const std::string& file, const char* env_var);

// OK, or UNAUTHENTICATED (no or wrong token) / PERMISSION_DENIED (a valid
// token of the other role), each with a message that says what to do.
// `needed` kUser admits users and admins, kAdmin admins only, kWorker
// workers only. On OK, `who` (when given) is the caller.
grpc::Status Authorize(const grpc::ServerContextBase& context, const ServerSecurity& security, Role needed,
                       Identity* who = nullptr);

// TLS credentials when a certificate is configured, insecure otherwise. Throws on unreadable files.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security);

// A channel that uses TLS when a CA is given and adds the bearer token to every call.
std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address, const ClientSecurity& security,
                                                 grpc::ChannelArguments args = {});

}  // namespace frontier
