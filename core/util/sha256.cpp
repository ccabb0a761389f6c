#include "core/util/sha256.hpp"

#include <openssl/evp.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <new>
#include <unistd.h>
#include <vector>

namespace gpupool::util {

std::string to_hex(const unsigned char* data, std::size_t size) {
    static constexpr char k_digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(size * 2);
    for (std::size_t i = 0; i < size; ++i) {
        out += k_digits[data[i] >> 4];
        out += k_digits[data[i] & 0x0f];
    }
    return out;
}

std::string sha256_hex(std::string_view data) {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), digest.data(), &len, EVP_sha256(), nullptr);
    return to_hex(digest.data(), len);
}

Result<std::string> sha256_file_hex(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        return make_error(ErrorCode::io, "cannot read " + file.string());
    }
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
        return make_error(ErrorCode::internal, "cannot set up SHA-256");
    }
    std::vector<char> buf(std::size_t{1} << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        if (in.gcount() > 0) {
            EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<std::size_t>(in.gcount()));
        }
    }
    if (in.bad()) {
        return make_error(ErrorCode::io, "cannot read " + file.string());
    }
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), digest.data(), &len);
    return to_hex(digest.data(), len);
}

Result<std::string> sha256_fd_hex(int fd) {
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
        return make_error(ErrorCode::internal, "cannot set up SHA-256");
    }
    std::vector<char> buf(std::size_t{1} << 20);
    off_t at = 0;
    for (;;) {
        const ssize_t n = ::pread(fd, buf.data(), buf.size(), at);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return make_error(ErrorCode::io, std::string("cannot read a file to hash: ") + std::strerror(errno));
        }
        if (n == 0) {
            break;
        }
        EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<std::size_t>(n));
        at += n;
    }
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx.get(), digest.data(), &len);
    return to_hex(digest.data(), len);
}

struct Sha256::Context {
    std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx{EVP_MD_CTX_new(), EVP_MD_CTX_free};
};

Sha256::Sha256() : m_ctx(new Context) {
    if (!m_ctx->ctx || EVP_DigestInit_ex(m_ctx->ctx.get(), EVP_sha256(), nullptr) != 1) {
        delete m_ctx;
        throw std::bad_alloc(); // only when OpenSSL cannot allocate its context
    }
}

Sha256::~Sha256() {
    delete m_ctx;
}

void Sha256::update(std::string_view data) {
    EVP_DigestUpdate(m_ctx->ctx.get(), data.data(), data.size());
}

std::string Sha256::hex() {
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(m_ctx->ctx.get(), digest.data(), &len);
    return to_hex(digest.data(), len);
}

} // namespace gpupool::util
