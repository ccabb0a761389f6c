// Output and input archives: what is packed, the size cap's message, and an unpacker that cannot
// be made to write outside its directory.
#include "core/archive/archive.hpp"
#include "tests/support.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <memory>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_archive {

using namespace gpupool;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A tar with one entry of the given name (and link target), made with libarchive directly.
std::string tar_with(const std::string& name, const std::string& content, const std::string& symlink_to = {}) {
    std::string out(std::size_t{1} << 16, '\0');
    std::size_t used = 0;
    ::archive* a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_open_memory(a, out.data(), out.size(), &used);
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    if (symlink_to.empty()) {
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
    } else {
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, symlink_to.c_str());
    }
    archive_write_header(a, e);
    if (symlink_to.empty()) {
        archive_write_data(a, content.data(), content.size());
    }
    archive_entry_free(e);
    archive_write_close(a);
    archive_write_free(a);
    out.resize(used);
    return out;
}

} // namespace

TEST_CASE("archive: outputs matching the recipe's patterns round-trip, links are stored, not followed",
          "[archive]") {
    test::TempDir src;
    test::TempDir dst;
    fs::create_directories(src.path() / "out" / "plots");
    std::ofstream(src.path() / "out" / "metrics.json") << "{\"acc\": 0.9}\n";
    std::ofstream(src.path() / "out" / "plots" / "a.png") << "png";
    std::ofstream(src.path() / "out" / "scratch.tmp") << "junk";
    fs::create_symlink("/etc/passwd", src.path() / "out" / "sneaky");
    const auto tar = src.path() / "o.tar";

    auto some = archive::pack_outputs(src.path() / "out", {"*.json", "plots"}, 1 << 20, tar);
    REQUIRE(some);
    CHECK(some->files == std::vector<std::string>{"metrics.json", "plots/a.png"});

    auto all = archive::pack_outputs(src.path() / "out", {"."}, 1 << 20, tar);
    REQUIRE(all);
    CHECK(all->files.size() == 3); // the link out of the directory is left out, and said so
    REQUIRE(all->skipped.size() == 1);
    CHECK_THAT(all->skipped[0], Catch::StartsWith("sneaky: link to `/etc/passwd`"));
    auto unpacked = archive::unpack_archive(read_all(tar), dst.path());
    REQUIRE(unpacked);
    CHECK(read_all(dst.path() / "metrics.json") == "{\"acc\": 0.9}\n");
    CHECK(read_all(dst.path() / "plots" / "a.png") == "png");
    CHECK_FALSE(fs::exists(dst.path() / "sneaky")); // a link out of the directory is dropped
}

TEST_CASE("archive: over the cap, nothing is written and the message names sizes and the largest files",
          "[archive]") {
    test::TempDir src;
    std::ofstream(src.path() / "big.bin") << std::string(300 * 1024, 'x');
    std::ofstream(src.path() / "small.txt") << "s";
    const auto tar = src.path() / ".." / (src.path().filename().string() + ".tar");
    auto r = archive::pack_outputs(src.path(), {"."}, 100 * 1024, tar);
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "outputs.max_size");
    CHECK_THAT(r.error().message, Catch::Contains("over outputs.max_size 0.1 MiB") &&
                                      Catch::Contains("largest: big.bin (0.3 MiB)"));
    CHECK_FALSE(fs::exists(tar));
}

TEST_CASE("archive: small outputs are packed in memory, byte for byte as into a file, larger ones are left to the "
          "file",
          "[archive]") {
    test::TempDir src;
    test::TempDir dst;
    fs::create_directories(src.path() / "out" / "plots");
    std::ofstream(src.path() / "out" / "metrics.json") << "{\"acc\": 0.9}\n";
    std::ofstream(src.path() / "out" / "plots" / "a.png") << "png";
    fs::create_symlink("/etc/passwd", src.path() / "out" / "sneaky");

    auto small = archive::pack_small_outputs(src.path() / "out", {"."}, 1 << 20, 64 * 1024);
    REQUIRE(small);
    REQUIRE(*small);
    CHECK((*small)->packed.files == std::vector<std::string>{"metrics.json", "plots/a.png"});
    REQUIRE((*small)->packed.skipped.size() == 1); // the link out is left out and said, as into a file
    const auto tar = src.path() / "o.tar";
    REQUIRE(archive::pack_outputs(src.path() / "out", {"."}, 1 << 20, tar));
    CHECK((*small)->archive.size() == read_all(tar).size());
    auto unpacked = archive::unpack_archive((*small)->archive, dst.path());
    REQUIRE(unpacked);
    CHECK(read_all(dst.path() / "metrics.json") == "{\"acc\": 0.9}\n");
    CHECK(read_all(dst.path() / "plots" / "a.png") == "png");

    // Nothing written at all (the usual `true` job): a valid, empty archive.
    fs::create_directories(src.path() / "empty");
    auto none = archive::pack_small_outputs(src.path() / "empty", {"."}, 1 << 20, 64 * 1024);
    REQUIRE(none);
    REQUIRE(*none);
    CHECK((*none)->packed.files.empty());
    auto nothing = archive::unpack_archive((*none)->archive, dst.path() / "n");
    REQUIRE(nothing);
    CHECK(nothing->written.empty());

    // Past `small_bytes`: nullopt, for the file path; past the cap: the cap's error, naming the field.
    std::ofstream(src.path() / "out" / "big.bin") << std::string(100 * 1024, 'x');
    auto large = archive::pack_small_outputs(src.path() / "out", {"."}, 1 << 20, 64 * 1024);
    REQUIRE(large);
    CHECK_FALSE(*large);
    auto over = archive::pack_small_outputs(src.path() / "out", {"."}, 50 * 1024, 1 << 20);
    REQUIRE_FALSE(over);
    CHECK(over.error().field == "outputs.max_size");
}

TEST_CASE("archive: inputs are packed under their own names, directories whole", "[archive]") {
    test::TempDir src;
    test::TempDir dst;
    fs::create_directories(src.path() / "data" / "sub");
    std::ofstream(src.path() / "data" / "sub" / "x.csv") << "1,2\n";
    std::ofstream(src.path() / "prompt.txt") << "hi\n";
    const auto tar = dst.path() / "in.tar";
    auto r = archive::pack_paths({src.path() / "data", src.path() / "prompt.txt"}, 1 << 20, tar);
    REQUIRE(r);
    CHECK(r->files == std::vector<std::string>{"data/sub/x.csv", "prompt.txt"});
    test::TempDir work;
    REQUIRE(archive::unpack_archive(read_all(tar), work.path()));
    CHECK(read_all(work.path() / "data" / "sub" / "x.csv") == "1,2\n");
    auto big = archive::pack_paths({src.path()}, 10, tar);
    REQUIRE_FALSE(big);
    CHECK(big.error().field == "inputs.max_size");
}

TEST_CASE("archive: entries that would escape the destination are refused", "[archive]") {
    test::TempDir dst;
    auto dotdot = archive::unpack_archive(tar_with("../evil.txt", "x"), dst.path() / "d");
    REQUIRE_FALSE(dotdot);
    CHECK_THAT(dotdot.error().message, Catch::Contains("`../evil.txt`") && Catch::Contains("\"..\""));
    CHECK_FALSE(fs::exists(dst.path() / "evil.txt"));
    auto absolute = archive::unpack_archive(tar_with("/tmp/evil.txt", "x"), dst.path() / "d");
    REQUIRE_FALSE(absolute);
    auto link = archive::unpack_archive(tar_with("l", "", "../../etc"), dst.path() / "d");
    REQUIRE(link);
    CHECK_FALSE(fs::exists(fs::symlink_status(dst.path() / "d" / "l")));
    CHECK(link->skipped.size() == 1);
    auto garbage = archive::unpack_archive(std::string(1000, 'z'), dst.path() / "d");
    CHECK_FALSE(garbage);
}

} // namespace test_archive
} // namespace
