// Token secrets and their hashes. Secrets are 32 random bytes from the kernel's CSPRNG (getrandom),
// shown to the user once as "gpp_" + 64 hex digits; the store keeps only their SHA-256 (hex). Thread-safe.
// The hash is util::sha256_hex, the tree's one SHA-256; a kernel that gives no random bytes is an
// internal Error. Idempotency keys are token secrets too.
#pragma once

#include "core/util/result.hpp"
#include "core/util/sha256.hpp"

#include <string>

namespace gpupool::util {

Result<std::string> new_token_secret();

} // namespace gpupool::util
