// Who may call what, and over which transport. Shared by the coordinator
// (server side) and every client (CLI, workers), gRPC-only, torch-free.
//
// Tokens: when the server has a user and/or worker token, every RPC but the
// health service must carry `authorization: Bearer <token>`. The user token
// grants ExperimentService, the worker token WorkerService only (a worker
// token cannot submit or cancel). Tokens come from files or environment
// variables, never from flags that `ps` would show.
// TLS: a server certificate and key, optionally a client CA that makes TLS
// mutual; clients trust a CA file and may present a certificate.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

namespace frontier {

enum class Role { kUser, kWorker };

struct ServerSecurity {
  std::string user_token;    // empty: user RPCs need no token (unless worker_token is set)
  std::string worker_token;  // empty: worker RPCs need no token (unless user_token is set)
  std::string tls_cert_file, tls_key_file;  // both or neither
  std::string tls_client_ca_file;           // set: clients must present a certificate it signed
  bool auth_enabled() const { return !user_token.empty() || !worker_token.empty(); }
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
grpc::Status Authorize(const grpc::ServerContextBase& context, const ServerSecurity& security, Role needed);

// TLS credentials when a certificate is configured, insecure otherwise. Throws on unreadable files.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& security);

// A channel that uses TLS when a CA is given and adds the bearer token to every call.
std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address, const ClientSecurity& security,
                                                 grpc::ChannelArguments args = {});

}  // namespace frontier
