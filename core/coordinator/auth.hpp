// Token secrets and their hashes. Secrets are 32 random bytes from OpenSSL's CSPRNG, shown to the
// user once as "gpp_" + 64 hex digits; the store keeps only their SHA-256 (hex). Thread-safe.
#pragma once

#include "core/util/result.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace gpupool::coordinator {

Result<std::string> new_token_secret();
std::string sha256_hex(std::string_view data);
// The SHA-256 (hex) of a file's contents, read in pieces; an io Error when it cannot be read.
Result<std::string> sha256_file_hex(const std::filesystem::path& file);

} // namespace gpupool::coordinator
