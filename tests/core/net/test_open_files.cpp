// The process's open-files limit (core/net/open_files.hpp): raised to the hard limit, and the
// connections a server may hold within it.
#include "core/net/open_files.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <sys/resource.h>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_open_files {

using namespace gpupool::net;

TEST_CASE("open files: the soft limit is raised to the hard one", "[open-files]") {
    rlimit saved{};
    REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
    if (saved.rlim_max == RLIM_INFINITY || saved.rlim_max <= 64) {
        SUCCEED("no finite hard limit above 64 to raise to");
        return;
    }
    rlimit low = saved;
    low.rlim_cur = 64; // below what a coordinator needs, as a login shell's 1024 is for a large pool
    REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);

    const OpenFilesLimit got = raise_open_files_limit();
    rlimit now{};
    getrlimit(RLIMIT_NOFILE, &now);
    setrlimit(RLIMIT_NOFILE, &saved);
    CHECK(got.before == 64);
    CHECK(got.hard == saved.rlim_max);
    CHECK(got.now == saved.rlim_max);
    CHECK(now.rlim_cur == saved.rlim_max);

    // Already at the hard limit: nothing changes.
    const OpenFilesLimit again = raise_open_files_limit();
    CHECK(again.before == again.now);
}

TEST_CASE("open files: a server's connections leave room for the database and uploads", "[open-files]") {
    CHECK(connections_within(20'000) == 20'000 - k_reserved_files); // this build machine's hard limit
    CHECK(connections_within(65'536) == 65'536 - k_reserved_files); // the systemd unit's LimitNOFILE
    CHECK(connections_within(1'024, 24) == 1'000);
    // Never none: a limit below the reserve still serves one connection (the log says the limit).
    CHECK(connections_within(100) == 1);
    CHECK(connections_within(k_reserved_files) == 1);
}

} // namespace test_open_files
} // namespace
