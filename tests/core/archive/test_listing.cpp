// The listing of an outputs archive (core/archive/listing.hpp): each file's size and SHA-256 read
// from the archive itself, one tree digest that ignores order and times, and a hostile archive
// refused rather than listed.
#include "core/archive/archive.hpp"
#include "core/archive/listing.hpp"
#include "core/util/sha256.hpp"
#include "tests/support.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <archive.h>
#include <archive_entry.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_listing {

using namespace gpupool;
namespace fs = std::filesystem;

// An archive of `entries` (name, content) in that order, written with libarchive directly.
fs::path raw_tar(const test::TempDir& dir, const std::string& file,
                 const std::vector<std::pair<std::string, std::string>>& entries) {
    const fs::path path = dir.path() / file;
    ::archive* a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    REQUIRE(archive_write_open_filename(a, path.c_str()) == ARCHIVE_OK);
    for (const auto& [name, content] : entries) {
        archive_entry* e = archive_entry_new();
        archive_entry_set_pathname(e, name.c_str());
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, static_cast<la_int64_t>(content.size()));
        archive_write_header(a, e);
        archive_write_data(a, content.data(), content.size());
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    return path;
}

TEST_CASE("listing: every file's size and SHA-256 come from the archive, links with their targets",
          "[archive][evidence]") {
    test::TempDir src;
    src.write("results.json", "{\"accuracy\": 0.91}\n");
    fs::create_directories(src.path() / "sub");
    src.write("sub/log.txt", std::string(200'000, 'x'));
    fs::create_symlink("results.json", src.path() / "latest.json");
    test::TempDir out;
    const fs::path tar = out.path() / "outputs.tar";
    REQUIRE(archive::pack_outputs(src.path(), {"."}, 10 << 20, tar));

    auto listing = archive::list_archive_file(tar);
    REQUIRE(listing);
    REQUIRE(listing->entries.size() == 3);
    CHECK(listing->entry_count == 3);
    CHECK_FALSE(listing->truncated());
    // Sorted by path.
    CHECK(listing->entries[0].path == "latest.json");
    CHECK(listing->entries[0].type == "link");
    CHECK(listing->entries[0].target == "results.json");
    CHECK(listing->entries[1].path == "results.json");
    CHECK(listing->entries[1].type == "file");
    CHECK(listing->entries[1].size == 19);
    CHECK(listing->entries[1].sha256 == *util::sha256_file_hex(src.path() / "results.json"));
    CHECK(listing->entries[2].path == "sub/log.txt");
    CHECK(listing->entries[2].size == 200'000);
    CHECK(listing->entries[2].sha256 == util::sha256_hex(std::string(200'000, 'x')));
    CHECK(listing->file_bytes == 200'019);
    CHECK(listing->tree_sha256.size() == 64);

    const auto j = archive::to_json(*listing);
    CHECK(j["entries"][1]["sha256"] == listing->entries[1].sha256);
    CHECK(j["entries"][0]["target"] == "results.json");
    CHECK(j["truncated"] == false);
}

TEST_CASE("listing: the tree digest is the same for the same files in any order, and changes with one byte",
          "[archive][evidence]") {
    test::TempDir dir;
    const auto a = raw_tar(dir, "a.tar", {{"x.txt", "one"}, {"y/z.txt", "two"}});
    const auto b = raw_tar(dir, "b.tar", {{"./y/z.txt", "two"}, {"x.txt", "one"}});
    const auto c = raw_tar(dir, "c.tar", {{"x.txt", "one"}, {"y/z.txt", "twO"}});
    const auto d = raw_tar(dir, "d.tar", {{"x.txt", "one"}, {"y/w.txt", "two"}});
    auto la = archive::list_archive_file(a);
    auto lb = archive::list_archive_file(b);
    auto lc = archive::list_archive_file(c);
    auto ld = archive::list_archive_file(d);
    REQUIRE(la);
    REQUIRE(lb);
    REQUIRE(lc);
    REQUIRE(ld);
    CHECK(la->tree_sha256 == lb->tree_sha256);
    CHECK(la->entries == lb->entries);
    CHECK(la->tree_sha256 != lc->tree_sha256); // one byte of one file
    CHECK(la->tree_sha256 != ld->tree_sha256); // the same bytes under another name
}

TEST_CASE("listing: a name written twice is listed once, as unpacking leaves it (the last copy)",
          "[archive][evidence]") {
    test::TempDir dir;
    const auto tar = raw_tar(dir, "t.tar", {{"r.txt", "first"}, {"r.txt", "second"}});
    auto l = archive::list_archive_file(tar);
    REQUIRE(l);
    REQUIRE(l->entries.size() == 1);
    CHECK(l->entries[0].sha256 == util::sha256_hex("second"));
}

TEST_CASE("listing: hostile or damaged archives are refused, not listed", "[archive][evidence]") {
    test::TempDir dir;
    for (const std::string name : {"../escape.txt", "/etc/passwd", "a/../../b"}) {
        INFO(name);
        const auto tar = raw_tar(dir, "h.tar", {{name, "x"}});
        auto l = archive::list_archive_file(tar);
        REQUIRE_FALSE(l);
        CHECK(l.error().code == ErrorCode::invalid_input);
    }
    const auto junk = dir.write("junk.tar", std::string("tar-bytes\0\1", 11));
    CHECK_FALSE(archive::list_archive_file(junk));
}

TEST_CASE("listing: past max_listed the entries are cut but the digest and counts cover every one",
          "[archive][evidence]") {
    test::TempDir dir;
    std::vector<std::pair<std::string, std::string>> many;
    for (int i = 0; i < 30; ++i) {
        many.emplace_back("f" + std::to_string(100 + i), std::to_string(i));
    }
    const auto tar = raw_tar(dir, "m.tar", many);
    archive::ListLimits limits;
    limits.max_listed = 10;
    auto cut = archive::list_archive_file(tar, limits);
    auto whole = archive::list_archive_file(tar);
    REQUIRE(cut);
    REQUIRE(whole);
    CHECK(cut->entries.size() == 10);
    CHECK(cut->entry_count == 30);
    CHECK(cut->truncated());
    CHECK(cut->tree_sha256 == whole->tree_sha256);
    limits.max_entries = 20;
    CHECK_FALSE(archive::list_archive_file(tar, limits));
}

TEST_CASE("listing: the whole file's SHA-256 comes in the same pass, listed or refused, bytes past the end too",
          "[archive][evidence]") {
    test::TempDir dir;
    const auto good = raw_tar(dir, "g.tar", {{"x.txt", "one"}, {"y.txt", std::string(300'000, 'y')}});
    {
        std::ofstream(good, std::ios::binary | std::ios::app) << "trailing bytes after the archive's end";
    }
    const auto hostile = raw_tar(dir, "h.tar", {{"ok.txt", "fine"}, {"../escape.txt", "x"}, {"z.txt", "more"}});
    const auto junk = dir.write("junk.tar", std::string("tar-bytes\0\1", 11));
    for (const auto& file : {good, hostile, junk}) {
        INFO(file);
        util::Sha256 whole;
        auto l = archive::list_archive_file(file, {}, &whole);
        CHECK(l.has_value() == (file == good));
        if (!l) {
            CHECK(l.error().code == ErrorCode::invalid_input);
        }
        CHECK(whole.hex() == *util::sha256_file_hex(file));
    }
    util::Sha256 none;
    auto missing = archive::list_archive_file(dir.path() / "absent.tar", {}, &none);
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ErrorCode::io);
}

// Limits that keep `*.json` texts of at most `file` bytes, `total` in all.
archive::ListLimits json_limits(std::int64_t file, std::int64_t total) {
    archive::ListLimits limits;
    limits.json_file_bytes = file;
    limits.json_total_bytes = total;
    return limits;
}

TEST_CASE("listing: small JSON files are kept with their exact text and nothing else is", "[archive][evidence]") {
    test::TempDir src;
    const std::string results = "{\"accuracy\": 0.91,\n \"note\": \"\\u00e9\\t\"}\r\n";
    src.write("results.json", results);
    src.write("sub/m.json", "[1]");
    src.write("log.txt", "{\"not\": \"kept\"}");
    src.write("results.json.bak", "{}");
    fs::create_symlink("results.json", src.path() / "latest.json");
    test::TempDir out;
    const fs::path tar = out.path() / "outputs.tar";
    REQUIRE(archive::pack_outputs(src.path(), {"."}, 10 << 20, tar));

    auto l = archive::list_archive_file(tar, json_limits(1024, 4096));
    REQUIRE(l);
    CHECK(l->json_texts == std::map<std::string, std::string>{{"results.json", results}, {"sub/m.json", "[1]"}});
    CHECK(l->json_skipped.empty()); // a link is not a file: neither kept nor skipped
    // The rest of the listing is the same as without keeping texts.
    auto plain = archive::list_archive_file(tar);
    REQUIRE(plain);
    CHECK(l->entries == plain->entries);
    CHECK(l->tree_sha256 == plain->tree_sha256);
    CHECK(plain->json_texts.empty()); // the defaults keep nothing
    CHECK(plain->json_skipped.empty());
}

TEST_CASE("listing: a JSON file over the per-file limit is skipped", "[archive][evidence]") {
    test::TempDir dir;
    const std::string at_limit = "[" + std::string(98, '1') + "]";   // 100 bytes
    const std::string over_limit = "[" + std::string(99, '1') + "]"; // 101 bytes
    const auto tar = raw_tar(dir, "t.tar", {{"big.json", over_limit}, {"edge.json", at_limit}});
    auto l = archive::list_archive_file(tar, json_limits(100, 10'000));
    REQUIRE(l);
    CHECK(l->json_texts == std::map<std::string, std::string>{{"edge.json", at_limit}});
    CHECK(l->json_skipped == std::vector<std::string>{"big.json"});
    // Its SHA-256 is listed, for the comparison that falls back to it.
    CHECK(l->entries[0].sha256 == util::sha256_hex(over_limit));
}

TEST_CASE("listing: JSON texts fit the total limit in path order whatever the archive's order", "[archive][evidence]") {
    test::TempDir dir;
    const std::string forty(40, ' ');
    const std::vector<std::pair<std::string, std::string>> files{
        {"a.json", forty}, {"b.json", forty}, {"c.json", forty}, {"d.json", "[1]"}, {"z.txt", forty}};
    auto reversed = files;
    std::reverse(reversed.begin(), reversed.end());
    for (const auto& order : {files, reversed}) {
        INFO(order.front().first);
        const auto tar = raw_tar(dir, "t.tar", order);
        auto l = archive::list_archive_file(tar, json_limits(100, 100));
        REQUIRE(l);
        // a and b: 80 bytes; c would make 120; from the first that does not fit on, none is kept
        // (d.json would fit, but whether it is kept would then depend on the archive's order).
        CHECK(l->json_texts == std::map<std::string, std::string>{{"a.json", forty}, {"b.json", forty}});
        CHECK(l->json_skipped == std::vector<std::string>{"c.json", "d.json"});
    }
    // Total 0: nothing is kept or skipped, as with the defaults.
    auto off = archive::list_archive_file(raw_tar(dir, "t.tar", files), json_limits(100, 0));
    REQUIRE(off);
    CHECK(off->json_texts.empty());
    CHECK(off->json_skipped.empty());
}

TEST_CASE("listing: a JSON text kept is the last copy of its name and UTF-8", "[archive][evidence]") {
    test::TempDir dir;
    const auto twice = raw_tar(dir, "t.tar", {{"r.json", "[1]"}, {"s.json", "[2]"}, {"r.json", "[3]"}});
    auto l = archive::list_archive_file(twice, json_limits(100, 100));
    REQUIRE(l);
    CHECK(l->json_texts == std::map<std::string, std::string>{{"r.json", "[3]"}, {"s.json", "[2]"}});
    // The last copy over the limit: the earlier one is not kept in its place.
    const auto grown = raw_tar(dir, "g.tar", {{"r.json", "[1]"}, {"r.json", "[" + std::string(200, '1') + "]"}});
    l = archive::list_archive_file(grown, json_limits(100, 1000));
    REQUIRE(l);
    CHECK(l->json_texts.empty());
    CHECK(l->json_skipped == std::vector<std::string>{"r.json"});
    // Not UTF-8, so not JSON: compared by its SHA-256.
    const auto binary = raw_tar(dir, "b.tar", {{"r.json", "[\"\xff\"]"}, {"u.json", "[\"\xc3\xa9\"]"}});
    l = archive::list_archive_file(binary, json_limits(100, 1000));
    REQUIRE(l);
    CHECK(l->json_texts == std::map<std::string, std::string>{{"u.json", "[\"\xc3\xa9\"]"}});
    CHECK(l->json_skipped == std::vector<std::string>{"r.json"});
}

} // namespace test_listing
} // namespace
