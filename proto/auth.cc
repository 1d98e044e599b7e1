#include "proto/auth.h"

#include <grpcpp/support/client_interceptor.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

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

class BearerTokenInterceptor final : public grpc::experimental::Interceptor {
 public:
  BearerTokenInterceptor(grpc::experimental::ClientRpcInfo* info, std::string token)
      : info_(info), token_(std::move(token)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
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

grpc::Status Authorize(const grpc::ServerContextBase& context, const ServerSecurity& security, Role needed) {
  if (!security.auth_enabled()) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  const char* need = needed == Role::kUser ? "a user token" : "a worker token";
  if (it == metadata.end()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        std::string("this coordinator requires ") + need +
                            ": send 'authorization: Bearer <token>' (the CLI reads FRONTIER_TOKEN or --token-file)");
  }
  const std::string value(it->second.data(), it->second.size());
  const std::string prefix = "Bearer ";
  const std::string token = value.rfind(prefix, 0) == 0 ? value.substr(prefix.size()) : "";
  const std::string& expected = needed == Role::kUser ? security.user_token : security.worker_token;
  const std::string& other = needed == Role::kUser ? security.worker_token : security.user_token;
  if (!expected.empty() && SameToken(token, expected)) return grpc::Status::OK;
  if (!other.empty() && SameToken(token, other)) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        std::string("this call needs ") + need + "; the token given belongs to the other role");
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string("invalid token: this call needs ") + need);
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const ServerSecurity& s) {
  if (s.tls_cert_file.empty() != s.tls_key_file.empty()) {
    throw std::runtime_error("TLS needs both a certificate and a key");
  }
  if (s.tls_cert_file.empty()) {
    if (!s.tls_client_ca_file.empty()) throw std::runtime_error("a client CA needs a server certificate and key");
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions options(s.tls_client_ca_file.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_key_cert_pairs.push_back(
      {ReadFileOrThrow(s.tls_key_file, "TLS key"), ReadFileOrThrow(s.tls_cert_file, "TLS certificate")});
  if (!s.tls_client_ca_file.empty()) options.pem_root_certs = ReadFileOrThrow(s.tls_client_ca_file, "client CA");
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
  return grpc::experimental::CreateCustomChannelWithInterceptors(address, credentials, args, std::move(interceptors));
}

}  // namespace frontier
