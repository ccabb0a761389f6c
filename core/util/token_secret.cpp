#include "core/util/token_secret.hpp"

#include "core/util/sha256.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <sys/random.h>

namespace gpupool::util {

Result<std::string> new_token_secret() {
    // The kernel's CSPRNG (getrandom(2), which blocks only until it is first seeded at boot), not
    // OpenSSL's: RAND_bytes sets up its DRBG on first use, a third of the instructions of a whole
    // `gpupool submit` process, which needs one key (bench/README.md). Up to 256 bytes come whole.
    std::array<unsigned char, 32> bytes{};
    ssize_t got = -1;
    do {
        got = ::getrandom(bytes.data(), bytes.size(), 0);
    } while (got < 0 && errno == EINTR);
    if (got != static_cast<ssize_t>(bytes.size())) {
        return make_error(ErrorCode::internal, std::string("the kernel gave no random bytes for a token: ") +
                                                   (got < 0 ? std::strerror(errno) : "short read"));
    }
    return "gpp_" + to_hex(bytes.data(), bytes.size());
}

} // namespace gpupool::util
