// The model downloader against a hub served on loopback: real HTTP through libcurl, no mocks. FakeHub is a
// small Beast/Asio server that can answer Range requests, cut a body off midway, trickle it, redirect to a
// second server (the CDN for LFS files), and answers what a test tells it to for each target.
#include "core/util/sha256.hpp"
#include "tests/support.hpp"
#include "tests/worker/cache/fake_hub.hpp"
#include "worker/cache/hub_fetch.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <sys/socket.h>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_hub_fetch {

using namespace gpupool;
using namespace gpupool::worker;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

using namespace gpupool::test::hub;

namespace {

struct Fixture {
    test::TempDir tmp;
    FakeHub hub;
    FakeHub cdn;
    TestRepo repo;
    std::unique_ptr<HubCache> cache = std::make_unique<HubCache>(tmp.path() / "root", 0);
    HubOptions options;

    Fixture() {
        repo.serve(hub, cdn);
        options.endpoint = hub.url() + "/";
        options.token = "secret-token";
        options.connect_timeout = 2s;
        options.stall_timeout = 5s;
    }
    Status fetch(const std::string& id = "acme/tiny", const std::function<bool(const FetchProgress&)>& progress = {},
                 const std::set<std::string>& pinned = {}) {
        HubFetcher fetcher(options, *cache);
        auto ref = parse_model_ref(id);
        REQUIRE(ref);
        return fetcher.fetch(*ref, pinned, progress, 1000);
    }
    fs::path model_dir() const { return cache->model_dir("acme/tiny"); }
    fs::path blob(const std::string& name) const { return model_dir() / "blobs" / repo.file(name).blob(); }
    fs::path partial(const std::string& name) const {
        return model_dir() / "blobs" / (repo.file(name).blob() + ".incomplete");
    }
    // Requests for the files' bytes, on both servers.
    std::size_t file_requests() const { return hub.seen("/acme/tiny/resolve/").size() + cdn.seen("/lfs/").size(); }
};

} // namespace

TEST_CASE("a fetched model is laid out as huggingface_hub lays it out", "[hub-fetch]") {
    Fixture fx;
    std::vector<FetchProgress> reports;
    REQUIRE(fx.fetch("acme/tiny", [&](const FetchProgress& p) {
        reports.push_back(p);
        return true;
    }));
    const fs::path dir = fx.model_dir();
    CHECK(dir == fx.tmp.path() / "root/hub/models--acme--tiny");
    CHECK(test::slurp(dir / "refs/main") == k_commit);
    // Blobs are named by their hash: SHA-256 for the LFS file, the git blob id for others; one per content.
    CHECK(fx.repo.file("model.safetensors").blob().size() == 64);
    for (const auto& f : fx.repo.files) {
        INFO(f.name);
        const fs::path link = dir / "snapshots" / k_commit / f.name;
        REQUIRE(fs::is_symlink(fs::symlink_status(link)));
        CHECK(test::slurp(link) == f.content);
        CHECK(fs::equivalent(link, dir / "blobs" / f.blob()));
    }
    CHECK(fs::read_symlink(dir / "snapshots" / k_commit / "config.json") ==
          "../../blobs/" + fx.repo.file("config.json").blob());
    CHECK(fs::read_symlink(dir / "snapshots" / k_commit / "tokenizer/vocab/vocab.txt") ==
          "../../../../blobs/" + fx.repo.file("tokenizer/vocab/vocab.txt").blob());
    CHECK(std::distance(fs::directory_iterator(dir / "blobs"), fs::directory_iterator()) == 3); // no .incomplete

    CHECK(fx.cache->has({"acme/tiny", "main"}));
    REQUIRE(fx.cache->list().size() == 1);
    CHECK(fx.cache->list()[0] == CachedModel{"acme/tiny", "main", k_commit, fx.repo.total_bytes(), 1000});
    CHECK(fx.cache->used_bytes() == fx.repo.total_bytes());
    CHECK(HubCache(fx.tmp.path() / "root", 0).has({"acme/tiny", "main"}));

    REQUIRE_FALSE(reports.empty());
    for (std::size_t i = 1; i < reports.size(); ++i) {
        CHECK(reports[i].done_bytes >= reports[i - 1].done_bytes);
    }
    CHECK(reports.back().done_bytes == fx.repo.total_bytes());
    CHECK(reports.back().total_bytes == fx.repo.total_bytes());
    CHECK(fx.file_requests() == 4); // 3 blobs, one through a redirect
}

TEST_CASE("a second fetch of a complete model downloads nothing", "[hub-fetch]") {
    Fixture fx;
    REQUIRE(fx.fetch());
    const auto files = fx.file_requests();
    const auto api = fx.hub.seen("/api/").size();
    REQUIRE(fx.fetch());
    CHECK(fx.file_requests() == files);
    CHECK(fx.hub.seen("/api/").size() == api + 1);
}

TEST_CASE("a transfer cut off midway is resumed with a Range request", "[hub-fetch]") {
    Fixture fx;
    const auto& big = fx.repo.file("model.safetensors");
    const std::int64_t cut = 1024 * 1024 + 123;
    fx.cdn.set("/lfs/" + big.blob(), Reply(200, big.content).cut(cut));
    REQUIRE(fx.fetch());
    const auto cdn = fx.cdn.seen("/lfs/");
    REQUIRE(cdn.size() == 2);
    CHECK(cdn[0].range.empty());
    CHECK(cdn[1].range == "bytes=" + std::to_string(cut) + "-");
    CHECK(util::sha256_file_hex(fx.blob("model.safetensors")).value() == big.blob());
    CHECK_FALSE(fs::exists(fx.partial("model.safetensors")));
}

TEST_CASE("cancelling from progress keeps the partial blob, and the next fetch resumes it", "[hub-fetch]") {
    Fixture fx;
    const auto& big = fx.repo.file("model.safetensors");
    fx.cdn.set("/lfs/" + big.blob(), Reply(200, big.content).slowly());
    const auto cancelled = fx.fetch("acme/tiny", [](const FetchProgress& p) { return p.done_bytes < 512 * 1024; });
    REQUIRE_FALSE(cancelled);
    CHECK(is_fetch_cancelled(cancelled.error()));
    CHECK_FALSE(fx.cache->has({"acme/tiny", "main"}));
    REQUIRE(fs::exists(fx.partial("model.safetensors")));
    const auto kept = fs::file_size(fx.partial("model.safetensors"));
    CHECK(kept > 0);
    CHECK(kept < k_big);

    fx.cdn.set("/lfs/" + big.blob(), Reply(200, big.content));
    REQUIRE(fx.fetch());
    CHECK(fx.cdn.seen("/lfs/").back().range == "bytes=" + std::to_string(kept) + "-");
    CHECK(test::slurp(fx.blob("model.safetensors")) == big.content);
    CHECK(fx.cache->has({"acme/tiny", "main"}));
}

TEST_CASE("a partial blob is started again when the hub answers 200 to a Range request", "[hub-fetch]") {
    Fixture fx;
    const auto& cfg = fx.repo.file("config.json");
    fs::create_directories(fx.model_dir() / "blobs");
    test::write_file(fx.partial("config.json"), "garbage"); // 7 bytes that are not the file's first ones
    fx.hub.set(TestRepo::resolve("config.json"), Reply(200, cfg.content).without_ranges());
    REQUIRE(fx.fetch());
    CHECK(fx.hub.seen(TestRepo::resolve("config.json")).back().range == "bytes=7-");
    CHECK(test::slurp(fx.blob("config.json")) == cfg.content);
    CHECK(fx.cache->has({"acme/tiny", "main"}));
}

TEST_CASE("a damaged blob is fetched again, and a wrong size declared for a good blob is refused", "[hub-fetch]") {
    Fixture fx;
    REQUIRE(fx.fetch());
    const auto& cfg = fx.repo.file("config.json");
    test::write_file(fx.blob("config.json"), "short");
    REQUIRE(fx.fetch());
    CHECK(test::slurp(fx.blob("config.json")) == cfg.content);
    CHECK(fx.hub.seen(TestRepo::resolve("config.json")).size() == 2);

    auto j = fx.repo.answer();
    j["siblings"][0]["size"] = j["siblings"][3]["size"] = 5; // the blob's name is its hash, and that has 22 bytes
    fx.hub.set(k_api, Reply(200, j.dump()));
    const auto r = fx.fetch();
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "size");
    CHECK(test::slurp(fx.blob("config.json")) == cfg.content);
    CHECK(fx.hub.seen(TestRepo::resolve("config.json")).size() == 2);
}

TEST_CASE("content that does not match its hash is refused, naming the file and both hashes", "[hub-fetch]") {
    Fixture fx;
    SECTION("a git file") {
        const auto& cfg = fx.repo.file("config.json");
        std::string bad = cfg.content;
        bad[3] = 'X';
        fx.hub.set(TestRepo::resolve("config.json"), Reply(200, bad));
        const auto r = fx.fetch();
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message,
                   Catch::Contains("config.json") && Catch::Contains(cfg.blob()) && Catch::Contains(git_blob_id(bad)));
        CHECK_FALSE(fs::exists(fx.blob("config.json")));
        CHECK_FALSE(fs::exists(fx.partial("config.json")));
    }
    SECTION("an LFS file") {
        const auto& big = fx.repo.file("model.safetensors");
        std::string bad = big.content;
        bad[k_big / 2] ^= 1;
        fx.cdn.set("/lfs/" + big.blob(), Reply(200, bad));
        const auto r = fx.fetch();
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("model.safetensors") && Catch::Contains(big.blob()) &&
                                          Catch::Contains(util::sha256_hex(bad)));
        CHECK_FALSE(fs::exists(fx.blob("model.safetensors")));
        CHECK_FALSE(fs::exists(fx.partial("model.safetensors")));
    }
    SECTION("more bytes than declared") {
        fx.hub.set(TestRepo::resolve("config.json"), Reply(200, fx.repo.file("config.json").content + "tail"));
        const auto r = fx.fetch();
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains("more than"));
        CHECK(fs::file_size(fx.partial("config.json")) == 0);
    }
    CHECK_FALSE(fx.cache->has({"acme/tiny", "main"}));
}

TEST_CASE("the token goes to the hub and never to the host:port a redirect leads to", "[hub-fetch]") {
    Fixture fx;
    REQUIRE(fx.fetch());
    const auto hub = fx.hub.seen();
    REQUIRE(hub.size() == 4); // the API, two git files and the LFS redirect
    for (const auto& s : hub) {
        INFO(s.target);
        CHECK(s.authorization == "Bearer secret-token");
    }
    const auto cdn = fx.cdn.seen();
    REQUIRE(cdn.size() == 1);
    CHECK(cdn[0].authorization.empty());
}

TEST_CASE("gated, private and missing models say what to do", "[hub-fetch]") {
    Fixture fx;
    fx.hub.set(k_api, Reply(401, R"({"error":"Access to model acme/tiny is restricted."})"));
    auto r = fx.fetch();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::unauthorized);
    CHECK_THAT(r.error().message, Catch::Contains("gated") && Catch::Contains("hf_token_file"));

    fx.hub.set(k_api, Reply(403, "{}"));
    r = fx.fetch();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::forbidden);

    r = fx.fetch("acme/missing");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::not_found);
    CHECK_THAT(r.error().message, Catch::Contains("acme/missing"));

    // A gated model whose listing is public but whose files are not.
    fx.repo.serve(fx.hub, fx.cdn);
    fx.hub.set(TestRepo::resolve("config.json"), Reply(403, "{}"));
    r = fx.fetch();
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::forbidden);
    CHECK_THAT(r.error().message, Catch::Contains("config.json") && Catch::Contains("hf_token_file"));
    CHECK(fx.cache->list().empty());
}

TEST_CASE("malformed and hostile answers are refused, naming the field, and nothing is written", "[hub-fetch]") {
    Fixture fx;
    fx.options.max_files = 4;
    struct Case {
        std::string body;
        std::string field;
    };
    const auto with = [&](const std::function<void(nlohmann::json&)>& change) {
        auto j = fx.repo.answer();
        change(j);
        return j.dump();
    };
    const auto name = [&](std::string n) {
        return with([n](nlohmann::json& j) { j["siblings"][1]["rfilename"] = n; });
    };
    const std::vector<Case> cases = {
        {"not json{", ""},
        {"[]", ""},
        {with([](auto& j) { j.erase("sha"); }), "sha"},
        {with([](auto& j) { j["sha"] = "C0FFEEC0FFEEC0FFEEC0FFEEC0FFEEC0FFEEC0FF"; }), "sha"},
        {with([](auto& j) { j["id"] = 7; }), "id"},
        {with([](auto& j) { j["siblings"] = "all"; }), "siblings"},
        {with([](auto& j) { j["siblings"][0] = 1; }), "siblings[0]"},
        {name("../../etc/passwd"), "siblings[1].rfilename"},
        {name("/abs"), "siblings[1].rfilename"},
        {name("a/../../b"), "siblings[1].rfilename"},
        {name("a\\b"), "siblings[1].rfilename"},
        {name("a//b"), "siblings[1].rfilename"},
        {name(std::string("a\x01") + "b"), "siblings[1].rfilename"},
        {name(std::string(1025, 'a')), "siblings[1].rfilename"},
        {with([](auto& j) { j["siblings"][2].erase("rfilename"); }), "siblings[2].rfilename"},
        {with([](auto& j) { j["siblings"][0]["blobId"] = "ABC"; }), "siblings[0].blobId"},
        {with([](auto& j) { j["siblings"][1]["lfs"]["sha256"] = "abc"; }), "siblings[1].lfs.sha256"},
        {with([](auto& j) { j["siblings"][1]["lfs"]["size"] = 5; }), "siblings[1].lfs.size"},
        {with([](auto& j) { j["siblings"][0]["size"] = -1; }), "siblings[0].size"},
        {with([](auto& j) { j["siblings"][0]["size"] = 1.5; }), "siblings[0].size"},
        {with([](auto& j) { j["siblings"][0]["size"] = "22"; }), "siblings[0].size"},
        {with([](auto& j) { j["siblings"][3]["rfilename"] = "config.json"; }), "siblings[3].rfilename"},
        {with([](auto& j) { j["siblings"][3]["rfilename"] = "config.json/x"; }), "siblings[3].rfilename"},
        {with([](auto& j) { j["siblings"].push_back(j["siblings"][0]); }), "siblings"},
        {with([](auto& j) { j["siblings"][1]["size"] = j["siblings"][1]["lfs"]["size"] = 1LL << 41; }),
         "siblings[1].size"},
    };
    for (const auto& c : cases) {
        INFO(c.body.substr(0, 300));
        fx.hub.set(k_api, Reply(200, c.body));
        const auto r = fx.fetch();
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::invalid_input);
        CHECK(r.error().field == c.field);
    }
    fx.options.max_model_bytes = k_big + 10; // each file fits, together they do not
    fx.hub.set(k_api, Reply(200, fx.repo.answer().dump()));
    const auto r = fx.fetch();
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "siblings");

    CHECK(fx.file_requests() == 0);
    CHECK_FALSE(fs::exists(fx.model_dir()));
    std::vector<fs::path> top;
    for (const auto& e : fs::directory_iterator(fx.tmp.path())) {
        top.push_back(e.path().filename());
    }
    CHECK(top == std::vector<fs::path>{"root"});
}

TEST_CASE("revisions: a tag writes its ref, a commit none, and a branch with / is escaped", "[hub-fetch]") {
    Fixture fx;
    fx.repo.serve(fx.hub, fx.cdn, "/api/models/acme/tiny/revision/v1.0?blobs=true");
    fx.repo.serve(fx.hub, fx.cdn, "/api/models/acme/tiny/revision/refs%2Fpr%2F1?blobs=true");
    fx.repo.serve(fx.hub, fx.cdn, "/api/models/acme/tiny/revision/" + k_commit + "?blobs=true");
    REQUIRE(fx.fetch("acme/tiny@v1.0"));
    REQUIRE(fx.fetch("acme/tiny@refs/pr/1"));
    REQUIRE(fx.fetch("acme/tiny@" + k_commit));
    CHECK(test::slurp(fx.model_dir() / "refs/v1.0") == k_commit);
    CHECK(test::slurp(fx.model_dir() / "refs/refs/pr/1") == k_commit);
    CHECK_FALSE(fs::exists(fx.model_dir() / "refs" / k_commit));
    CHECK(fx.cache->list().size() == 3);
    CHECK(fx.cache->has({"acme/tiny", k_commit}));
    CHECK_FALSE(fx.cache->has({"acme/tiny", "main"}));
    CHECK(fx.file_requests() == 4); // the blobs once

    // A commit asked for must be the commit answered.
    const std::string other(40, 'd');
    fx.repo.serve(fx.hub, fx.cdn, "/api/models/acme/tiny/revision/" + other + "?blobs=true");
    const auto r = fx.fetch("acme/tiny@" + other);
    REQUIRE_FALSE(r);
    CHECK(r.error().field == "sha");
}

TEST_CASE("an index that was lost makes a model missing, and fetching it again downloads nothing", "[hub-fetch]") {
    Fixture fx;
    REQUIRE(fx.fetch());
    const auto files = fx.file_requests();
    test::write_file(fx.tmp.path() / "root/models.json", "{\"version\": 1, \"models\": [");
    fx.cache = std::make_unique<HubCache>(fx.tmp.path() / "root", 0);
    CHECK_FALSE(fx.cache->has({"acme/tiny", "main"}));
    REQUIRE(fx.fetch());
    CHECK(fx.cache->has({"acme/tiny", "main"}));
    CHECK(fx.file_requests() == files);
}

TEST_CASE("space: eviction makes room under the cap, pinned models and a full disk are errors", "[hub-fetch]") {
    Fixture fx;
    const fs::path root = fx.tmp.path() / "root";
    fx.cache = std::make_unique<HubCache>(root, fx.repo.total_bytes() + 1000);
    // An older model of 2000 bytes: the cap cannot hold both.
    const fs::path old = fx.cache->model_dir("old/model");
    fs::create_directories(old / "blobs");
    test::write_file(old / "blobs" / std::string(40, '1'), std::string(2000, 'x'));
    REQUIRE(link_snapshot(old, std::string(40, 'e'), {{"w.bin", std::string(40, '1')}}));
    REQUIRE(fx.cache->record({"old/model", "main", std::string(40, 'e'), 2000, 1}));

    SECTION("the old model is evicted") {
        REQUIRE(fx.fetch());
        CHECK_FALSE(fs::exists(old));
        CHECK(fx.cache->list().size() == 1);
        CHECK(fx.cache->has({"acme/tiny", "main"}));
    }
    SECTION("a pinned model stays, and the fetch says the cap is short") {
        const auto r = fx.fetch("acme/tiny", {}, {"old/model"});
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::unavailable);
        CHECK_THAT(r.error().message, Catch::Contains("cap"));
        CHECK(fs::exists(old));
        CHECK(fx.file_requests() == 0);
    }
    SECTION("more than the disk has free") {
        fx.cache = std::make_unique<HubCache>(root, 0);
        fx.options.max_model_bytes = std::int64_t{1} << 60;
        auto j = fx.repo.answer();
        j["siblings"][1]["size"] = j["siblings"][1]["lfs"]["size"] = std::int64_t{1} << 55; // 32 PiB
        fx.hub.set(k_api, Reply(200, j.dump()));
        const auto r = fx.fetch();
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::unavailable);
        CHECK_THAT(r.error().message, Catch::Contains("not enough disk space"));
        CHECK(fx.file_requests() == 0);
        CHECK(fs::exists(old)); // no cap: nothing evicted
    }
}

TEST_CASE("git blob ids are git's", "[hub-fetch]") {
    test::TempDir tmp;
    // `printf 'hello\n' | git hash-object --stdin`
    CHECK(git_blob_sha1_file(tmp.write("h", "hello\n")).value() == "ce013625030ba8dba906f756967f9e9ca394464a");
    CHECK(git_blob_id("hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a");
    // `git hash-object /dev/null`
    CHECK(git_blob_sha1_file(tmp.write("e", "")).value() == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}

} // namespace test_hub_fetch
} // namespace
