// DistFiles: the files a coordinator hands out to GPU owners (`gpupool coordinator --dist DIR`), so
// that an owner's machine needs nothing but the pool's address and an enrollment token: the static
// gpupool files found in DIR (`make static` names them gpupool-<version>-linux-<arch>), their
// SHA256SUMS, the install script embedded in this binary (install_script(), from
// ops/install/install.sh), and `ca.pem` when the admin put the pool's CA certificate there.
//
// Rules (every byte of a request is hostile; what is in DIR is the admin's):
// - A file is served only when its name is one of those above (is_dist_name: a fixed pattern, no
//   '/', no "..", nothing else) and it was a regular file when the coordinator started: DIR is
//   read once, at start-up, through a descriptor; each file is opened beneath it with O_NOFOLLOW
//   (util::open_beneath), so a link in DIR is never followed (it is skipped, with a warning).
// - SHA256SUMS and each file's SHA-256 are computed once, at start-up, from the descriptor opened
//   then. A request opens the file again beneath DIR, without following links, and serves it only
//   when it is still the same file (device, inode, size, modification time): one replaced or
//   changed since start-up answers 503 (restart the coordinator to serve it), never bytes whose sum
//   is not the one published.
// - What a request gets is an open descriptor (the HTTP server streams it), never the file's bytes
//   read into memory.
// Failures at start-up (DIR missing, not a directory, unreadable) are Errors naming DIR (the
// coordinator does not start); a file that cannot be read is skipped with a warning. Thread-safe:
// immutable once made; open_file() may be called from any thread.
#pragma once

#include "core/util/result.hpp"
#include "core/util/tree_fd.hpp"

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace gpupool::coordinator {

// The name the pool's CA certificate has in DIR (optional; `admin enroll` pins it).
inline constexpr std::string_view k_dist_ca_name = "ca.pem";

class DistFiles {
public:
    struct File {
        std::string name;
        std::uint64_t size = 0;
        std::string sha256; // lowercase hex
        dev_t dev = 0;
        ino_t ino = 0;
        std::timespec mtime{};
    };

    // Reads DIR (see the rules). `warnings` gets one line per entry skipped.
    static Result<std::shared_ptr<const DistFiles>> open(const std::filesystem::path& dir,
                                                         std::vector<std::string>& warnings);

    // gpupool-<version>-linux-<arch> (version: digits, letters, '.', '+', '~', '_'; arch: letters,
    // digits, '_'), or ca.pem.
    static bool is_dist_name(std::string_view name);

    // Sorted by name.
    const std::vector<File>& files() const { return m_files; }
    const File* find(std::string_view name) const;
    // `sha256sum` format: "<hex>  <name>\n" per file, sorted by name.
    const std::string& sums() const { return m_sums; }
    const std::filesystem::path& dir() const { return m_dir; }

    // The file `name` opened for reading (O_NOFOLLOW, beneath DIR), or not_found (no such file
    // served) or unavailable (it changed since start-up).
    Result<util::UniqueFd> open_file(std::string_view name) const;

private:
    DistFiles() = default;
    std::filesystem::path m_dir;
    util::UniqueFd m_dir_fd;
    std::vector<File> m_files;
    std::string m_sums;
};

// The install script an owner runs (ops/install/install.sh, embedded at build time).
std::string_view install_script();

} // namespace gpupool::coordinator
