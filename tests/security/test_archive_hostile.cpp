// Hostile archives against unpack_archive(): a job's outputs reach the researcher's machine and a
// member's inputs reach the GPU owner's, so each side unpacks what the other made. Every case
// unpacks into sandbox/dest next to sandbox/canary/ and checks that nothing outside dest changed
// (the whole sandbox listed, links and file contents included, before and after).
#include "core/archive/archive.hpp"
#include "tests/security/tar_builder.hpp"
#include "tests/support.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_archive_hostile {

using namespace gpupool;
using test::make_tar;
using test::tar_dir;
using test::tar_file;
using test::tar_hardlink;
using test::tar_special;
using test::tar_symlink;
namespace fs = std::filesystem;

namespace {

// Everything under `root` except the subtree `skip`: each path with its type and, for files and
// links, content and target. Links are listed, never followed.
std::map<std::string, std::string> listing(const fs::path& root, const fs::path& skip) {
    std::map<std::string, std::string> out;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
        const fs::path& p = it->path();
        if (p == skip) {
            it.disable_recursion_pending();
            continue;
        }
        const auto st = fs::symlink_status(p);
        std::string what;
        if (fs::is_symlink(st)) {
            what = "link -> " + fs::read_symlink(p).string();
        } else if (fs::is_directory(st)) {
            what = "dir";
        } else {
            what = "file " + test::slurp(p);
        }
        out[p.lexically_relative(root).string()] = what + " perms " + std::to_string(static_cast<int>(st.permissions()));
    }
    return out;
}

// The links under `dir` (none should be there after a hostile archive, unless it says so).
std::vector<std::string> links_under(const fs::path& dir) {
    std::vector<std::string> out;
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
        if (it->is_symlink()) {
            out.push_back(it->path().lexically_relative(dir).string());
        }
    }
    return out;
}

struct Sandbox {
    test::TempDir root;
    fs::path dest = root.path() / "dest";
    fs::path canary = root.path() / "canary";
    std::map<std::string, std::string> before;

    Sandbox() {
        fs::create_directories(dest);
        fs::create_directories(canary);
        std::ofstream(canary / "victim") << "canary\n";
        std::ofstream(root.path() / "top.txt") << "top\n";
        before = outside();
    }
    std::map<std::string, std::string> outside() const { return listing(root.path(), dest); }
};

bool mentions(const std::vector<std::string>& skipped, const std::string& prefix) {
    return std::any_of(skipped.begin(), skipped.end(), [&](const std::string& s) { return s.rfind(prefix + ": ", 0) == 0; });
}

unsigned mode_of(const fs::path& p) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    return st.st_mode & 07777;
}

} // namespace

TEST_CASE("hostile archive: the link chain from the report (a/b -> .., a/b/.../L -> ../.., L/<absolute path>)",
          "[archive][security]") {
    Sandbox sb;
    // Enough "a/b/" hops (each one is dest itself through a/b -> ..) to climb to "/" from dest.
    const auto depth = static_cast<std::size_t>(std::distance(sb.dest.begin(), sb.dest.end()));
    std::string chain;
    std::string up;
    for (std::size_t i = 0; i < depth; ++i) {
        chain += "a/b/";
        up += "../";
    }
    const std::string through = "L" + sb.canary.string() + "/pwned";
    auto r = archive::unpack_archive(
        make_tar({tar_symlink("a/b", ".."), tar_symlink(chain + "L", up), tar_file(through, "pwned\n")}), sb.dest);
    REQUIRE(r);
    CHECK(sb.outside() == sb.before);
    CHECK_FALSE(fs::exists(sb.canary / "pwned"));
    CHECK(r->skipped.size() == 2);
    CHECK(mentions(r->skipped, "a/b"));
    CHECK(mentions(r->skipped, chain + "L"));
    CHECK(links_under(sb.dest).empty());
    // The file itself is harmless: it lands inside dest, under real directories.
    CHECK(test::slurp(sb.dest.string() + "/" + through) == "pwned\n");
}

TEST_CASE("hostile archive: a link whose target is lexically inside but resolves outside (x -> a/b/../..)",
          "[archive][security]") {
    Sandbox sb;
    const std::string through = "x/" + sb.root.path().filename().string() + "/canary/pwned";
    auto r = archive::unpack_archive(
        make_tar({tar_symlink("a/b", ".."), tar_symlink("x", "a/b/../.."), tar_file(through, "pwned\n")}), sb.dest);
    REQUIRE(r);
    CHECK(sb.outside() == sb.before);
    CHECK(mentions(r->skipped, "a/b"));
    CHECK(mentions(r->skipped, "x"));
    CHECK(links_under(sb.dest).empty());
}

TEST_CASE("hostile archive: absolute and upward links are skipped and reported", "[archive][security]") {
    Sandbox sb;
    auto r = archive::unpack_archive(make_tar({tar_symlink("abs", sb.canary.string()), tar_symlink("up", "../.."),
                                              tar_symlink("sub/up", "../x"), tar_symlink("empty", ""),
                                              tar_file("kept.txt", "kept")}),
                                    sb.dest);
    REQUIRE(r);
    CHECK(sb.outside() == sb.before);
    CHECK(r->written == std::vector<std::string>{"kept.txt"});
    CHECK(r->skipped.size() == 4);
    CHECK(mentions(r->skipped, "abs"));
    CHECK(mentions(r->skipped, "up"));
    CHECK(mentions(r->skipped, "sub/up"));
    CHECK(mentions(r->skipped, "empty"));
    CHECK(links_under(sb.dest).empty());
}

TEST_CASE("hostile archive: entry names that are absolute, hold .., or are too long fail the whole unpack",
          "[archive][security]") {
    std::string long_path;
    while (long_path.size() < 5000) {
        long_path += std::string(99, 'd') + "/";
    }
    long_path += "f";
    struct Case {
        std::string name;
        std::string expect;
    };
    Sandbox probe;
    const std::vector<Case> cases = {
        {probe.canary.string() + "/pwned", "absolute"},
        {"sub/../../canary/pwned", "\"..\""},
        {"../canary/pwned", "\"..\""},
        {"ok/..", "\"..\""},
        {std::string(300, 'c'), "longer than 255 bytes"},
        {long_path, "longer than 4096 bytes"},
    };
    for (const auto& c : cases) {
        Sandbox sb;
        INFO("entry " << c.name.substr(0, 80));
        auto r = archive::unpack_archive(make_tar({tar_file("before.txt", "b"), tar_file(c.name, "pwned\n")}), sb.dest);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::invalid_input);
        CHECK_THAT(r.error().message, Catch::Contains(c.name.substr(0, 60)) && Catch::Contains(c.expect));
        CHECK(sb.outside() == sb.before);
    }
}

TEST_CASE("hostile archive: a file written through a link the same archive created earlier", "[archive][security]") {
    SECTION("an absolute link is skipped, so the file lands in a real directory inside dest") {
        Sandbox sb;
        auto r = archive::unpack_archive(make_tar({tar_symlink("l", sb.canary.string()), tar_file("l/pwned", "x")}),
                                        sb.dest);
        REQUIRE(r);
        CHECK(sb.outside() == sb.before);
        CHECK(mentions(r->skipped, "l"));
        CHECK(fs::is_directory(fs::symlink_status(sb.dest / "l")));
        CHECK(test::slurp(sb.dest / "l" / "pwned") == "x");
    }
    SECTION("even a kept, downward link is never walked through: the entry is refused") {
        Sandbox sb;
        auto r = archive::unpack_archive(make_tar({tar_dir("sub"), tar_symlink("l", "sub"), tar_file("l/f", "x")}),
                                        sb.dest);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::invalid_input);
        CHECK_THAT(r.error().message, Catch::Contains("`l/f`") && Catch::Contains("link"));
        CHECK_FALSE(fs::exists(sb.dest / "sub" / "f"));
        CHECK(sb.outside() == sb.before);
    }
}

TEST_CASE("hostile archive: links already in dest are never followed", "[archive][security]") {
    SECTION("a file below a pre-existing link is refused") {
        Sandbox sb;
        fs::create_directory_symlink(sb.canary, sb.dest / "pre");
        auto r = archive::unpack_archive(make_tar({tar_file("pre/pwned", "x")}), sb.dest);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::invalid_input);
        CHECK_THAT(r.error().message, Catch::Contains("pre/pwned"));
        CHECK(sb.outside() == sb.before);
    }
    SECTION("a file over a pre-existing link replaces the link, not its target") {
        Sandbox sb;
        fs::create_symlink("../canary/victim", sb.dest / "victim");
        auto r = archive::unpack_archive(make_tar({tar_file("victim", "overwritten\n")}), sb.dest);
        REQUIRE(r);
        CHECK(sb.outside() == sb.before);
        CHECK(test::slurp(sb.canary / "victim") == "canary\n");
        CHECK(fs::is_regular_file(fs::symlink_status(sb.dest / "victim")));
        CHECK(test::slurp(sb.dest / "victim") == "overwritten\n");
    }
}

TEST_CASE("hostile archive: hard links, devices and fifos are skipped and reported", "[archive][security]") {
    Sandbox sb;
    auto r = archive::unpack_archive(make_tar({tar_file("inside.txt", "in"), tar_hardlink("h1", "/etc/passwd"),
                                              tar_hardlink("h2", "inside.txt"), tar_special("chr", AE_IFCHR),
                                              tar_special("blk", AE_IFBLK), tar_special("fifo", AE_IFIFO)}),
                                    sb.dest);
    REQUIRE(r);
    CHECK(sb.outside() == sb.before);
    CHECK(r->written == std::vector<std::string>{"inside.txt"});
    REQUIRE(r->skipped.size() == 5);
    for (const char* name : {"h1", "h2", "chr", "blk", "fifo"}) {
        INFO(name);
        CHECK(mentions(r->skipped, name));
        CHECK_FALSE(fs::exists(fs::symlink_status(sb.dest / name)));
    }
    CHECK_THAT(r->skipped[0], Catch::Contains("hard link to `/etc/passwd`"));
}

TEST_CASE("hostile archive: setuid, setgid and sticky bits are dropped, files are 0644 or 0755", "[archive][security]") {
    Sandbox sb;
    auto r = archive::unpack_archive(make_tar({tar_file("suid", "x", 04755), tar_file("sgid", "x", 02710),
                                              tar_file("sticky", "x", 01644), tar_file("private", "x", 0600)}),
                                    sb.dest);
    REQUIRE(r);
    CHECK(mode_of(sb.dest / "suid") == 0755);
    CHECK(mode_of(sb.dest / "sgid") == 0755);
    CHECK(mode_of(sb.dest / "sticky") == 0644);
    CHECK(mode_of(sb.dest / "private") == 0644);
}

TEST_CASE("hostile archive: duplicate names — a file after a link of its name replaces the link", "[archive][security]") {
    Sandbox sb;
    auto r = archive::unpack_archive(
        make_tar({tar_file("x", "first\n"), tar_file("inner", "inner\n"), tar_symlink("x", "inner"),
                  tar_file("x", "second\n"), tar_file("y", "first\n"), tar_symlink("y", (sb.canary / "victim").string()),
                  tar_file("y", "second\n")}),
        sb.dest);
    REQUIRE(r);
    CHECK(sb.outside() == sb.before);
    CHECK(test::slurp(sb.dest / "inner") == "inner\n");
    CHECK(fs::is_regular_file(fs::symlink_status(sb.dest / "x")));
    CHECK(test::slurp(sb.dest / "x") == "second\n");
    CHECK(test::slurp(sb.dest / "y") == "second\n");
    CHECK(mentions(r->skipped, "y"));
}

TEST_CASE("hostile archive: a sparse entry declaring more bytes than the archive holds is refused",
          "[archive][security]") {
    Sandbox sb;
    test::TarEntry bomb = tar_file("bomb", "x");
    bomb.sparse_size = std::int64_t{16} << 20; // 16 MiB of zeros from one byte of data
    const std::string tar = make_tar({tar_file("small.txt", "s"), bomb});
    REQUIRE(tar.size() < 64 * 1024);
    auto r = archive::unpack_archive(tar, sb.dest);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::invalid_input);
    CHECK_THAT(r.error().message, Catch::Contains("`bomb`") && Catch::Contains("16777216 bytes"));
    CHECK_FALSE(fs::exists(sb.dest / "bomb"));
    CHECK(sb.outside() == sb.before);

    // An explicit byte limit holds for plain files too.
    auto capped = archive::unpack_archive(make_tar({tar_file("f", std::string(100, 'f'))}), sb.dest,
                                         archive::UnpackLimits{10, 100});
    REQUIRE_FALSE(capped);
    CHECK_FALSE(fs::exists(sb.dest / "f"));
}

TEST_CASE("hostile archive: more entries than the limit fail the unpack", "[archive][security]") {
    Sandbox sb;
    std::vector<test::TarEntry> entries;
    for (int i = 0; i < 5; ++i) {
        entries.push_back(tar_file("f" + std::to_string(i), "x"));
    }
    const std::string tar = make_tar(entries);
    auto over = archive::unpack_archive(tar, sb.dest, archive::UnpackLimits{-1, 4});
    REQUIRE_FALSE(over);
    CHECK_THAT(over.error().message, Catch::Contains("more than 4 entries"));
    auto at = archive::unpack_archive(tar, sb.dest, archive::UnpackLimits{-1, 5});
    REQUIRE(at);
    CHECK(at->written.size() == 5);
}

TEST_CASE("archive: nested directories and a downward link round-trip through pack_outputs and unpack",
          "[archive][security]") {
    test::TempDir src;
    const fs::path out = src.path() / "out";
    fs::create_directories(out / "runs" / "1");
    fs::create_directories(out / "runs" / "2" / "plots");
    std::ofstream(out / "runs" / "1" / "metrics.json") << "{\"acc\": 0.8}\n";
    std::ofstream(out / "runs" / "2" / "metrics.json") << "{\"acc\": 0.9}\n";
    std::ofstream(out / "runs" / "2" / "plots" / "loss.png") << "png";
    fs::create_directory_symlink("runs/2", out / "latest");
    fs::create_symlink("runs/1/metrics.json", out / "first.json");
    fs::create_symlink("../secret", out / "runs" / "up");
    fs::create_symlink("/etc/passwd", out / "abs");
    const fs::path tar = src.path() / "o.tar";

    auto packed = archive::pack_outputs(out, {"."}, 1 << 20, tar);
    REQUIRE(packed);
    CHECK(packed->files == std::vector<std::string>{"first.json", "latest", "runs/1/metrics.json",
                                                    "runs/2/metrics.json", "runs/2/plots/loss.png"});
    REQUIRE(packed->skipped.size() == 2);
    CHECK(mentions(packed->skipped, "abs"));
    CHECK(mentions(packed->skipped, "runs/up"));

    Sandbox sb;
    auto r = archive::unpack_archive_file(tar, sb.dest);
    REQUIRE(r);
    CHECK(r->skipped.empty());
    CHECK(r->written == packed->files);
    CHECK(fs::read_symlink(sb.dest / "latest") == "runs/2");
    CHECK(test::slurp(sb.dest / "latest" / "plots" / "loss.png") == "png");
    CHECK(test::slurp(sb.dest / "first.json") == "{\"acc\": 0.8}\n");
    CHECK(sb.outside() == sb.before);
}

TEST_CASE("hostile archive: inputs the fuzzer found fail cleanly (tests/fuzz/archive_regressions)", "[archive][security]") {
    const fs::path dir = test::source_dir() / "tests" / "fuzz" / "archive_regressions";
    REQUIRE(fs::is_directory(dir));
    for (const auto& entry : fs::directory_iterator(dir)) {
        INFO(entry.path().filename().string());
        Sandbox sb;
        auto r = archive::unpack_archive(test::slurp(entry.path()), sb.dest);
        CHECK(sb.outside() == sb.before);
        if (entry.path().filename() == "null-error-string") {
            // libarchive fails without a message here; the old code built a std::string from null.
            REQUIRE_FALSE(r);
            CHECK_THAT(r.error().message, Catch::Contains("corrupt archive"));
        }
    }
}

} // namespace test_archive_hostile
} // namespace
