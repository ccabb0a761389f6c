// Token secrets and their hashes. Secrets are 32 random bytes from the kernel's CSPRNG (getrandom),
// shown to the user once as "gpp_" + 64 hex digits; the store keeps only their SHA-256 (hex). Thread-safe.
#pragma once

#include "core/util/result.hpp"
#include "core/util/sha256.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace gpupool::coordinator {

Result<std::string> new_token_secret();
using util::sha256_file_hex;
using util::sha256_hex;

} // namespace gpupool::coordinator
