// libFuzzer entry point: any bytes through unpack_archive(), into a fresh sandbox for each input.
// Property checked beyond "no crash, no sanitizer report": nothing appears outside the destination.
// The destination is SANDBOX/inner/dest, so a write that climbs out of dest by any route (a "..",
// a link, a link chain) shows up as something new in SANDBOX/inner or SANDBOX, and aborts.
#include "core/archive/archive.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace fs = std::filesystem;

namespace {

// A fresh sandbox for one input (made and removed per input: libFuzzer does not run atexit handlers
// when it stops, so nothing may outlive the input but a crash's).
fs::path make_sandbox() {
    std::error_code ec;
    std::string pattern = (fs::temp_directory_path(ec) / "gpupool-archive-fuzz-XXXXXX").string();
    if (ec || ::mkdtemp(pattern.data()) == nullptr) {
        std::perror("archive_fuzzer: mkdtemp");
        std::abort();
    }
    return pattern;
}

// Aborts unless `dir` holds exactly one entry, `only`, a real directory (not a link to one).
void expect_only(const fs::path& dir, const fs::path& only) {
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path() != only) {
            std::fprintf(stderr, "archive_fuzzer: %s appeared outside the destination\n", entry.path().c_str());
            std::abort();
        }
    }
    if (!fs::is_directory(fs::symlink_status(only))) {
        std::fprintf(stderr, "archive_fuzzer: %s is no longer a real directory\n", only.c_str());
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const fs::path sandbox = make_sandbox();
    const fs::path inner = sandbox / "inner";
    const fs::path dest = inner / "dest";
    fs::create_directories(dest);
    gpupool::archive::UnpackLimits limits;
    limits.max_entries = 1000;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    (void)gpupool::archive::unpack_archive(bytes, dest, limits);
    expect_only(sandbox, inner);
    expect_only(inner, dest);
    std::error_code ec;
    fs::remove_all(sandbox, ec);
    if (ec) {
        std::fprintf(stderr, "archive_fuzzer: cannot clean %s: %s\n", sandbox.c_str(), ec.message().c_str());
        std::abort();
    }
    return 0;
}
