// util/claimed_dir.hpp: a directory of this process's own under a shared parent, and the sweep of
// what processes that are gone (killed with SIGKILL here, for real) left there.
#include "core/util/claimed_dir.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_claimed_dir {

using namespace gpupool;
namespace fs = std::filesystem;

mode_t mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

std::size_t entries(const fs::path& dir) {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) {
        ++n;
    }
    return n;
}

// A child process that claims a directory under `parent`, writes a file in it, tells us the file's
// path through a pipe, and waits to be killed.
struct Claimant {
    pid_t pid = -1;
    fs::path file;

    explicit Claimant(const fs::path& parent) {
        int fds[2];
        REQUIRE(::pipe(fds) == 0);
        pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::close(fds[0]);
            auto dir = util::ClaimedDir::claim(parent);
            std::string path = dir ? (dir->path() / "gpupool-body-half").string() : "";
            if (dir) {
                std::ofstream(path) << "half an upload";
            }
            path += '\n';
            [[maybe_unused]] auto n = ::write(fds[1], path.data(), path.size());
            ::pause();
            ::_exit(0);
        }
        ::close(fds[1]);
        std::string line;
        char c = 0;
        while (::read(fds[0], &c, 1) == 1 && c != '\n') {
            line += c;
        }
        ::close(fds[0]);
        file = line;
    }

    void kill_hard() {
        REQUIRE(::kill(pid, SIGKILL) == 0);
        int status = 0;
        REQUIRE(::waitpid(pid, &status, 0) == pid);
        CHECK(WIFSIGNALED(status));
        pid = -1;
    }

    ~Claimant() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

TEST_CASE("claimed dir: made under a new private parent, removed with its owner", "[util][spool]") {
    test::TempDir tmp;
    const fs::path parent = tmp.path() / "spool";
    fs::path mine;
    {
        std::size_t swept = 99;
        auto dir = util::ClaimedDir::claim(parent, &swept);
        REQUIRE(dir);
        CHECK(swept == 0);
        CHECK(mode_of(parent) == 0700);
        mine = dir->path();
        CHECK(mine.parent_path() == parent);
        CHECK(mine.filename().string().starts_with("owned-"));
        std::ofstream(mine / "gpupool-body-x") << "bytes";
        // Moved, it is still one directory, removed once.
        util::ClaimedDir moved = std::move(*dir);
        CHECK(moved.path() == mine);
        CHECK(fs::exists(mine / "gpupool-body-x"));
    }
    CHECK_FALSE(fs::exists(mine));
    CHECK(fs::is_empty(parent));
}

TEST_CASE("claimed dir: a killed owner's directory is removed by the next claim, a live one's is kept",
          "[util][spool]") {
    test::TempDir tmp;
    const fs::path parent = tmp.path() / "spool";
    Claimant dead(parent);
    Claimant alive(parent);
    REQUIRE(fs::exists(dead.file));
    REQUIRE(fs::exists(alive.file));
    dead.kill_hard();
    CHECK(fs::exists(dead.file)); // nothing removes it by itself

    std::size_t swept = 0;
    auto mine = util::ClaimedDir::claim(parent, &swept);
    REQUIRE(mine);
    CHECK(swept == 1);
    CHECK_FALSE(fs::exists(dead.file.parent_path()));
    CHECK(fs::exists(alive.file)); // its owner holds its lock
    CHECK(entries(parent) == 2);

    // Claims in one process do not sweep each other either (each holds its own lock).
    std::size_t again = 7;
    auto second = util::ClaimedDir::claim(parent, &again);
    REQUIRE(second);
    CHECK(again == 0);
    CHECK(fs::exists(mine->path()));
    CHECK(entries(parent) == 3);
}

TEST_CASE("claimed dir: an interrupted claim is swept only when stale, and a planted link is not followed",
          "[util][spool]") {
    test::TempDir tmp;
    const fs::path parent = tmp.path() / "spool";
    fs::create_directory(parent);
    fs::permissions(parent, fs::perms::owner_all, fs::perm_options::replace);
    fs::create_directory(parent / "claiming-old000");
    fs::create_directory(parent / "claiming-new000");
    fs::last_write_time(parent / "claiming-old000", fs::file_time_type::clock::now() - std::chrono::hours(2));
    // Someone's directory elsewhere, behind a link named like a dead claim: neither it nor what it
    // holds may go.
    const fs::path elsewhere = tmp.path() / "elsewhere";
    fs::create_directory(elsewhere);
    std::ofstream(elsewhere / "precious") << "keep";
    fs::create_directory_symlink(elsewhere, parent / "owned-link00");

    std::size_t swept = 0;
    auto dir = util::ClaimedDir::claim(parent, &swept);
    REQUIRE(dir);
    CHECK(swept == 1);
    CHECK_FALSE(fs::exists(parent / "claiming-old000"));
    CHECK(fs::exists(parent / "claiming-new000"));
    CHECK(fs::is_symlink(parent / "owned-link00"));
    CHECK(fs::exists(elsewhere / "precious"));
    CHECK_FALSE(fs::exists(elsewhere / ".lock"));
}

TEST_CASE("claimed dir: a parent others could write in, or a link, is refused by name", "[util][spool]") {
    test::TempDir tmp;
    SECTION("writable by others") {
        const fs::path parent = tmp.path() / "open";
        fs::create_directory(parent);
        fs::permissions(parent, fs::perms::all, fs::perm_options::replace);
        auto dir = util::ClaimedDir::claim(parent);
        REQUIRE_FALSE(dir);
        CHECK(dir.error().code == ErrorCode::invalid_input);
        CHECK(dir.error().message == "refusing the spool directory " + parent.string() +
                                         ": group or others may write in it (mode 0777)");
    }
    SECTION("a symbolic link") {
        const fs::path real = tmp.path() / "real";
        fs::create_directory(real);
        fs::permissions(real, fs::perms::owner_all, fs::perm_options::replace);
        fs::create_directory_symlink(real, tmp.path() / "link");
        auto dir = util::ClaimedDir::claim(tmp.path() / "link");
        REQUIRE_FALSE(dir);
        CHECK(dir.error().message ==
              "refusing the spool directory " + (tmp.path() / "link").string() + ": it is a symbolic link");
        CHECK(fs::is_empty(real));
    }
    SECTION("another user's") {
        if (::geteuid() != 0) {
            WARN("skipped: giving the directory to another uid needs root");
            return;
        }
        const fs::path parent = tmp.path() / "theirs";
        fs::create_directory(parent);
        fs::permissions(parent, fs::perms::owner_all, fs::perm_options::replace);
        REQUIRE(::chown(parent.c_str(), 65534, 65534) == 0);
        auto dir = util::ClaimedDir::claim(parent);
        REQUIRE_FALSE(dir);
        CHECK(dir.error().message == "refusing the spool directory " + parent.string() +
                                         ": it belongs to uid 65534, not to this process's uid 0");
    }
}

TEST_CASE("claimed dir: the default parent is per user, under the temporary directory", "[util][spool]") {
    const fs::path p = util::default_spool_parent();
    CHECK(p.filename() == "gpupool-spool-" + std::to_string(::geteuid()));
}

} // namespace test_claimed_dir
} // namespace
