// util/tree_fd.hpp: acting inside a tree someone else writes, by descriptor, following no link.
#include "core/util/tree_fd.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_tree_fd {

using namespace gpupool;
namespace fs = std::filesystem;

namespace {

mode_t mode_of(const fs::path& p) {
    struct stat st{};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
}

int open_fds() {
    int n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator("/proc/self/fd")) {
        ++n;
    }
    return n;
}

// A tree (`tree/`) with links to a folder and a file outside it (`outside/`).
struct Planted {
    test::TempDir dir;
    fs::path tree = dir.path() / "tree";
    fs::path outside = dir.path() / "outside";
    fs::path secret = outside / "secret";
    Planted() {
        fs::create_directories(tree / "a" / "b");
        fs::create_directories(outside);
        dir.write("outside/secret", "keep me\n");
        fs::permissions(outside, fs::perms::owner_all);
        fs::permissions(secret, fs::perms::owner_read | fs::perms::owner_write);
        fs::create_directory_symlink(outside, tree / "dirlink");
        fs::create_directory_symlink(outside, tree / "a" / "b" / "deeplink");
        fs::create_symlink(secret, tree / "filelink");
        fs::create_hard_link(secret, tree / "a" / "hard");
    }
    void check_outside_intact() const {
        CHECK(fs::is_directory(fs::symlink_status(outside)));
        CHECK(mode_of(outside) == 0700);
        CHECK(mode_of(secret) == 0600);
        CHECK(read(secret) == "keep me\n");
    }
};

} // namespace

TEST_CASE("make_dir_at: a link in the folder's place is refused, or only the link replaced", "[util][tree_fd]") {
    Planted p;
    auto tree = util::open_dir(p.tree);
    REQUIRE(tree);
    auto refused = util::make_dir_at(tree->get(), "dirlink", 0700);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::invalid_input);
    CHECK(fs::is_symlink(p.tree / "dirlink"));

    auto made = util::make_dir_at(tree->get(), "dirlink", 0700, true);
    REQUIRE(made);
    CHECK(fs::is_directory(fs::symlink_status(p.tree / "dirlink")));
    REQUIRE(util::set_owner_and_mode(made->get(), std::nullopt, 0777, "dirlink"));
    CHECK(mode_of(p.tree / "dirlink") == 0777); // the folder itself, not the one the link named
    p.check_outside_intact();

    // A file where a folder belongs goes the same way; a new name is created; a path is refused.
    auto over_file = util::make_dir_at(tree->get(), "filelink", 0700, true);
    REQUIRE(over_file);
    CHECK(read(p.secret) == "keep me\n");
    CHECK(util::make_dir_at(tree->get(), "fresh", 0700));
    CHECK_FALSE(util::make_dir_at(tree->get(), "a/b", 0700));
    CHECK_FALSE(util::make_dir_at(tree->get(), "..", 0700));
}

TEST_CASE("open_beneath: no link on the way, no way out", "[util][tree_fd]") {
    Planted p;
    auto tree = util::open_dir(p.tree);
    REQUIRE(tree);
    CHECK_FALSE(util::open_beneath(tree->get(), "filelink", O_RDONLY));
    CHECK_FALSE(util::open_beneath(tree->get(), "dirlink/secret", O_RDONLY));
    CHECK_FALSE(util::open_beneath(tree->get(), "a/b/deeplink/secret", O_RDONLY));
    CHECK_FALSE(util::open_beneath(tree->get(), "../outside/secret", O_RDONLY));
    CHECK_FALSE(util::open_beneath(tree->get(), p.secret, O_RDONLY));
    auto hard = util::open_beneath(tree->get(), "a/hard", O_RDONLY);
    CHECK(hard); // a hard link is a file of the tree: what it shares is the tree owner's to read
    // The root itself must be a real folder.
    CHECK_FALSE(util::open_dir(p.tree / "dirlink"));
}

TEST_CASE("empty_dir and remove_entry remove the links, never what they name", "[util][tree_fd]") {
    Planted p;
    auto tree = util::open_dir(p.tree);
    REQUIRE(tree);
    REQUIRE(util::empty_dir(tree->get()));
    CHECK(fs::is_empty(p.tree));
    p.check_outside_intact();

    Planted q;
    REQUIRE(util::remove_tree(q.tree));
    CHECK_FALSE(fs::exists(fs::symlink_status(q.tree)));
    q.check_outside_intact();
    CHECK(util::remove_tree(q.tree)); // missing: nothing to do
}

TEST_CASE("a tree far deeper than the descriptors a removal holds", "[util][tree_fd]") {
    test::TempDir dir;
    const fs::path root = dir.path() / "deep";
    fs::create_directories(root);
    auto cur = util::open_dir(root);
    REQUIRE(cur);
    // 1,000 levels (far past PATH_MAX as one path), made by descriptor as a job could.
    for (int i = 0; i < 1000; ++i) {
        auto next = util::make_dir_at(cur->get(), "d" + std::to_string(i % 10), 0700);
        REQUIRE(next);
        cur = std::move(next);
    }
    REQUIRE(::symlinkat(dir.path().c_str(), cur->get(), "up") == 0);
    cur = Result<util::UniqueFd>(util::UniqueFd());
    const int before = open_fds();
    auto fd = util::open_dir(root);
    REQUIRE(fd);
    REQUIRE(util::empty_dir(fd->get()));
    CHECK(fs::is_empty(root));
    fd = Result<util::UniqueFd>(util::UniqueFd());
    CHECK(open_fds() == before);
    CHECK(fs::exists(dir.path()));
}

TEST_CASE("set_owner_and_mode changes the object behind the descriptor", "[util][tree_fd]") {
    test::TempDir dir;
    fs::create_directories(dir.path() / "d");
    auto fd = util::open_dir(dir.path() / "d");
    REQUIRE(fd);
    REQUIRE(util::set_owner_and_mode(fd->get(), std::nullopt, 0700, "d"));
    CHECK(mode_of(dir.path() / "d") == 0700);
    if (::geteuid() == 0) {
        REQUIRE(util::set_owner_and_mode(fd->get(), util::Owner{65534, 65534}, 0750, "d"));
        struct stat st{};
        REQUIRE(::stat((dir.path() / "d").c_str(), &st) == 0);
        CHECK(st.st_uid == 65534);
        CHECK(st.st_gid == 65534);
        CHECK((st.st_mode & 07777) == 0750);
    }
}

} // namespace test_tree_fd
} // namespace
