#include "proto/auth.h"

#include <grpcpp/support/client_interceptor.h>
#include "os/sha256.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace frontier {
namespace {

std::string ReadFileOrThrow(const std::string& path, const char* what) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot read ") + what + " file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

// Constant-time comparison: no early exit that would leak the matching prefix length.
bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The SHA-256 digest of a token, as raw bytes: what the table keeps and compares.
std::string Digest(const std::string& token) { return Sha256(token); }

bool ValidUserName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (unsigned char c : name) {
    if (!std::isalnum(c) && c != '.' && c != '_' && c != '@' && c != '-') return false;
  }
  return true;
}

std::optional<Role> RoleNamed(const std::string& name) {
  for (Role r : {Role::kUser, Role::kAdmin, Role::kWorker}) {
    if (name == RoleName(r)) return r;
  }
  return std::nullopt;
}

class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  BearerTokenInterceptor(grpc::experimental::ClientRpcInfo* info, std::string token)
      : info_(info), token_(std::move(token)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", "Bearer " + token_});
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ClientRpcInfo* info_;
  std::string token_;
};

class BearerTokenInterceptorFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenInterceptorFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo* info) override {
    return new BearerTokenInterceptor(info, token_);
  }

 private:
  std::string token_;
};

}  // namespace

std::string ReadToken(const std::string& file, const char* env_var) {
  if (!file.empty()) {
    std::string token = Trim(ReadFileOrThrow(file, "token"));
    if (token.empty()) throw std::runtime_error("token file '" + file + "' is empty");
    return token;
  }
  const char* env = std::getenv(env_var);
  return env ? Trim(env) : "";
}

const char* RoleName(Role role) {
  switch (role) {
    case Role::kUser:
      return "user";
    case Role::kAdmin:
      return "admin";
    case Role::kWorker:
      return "worker";
  }
  return "?";
}

TokenTable::TokenTable(std::string path) : path_(std::move(path)), by_digest_(Read(path_)) {}

size_t TokenTable::Reload() {
  std::map<std::string, Identity> fresh = Read(path_);  // throws before anything changes
  std::lock_guard<std::mutex> lock(mu_);
  by_digest_.swap(fresh);
  return by_digest_.size();
}

std::optional<Identity> TokenTable::Find(const std::string& token) const {
  const std::string digest = Digest(token);
  std::lock_guard<std::mutex> lock(mu_);
  // Every entry is compared in constant time, so the time taken says nothing about the token.
  std::optional<Identity> found;
  for (const auto& [d, who] : by_digest_) {
    if (SameToken(digest, d)) found = who;
  }
  return found;
}

// The files a token path names: the file itself, or the regular files of a
// directory whose names do not start with '.' (a mounted Kubernetes Secret
// keeps its bookkeeping in ..data and ..2024_* entries), in name order.
static std::vector<std::string> TokenFiles(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<std::string> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || !entry.is_regular_file(ec)) continue;
    files.push_back(entry.path().string());
  }
  if (ec) throw std::runtime_error("cannot list token directory '" + path + "': " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

std::map<std::string, Identity> TokenTable::Read(const std::string& path) {
  std::map<std::string, Identity> table;
  // digest -> "'FILE' line N": where a token first appeared, named when it appears again.
  std::map<std::string, std::string> line_of;
  for (const std::string& file : TokenFiles(path)) {
    std::istringstream in(ReadFileOrThrow(file, "token"));
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      const std::string at = "'" + file + "' line " + std::to_string(number);
      const std::string where = "token file " + at + ": ";
      line = Trim(line);
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      std::string user, role, token, extra;
      fields >> user >> role >> token >> extra;
      if (token.empty() || !extra.empty()) throw std::runtime_error(where + "expected USER ROLE TOKEN");
      if (!ValidUserName(user)) {
        throw std::runtime_error(where + "user name must be 1 to 64 letters, digits or . _ @ -");
      }
      const std::optional<Role> r = RoleNamed(role);
      if (!r) throw std::runtime_error(where + "role '" + role + "' is not user, admin or worker");
      if (token.size() < 16) throw std::runtime_error(where + "token shorter than 16 characters");
      const std::string digest = Digest(token);
      if (!table.emplace(digest, Identity{user, *r}).second) {
        throw std::runtime_error(where + "the same token as " + line_of.at(digest));
      }
      line_of.emplace(digest, at);
    }
  }
  if (table.empty()) throw std::runtime_error("token file '" + path + "' has no tokens");
  return table;
}

grpc::Status Authorize(const grpc::ServerContextBase& context, const ServerSecurity& security, Role needed,
                       Identity* who) {
  if (!security.auth_enabled()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const char* need = needed == Role::kWorker  ? "a worker token"
                     : needed == Role::kAdmin ? "an admin token"
                                              : "a user token";
  if (it == metadata.end()) {
    return grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        std::string("this coordinator requires ") + need +
            ": send 'authorization: Bearer <token>' (the CLI reads FRONTIER_TOKEN or --token-file)");
  }
  const std::string value(it->second.data(), it->second.size());
  const std::string prefix = "Bearer ";
  const std::string token = value.rfind(prefix, 0) == 0 ? value.substr(prefix.size()) : "";
  std::optional<Identity> caller;
  if (security.users) caller = security.users->Find(token);
  if (!caller && !security.user_token.empty() && SameToken(token, security.user_token)) {
    caller = Identity{"user", Role::kUser};
  }
  if (!caller && !security.worker_token.empty() && SameToken(token, security.worker_token)) {
    caller = Identity{"worker", Role::kWorker};
  }
  if (!caller) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        std::string("invalid token: this call needs ") + need);
  }
  const bool allowed = needed == Role::kUser ? caller->role != Role::kWorker : caller->role == needed;
  if (!allowed) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        std::string("this call needs ") + need + "; the token given is a " +
                            RoleName(caller->role) + " token (" + caller->user + ")");
  }
  if (who) *who = *caller;
  return grpc::Status::OK;
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& s) {
  if (s.tls_cert_file.empty() != s.tls_key_file.empty()) {
    throw std::runtime_error("TLS needs both a certificate and a key");
  }
  if (s.tls_cert_file.empty()) {
    if (!s.tls_client_ca_file.empty())
      throw std::runtime_error("a client CA needs a server certificate and key");
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions options(s.tls_client_ca_file.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_key_cert_pairs.push_back(
      {ReadFileOrThrow(s.tls_key_file, "TLS key"), ReadFileOrThrow(s.tls_cert_file, "TLS certificate")});
  if (!s.tls_client_ca_file.empty())
    options.pem_root_certs = ReadFileOrThrow(s.tls_client_ca_file, "client CA");
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::Channel> MakeClientChannel(const std::string& address, const ClientSecurity& s,
                                                 grpc::ChannelArguments args) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!s.tls_ca_file.empty()) {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFileOrThrow(s.tls_ca_file, "TLS CA");
    if (!s.tls_cert_file.empty()) {
      options.pem_cert_chain = ReadFileOrThrow(s.tls_cert_file, "TLS certificate");
      options.pem_private_key = ReadFileOrThrow(s.tls_key_file, "TLS key");
    }
    credentials = grpc::SslCredentials(options);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!s.token.empty()) interceptors.push_back(std::make_unique<BearerTokenInterceptorFactory>(s.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args,
                                                                 std::move(interceptors));
}

}  // namespace frontier
