// SHA-256 (OpenSSL's libcrypto): the digest of the coordinator's tokens
// (proto/auth.cc keeps tokens only as digests) and of the kernel lab's
// candidate sources (server/cli/ops_command.cc).
#pragma once

#include <string>
#include <string_view>

namespace frontier {

// The 32 raw bytes of the digest.
std::string Sha256(std::string_view data);
// The digest as 64 lowercase hexadecimal digits.
std::string Sha256Hex(std::string_view data);

}  // namespace frontier
