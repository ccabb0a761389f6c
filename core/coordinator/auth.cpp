#include "core/coordinator/auth.hpp"

#include "core/util/sha256.hpp"

#include <openssl/rand.h>

#include <array>

namespace gpupool::coordinator {

Result<std::string> new_token_secret() {
    std::array<unsigned char, 32> bytes{};
    if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
        return make_error(ErrorCode::internal, "OpenSSL could not produce random bytes for a token");
    }
    return "gpp_" + util::to_hex(bytes.data(), bytes.size());
}

} // namespace gpupool::coordinator
