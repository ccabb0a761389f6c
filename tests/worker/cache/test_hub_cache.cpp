// The model cache's bookkeeping and layout on disk: model ids, the index, eviction, and that nothing found on
// disk leads a write outside the root. The downloader has its own tests (test_hub_fetch.cpp).
#include "tests/support.hpp"
#include "worker/cache/hub_cache.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_hub_cache {

using namespace gpupool;
using namespace gpupool::worker;
namespace fs = std::filesystem;

namespace {

const std::string k_commit_a = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const std::string k_commit_b = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

// A blob name: one hex digit, 40 times.
std::string blob_name(char digit) {
    return std::string(40, digit);
}

// Puts a complete revision of `repo` on disk (one blob of `bytes` bytes behind config.json) and records it.
void put_model(HubCache& cache, const std::string& repo, std::int64_t bytes, std::int64_t last_used,
               const std::string& revision = "main", const std::string& commit = k_commit_a, char blob = '1') {
    const fs::path dir = cache.model_dir(repo);
    fs::create_directories(dir / "blobs");
    test::write_file(dir / "blobs" / blob_name(blob), std::string(static_cast<std::size_t>(bytes), 'x'));
    REQUIRE(link_snapshot(dir, commit, {{"config.json", blob_name(blob)}}));
    REQUIRE(write_ref(dir, revision, commit));
    REQUIRE(cache.record({repo, revision, commit, bytes, last_used}));
}

std::vector<std::string> repos(const HubCache& cache) {
    std::vector<std::string> out;
    for (const auto& m : cache.list()) {
        out.push_back(m.repo);
    }
    return out;
}

} // namespace

TEST_CASE("model refs: org/name with an optional @revision", "[hub-cache]") {
    struct Case {
        std::string id;
        std::string repo;
        std::string revision;
    };
    const std::vector<Case> ok = {
        {"org/name", "org/name", "main"},
        {"gpt2", "gpt2", "main"},
        {"Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct", "main"},
        {"org/name@v1.0", "org/name", "v1.0"},
        {"org/name@refs/pr/1", "org/name", "refs/pr/1"},
        {"org/name@" + k_commit_a, "org/name", k_commit_a},
    };
    for (const auto& c : ok) {
        INFO(c.id);
        auto m = parse_model_ref(c.id);
        REQUIRE(m);
        CHECK(m->repo == c.repo);
        CHECK(m->revision == c.revision);
        CHECK(m->id() == (c.revision == "main" ? c.repo : c.id));
    }
    const std::vector<std::string> bad = {"",
                                          "org/",
                                          "/name",
                                          "org/name/extra",
                                          "org/na me",
                                          "../name",
                                          "org--x/name",
                                          "org/na..me",
                                          "org/name@",
                                          "org/name@../x",
                                          "org/name@a..b",
                                          "org/name@a//b",
                                          "org/name@/a",
                                          "org/name@a/",
                                          "org/name@a/./b",
                                          "org/name@a b",
                                          "org/name@x@y",
                                          "org/name@a\\b",
                                          "org/name@" + std::string(129, 'a')};
    for (const auto& id : bad) {
        INFO(id);
        auto m = parse_model_ref(id);
        REQUIRE_FALSE(m);
        CHECK(m.error().code == ErrorCode::invalid_input);
    }
    CHECK(parse_model_ref("org/name@" + std::string(128, 'a')));
    CHECK(model_folder_name("org/name") == "models--org--name");
    CHECK(model_folder_name("gpt2") == "models--gpt2");
}

TEST_CASE("file names from the hub must stay inside the snapshot", "[hub-cache]") {
    for (const std::string& ok :
         std::vector<std::string>{"config.json", "a/b/c.bin", ".gitattributes", "onnx/model.onnx_data", "a..b"}) {
        INFO(ok);
        CHECK(check_rfilename(ok));
    }
    for (const std::string& bad : std::vector<std::string>{
             "", "../../etc/passwd", "/abs", "a/../../b", "..", ".", "a/./b", "a//b", "a/", "a\\b",
             std::string("a\0b", 3), "a\nb", "a\x7f", std::string(1025, 'a'), std::string(256, 'a') + "/b"}) {
        INFO(bad);
        CHECK_FALSE(check_rfilename(bad));
    }
    CHECK(check_rfilename(std::string(255, 'a') + "/" + std::string(255, 'b')));
}

TEST_CASE("a recorded model is listed, found, and survives a new HubCache", "[hub-cache]") {
    test::TempDir tmp;
    const fs::path root = tmp.path() / "root";
    {
        HubCache cache(root, 0);
        CHECK(cache.root() == root);
        CHECK(cache.hub_dir() == root / "hub");
        CHECK(fs::is_directory(root / "hub"));
        CHECK(cache.list().empty());
        CHECK_FALSE(cache.has({"org/b", "main"}));
        put_model(cache, "org/b", 100, 5);
        put_model(cache, "org/a", 200, 7);
        CHECK(cache.has({"org/b", "main"}));
        CHECK_FALSE(cache.has({"org/b", "v2"}));
        CHECK(cache.used_bytes() == 300);
    }
    HubCache again(root, 0);
    const auto models = again.list();
    REQUIRE(models.size() == 2);
    CHECK(models[0] == CachedModel{"org/a", "main", k_commit_a, 200, 7}); // sorted by repo
    CHECK(models[1] == CachedModel{"org/b", "main", k_commit_a, 100, 5});
    CHECK(again.used_bytes() == 300);
    CHECK(again.has({"org/a", "main"}));
    CHECK(test::slurp(again.model_dir("org/a") / "refs" / "main") == k_commit_a); // no newline

    // A snapshot deleted by hand is no longer complete.
    fs::remove_all(again.model_dir("org/a") / "snapshots");
    CHECK_FALSE(again.has({"org/a", "main"}));
}

TEST_CASE("revisions sharing blobs count their bytes once", "[hub-cache]") {
    test::TempDir tmp;
    HubCache cache(tmp.path(), 0);
    put_model(cache, "org/a", 1000, 1, "main", k_commit_a, '1');
    put_model(cache, "org/a", 1000, 2, "v1", k_commit_b, '1'); // the same blob
    REQUIRE(cache.list().size() == 2);
    CHECK(cache.used_bytes() == 1000);
    put_model(cache, "org/a", 500, 3, "v2", k_commit_b, '2');
    CHECK(cache.used_bytes() == 1500);
    CHECK(cache.list()[0].last_used_ms == 3);
}

TEST_CASE("record refuses bad models and models without a snapshot", "[hub-cache]") {
    test::TempDir tmp;
    HubCache cache(tmp.path(), 0);
    CHECK_FALSE(cache.record({"../x", "main", k_commit_a, 1, 1}));
    CHECK_FALSE(cache.record({"org/a", "a//b", k_commit_a, 1, 1}));
    CHECK_FALSE(cache.record({"org/a", "main", "ABC", 1, 1}));
    auto missing = cache.record({"org/a", "main", k_commit_a, 1, 1});
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ErrorCode::not_found);
    CHECK(cache.list().empty());
}

TEST_CASE("an unreadable index is replaced by an empty one, never a crash", "[hub-cache]") {
    test::TempDir tmp;
    const fs::path root = tmp.path() / "root";
    {
        HubCache cache(root, 0);
        put_model(cache, "org/a", 10, 1);
    }
    const std::vector<std::string> unreadable = {
        "{not json",
        "",
        "[]",
        R"({"version": 1})",
        R"({"version": 99, "models": []})",
        R"({"version": 1, "models": [{"repo": "../x", "disk_bytes": 1, "last_used_ms": 1, "revisions": [)"
        R"({"revision": "main", "commit": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bytes": 1}]}]})",
        R"({"version": 1, "models": [{"repo": "org/a", "disk_bytes": "x", "last_used_ms": 1, "revisions": []}]})",
        R"({"version": 1, "models": [{"repo": "org/a", "disk_bytes": 1, "last_used_ms": 1, "revisions": [)"
        R"({"revision": "main", "commit": "zz", "bytes": 1}]}]})",
    };
    for (const auto& garbage : unreadable) {
        INFO(garbage);
        test::write_file(root / "models.json", garbage);
        HubCache cache(root, 0);
        CHECK(cache.list().empty());
        CHECK_FALSE(cache.has({"org/a", "main"}));
        CHECK(cache.used_bytes() == 0);
    }
    // A folder where the index should be.
    fs::remove(root / "models.json");
    fs::create_directory(root / "models.json");
    CHECK(HubCache(root, 0).list().empty());
    fs::remove(root / "models.json");

    // Recording again writes a good index.
    HubCache cache(root, 0);
    REQUIRE(cache.record({"org/a", "main", k_commit_a, 10, 1}));
    CHECK(HubCache(root, 0).has({"org/a", "main"}));
}

TEST_CASE("eviction removes the least recently used models first, and touch() counts as use", "[hub-cache]") {
    test::TempDir tmp;
    HubCache cache(tmp.path(), 3000);
    CHECK(cache.cap_bytes() == 3000);
    put_model(cache, "x/a", 1000, 1);
    put_model(cache, "x/b", 1000, 2);
    put_model(cache, "x/c", 1000, 3);
    cache.touch({"x/a", "main"}, 10); // order of use now: b (2), c (3), a (10)

    // used 3000 + need 1000 > 3000: one model goes, the least recently used.
    CHECK(cache.evict_for(1000, {}) == std::vector<std::string>{"x/b"});
    CHECK_FALSE(fs::exists(cache.model_dir("x/b")));
    CHECK(repos(cache) == std::vector<std::string>{"x/a", "x/c"});
    CHECK(cache.used_bytes() == 2000);

    CHECK(cache.evict_for(1000, {}).empty()); // 2000 + 1000 fits
    // 2000 + 2500 > 3000: c then a.
    CHECK(cache.evict_for(2500, {}) == std::vector<std::string>{"x/c", "x/a"});
    CHECK(cache.list().empty());
    CHECK(HubCache(tmp.path(), 3000).list().empty()); // the index says so too
}

TEST_CASE("pinned models are never evicted", "[hub-cache]") {
    test::TempDir tmp;
    HubCache cache(tmp.path(), 3000);
    put_model(cache, "x/a", 1000, 1);
    put_model(cache, "x/b", 1000, 2);
    put_model(cache, "x/c", 1000, 3);
    CHECK(cache.evict_for(3000, {"x/a", "x/b", "x/c"}).empty());
    CHECK(cache.list().size() == 3);
    // Were b and c to go, 1000 + 3000 would still be over the cap: nothing goes.
    CHECK(cache.evict_for(3000, {"x/a"}).empty());
    CHECK(cache.list().size() == 3);
    // a is the oldest but pinned: b and c go to make room for 2000.
    CHECK(cache.evict_for(2000, {"x/a"}) == std::vector<std::string>{"x/b", "x/c"});
    CHECK(repos(cache) == std::vector<std::string>{"x/a"});
    CHECK(fs::exists(cache.model_dir("x/a") / "blobs"));
}

TEST_CASE("a cap of 0 never evicts", "[hub-cache]") {
    test::TempDir tmp;
    HubCache cache(tmp.path(), 0);
    put_model(cache, "x/a", 1000, 1);
    CHECK(cache.evict_for(std::int64_t{1} << 50, {}).empty());
    CHECK(cache.has({"x/a", "main"}));
    CHECK(cache.free_bytes() > 0);
}

TEST_CASE("links and refs replace symlinks planted on disk instead of following them", "[hub-cache]") {
    test::TempDir tmp;
    const fs::path outside = tmp.path() / "outside";
    fs::create_directories(outside);
    HubCache cache(tmp.path() / "root", 0);
    const fs::path dir = cache.model_dir("org/a");
    fs::create_directories(dir / "snapshots" / k_commit_a);
    // A folder of the snapshot, the refs folder and a snapshot file, each a symlink to outside the root.
    fs::create_directory_symlink(outside, dir / "snapshots" / k_commit_a / "sub");
    fs::create_directory_symlink(outside, dir / "refs");
    fs::create_symlink(outside / "victim", dir / "snapshots" / k_commit_a / "config.json");
    test::write_file(outside / "victim", "keep me");

    REQUIRE(link_snapshot(dir, k_commit_a, {{"config.json", blob_name('1')}, {"sub/x/model.bin", blob_name('2')}}));
    REQUIRE(write_ref(dir, "refs/pr/1", k_commit_a));
    CHECK(test::slurp(outside / "victim") == "keep me");
    CHECK(std::distance(fs::directory_iterator(outside), fs::directory_iterator()) == 1); // only the victim
    CHECK(fs::read_symlink(dir / "snapshots" / k_commit_a / "config.json") == "../../blobs/" + blob_name('1'));
    CHECK(fs::is_directory(fs::symlink_status(dir / "snapshots" / k_commit_a / "sub")));
    CHECK(fs::read_symlink(dir / "snapshots" / k_commit_a / "sub/x/model.bin") ==
          "../../../../blobs/" + blob_name('2'));
    CHECK(fs::is_directory(fs::symlink_status(dir / "refs")));
    CHECK(test::slurp(dir / "refs/refs/pr/1") == k_commit_a);
    // A revision that is its commit has no ref file, as huggingface_hub does it.
    REQUIRE(write_ref(dir, k_commit_a, k_commit_a));
    CHECK_FALSE(fs::exists(dir / "refs" / k_commit_a));
    // Names that would leave the snapshot are refused there too.
    CHECK_FALSE(link_snapshot(dir, k_commit_a, {{"../../../escape", blob_name('1')}}));
    CHECK_FALSE(link_snapshot(dir, k_commit_a, {{"ok", "../../x"}}));
    CHECK_FALSE(fs::exists(tmp.path() / "escape"));
}

TEST_CASE("the cache may be read while it is written", "[hub-cache]") {
    test::TempDir tmp;
    HubCache cache(tmp.path(), 1 << 20);
    put_model(cache, "x/a", 10, 1);
    std::atomic<bool> done{false};
    std::thread reader([&] {
        while (!done) {
            (void)cache.list();
            (void)cache.has({"x/a", "main"});
            (void)cache.used_bytes();
        }
    });
    for (int i = 0; i < 10; ++i) {
        cache.touch({"x/a", "main"}, i);
        REQUIRE(cache.record({"x/a", "main", k_commit_a, 10, i}));
    }
    done = true;
    reader.join();
    CHECK(cache.list().at(0).last_used_ms == 9);
}

} // namespace test_hub_cache
} // namespace
