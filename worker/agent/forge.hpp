// TEST ONLY: a worker that lies, so that the spot checks (core/verify/spot_check.hpp) can be tested
// against the real binary (tests/cli/test_spot_check_cli.cpp). Never set it on a real pool.
//
// GPUPOOL_TEST_FORGE=RATE:SEED (RATE in [0, 1], SEED an unsigned integer) makes the worker forge
// each job that exits 0 with probability RATE: one draw of a std::mt19937_64 seeded with SEED per
// such job, in the order the jobs end (so a worker that runs one job at a time forges the same jobs
// every time). A forged job's output files are overwritten with k_forged_text before they are
// packed and uploaded; the job is reported as it ended (exit 0). Unset or empty: nothing is forged.
// A value that does not parse is an Error naming the variable (the worker does not start).
//
// Forging acts on a job's output tree, which the job can write and plant links in (docs/security.md,
// "Jobs against the owner's machine"): the walk opens the outputs folder with util::open_dir and each
// subfolder with util::open_beneath (no link is followed), at most k_forge_depth deep; only regular
// files are opened (fstatat without following), with O_NOFOLLOW | O_NOCTTY | O_NONBLOCK, and one is
// overwritten only when its descriptor is still a regular file with a single link (a hard link to a
// file elsewhere is skipped, never truncated). Modes are never changed: a file the worker may not
// write is skipped. Not thread-safe: the agent thread owns it.
#pragma once

#include "core/util/result.hpp"
#include "core/util/tree_fd.hpp"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace gpupool::worker {

inline constexpr const char* k_test_forge_env = "GPUPOOL_TEST_FORGE";
inline constexpr std::string_view k_forged_text = "forged by a lying worker\n";
inline constexpr int k_forge_depth = 8;

class TestForge {
public:
    TestForge(double rate, std::uint64_t seed, std::string rate_text)
        : m_rate(rate), m_rng(seed), m_rate_text(std::move(rate_text)) {}
    // One draw, for a job that just exited 0: whether to forge it. 53 bits, the same on every library.
    bool draw() { return static_cast<double>(m_rng() >> 11) * 0x1.0p-53 < m_rate; }
    const std::string& rate_text() const { return m_rate_text; } // RATE as the variable gave it

private:
    double m_rate;
    std::mt19937_64 m_rng;
    std::string m_rate_text;
};

// GPUPOOL_TEST_FORGE, parsed (nullopt when unset or empty).
inline Result<std::optional<TestForge>> test_forge_from_env() {
    const char* raw = std::getenv(k_test_forge_env);
    if (raw == nullptr || *raw == '\0') {
        return std::optional<TestForge>();
    }
    const std::string value = raw;
    const auto bad = [&] {
        return invalid_input(std::string(k_test_forge_env) + "=`" + value +
                                 "`: expected RATE:SEED, RATE in [0, 1] and SEED an unsigned integer (a test-only "
                                 "setting that makes the worker forge results)",
                             k_test_forge_env);
    };
    const auto colon = value.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == value.size()) {
        return bad();
    }
    const char* begin = value.data();
    const char* end = begin + value.size();
    double rate = -1;
    std::uint64_t seed = 0;
    const auto r = std::from_chars(begin, begin + colon, rate);
    const auto s = std::from_chars(begin + colon + 1, end, seed);
    if (r.ec != std::errc() || r.ptr != begin + colon || !(rate >= 0.0 && rate <= 1.0) || s.ec != std::errc() ||
        s.ptr != end) {
        return bad();
    }
    return std::optional<TestForge>(TestForge(rate, seed, value.substr(0, colon)));
}

namespace forge_detail {

// The names in the directory behind `fd`, read whole before anything is written.
inline std::vector<std::string> names_in(int fd) {
    std::vector<std::string> names;
    const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    DIR* dir = copy < 0 ? nullptr : ::fdopendir(copy);
    if (dir == nullptr) {
        if (copy >= 0) {
            ::close(copy);
        }
        return names;
    }
    while (const dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") {
            names.push_back(name);
        }
    }
    ::closedir(dir);
    return names;
}

// Overwrites `name` in `at` with k_forged_text when it is a regular file with one link; true if it did.
inline bool forge_file(int at, const std::string& name) {
    util::UniqueFd fd(::openat(at, name.c_str(), O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
    struct stat st {};
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 ||
        ::ftruncate(fd.get(), 0) != 0) {
        return false;
    }
    return ::write(fd.get(), k_forged_text.data(), k_forged_text.size()) == static_cast<ssize_t>(k_forged_text.size());
}

inline int forge_tree(int dir, int depth) {
    int forged = 0;
    for (const auto& name : names_in(dir)) {
        struct stat st {};
        if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
            continue;
        }
        if (S_ISDIR(st.st_mode) && depth < k_forge_depth) {
            if (auto sub = util::open_beneath(dir, name, O_RDONLY | O_DIRECTORY)) {
                forged += forge_tree(sub->get(), depth + 1);
            }
        } else if (S_ISREG(st.st_mode) && forge_file(dir, name)) {
            ++forged;
        }
    }
    return forged;
}

} // namespace forge_detail

// Overwrites the regular files of a job's output folder (see the rules above); how many it overwrote.
inline int forge_outputs(const std::filesystem::path& outputs) {
    auto root = util::open_dir(outputs);
    return root ? forge_detail::forge_tree(root->get(), 0) : 0;
}

} // namespace gpupool::worker
