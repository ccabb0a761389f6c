// SHA-256 (OpenSSL's EVP) as lowercase hex, of bytes in memory or of a file read in pieces.
// Thread-safe.
#pragma once

#include "core/util/result.hpp"

#include <filesystem>
#include <string>
#include <string_view>

namespace gpupool::util {

std::string sha256_hex(std::string_view data);
// The SHA-256 (hex) of a file's contents, read a megabyte at a time; an io Error when it cannot be read.
Result<std::string> sha256_file_hex(const std::filesystem::path& file);
// The same of the file behind `fd`, read with pread from offset 0 (the descriptor's offset is not
// moved): for a file opened without following links (util::open_beneath).
Result<std::string> sha256_fd_hex(int fd);
// A SHA-256 fed in pieces (an archive entry's data as it is read).
class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(std::string_view data);
    // The digest of everything fed so far, as lowercase hex; the hasher is then spent.
    std::string hex();

private:
    struct Context;
    Context* m_ctx;
};

// Lowercase hex of `size` bytes.
std::string to_hex(const unsigned char* data, std::size_t size);

} // namespace gpupool::util
