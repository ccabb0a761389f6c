// The model downloader against a hub served on loopback: real HTTP through libcurl, no mocks. FakeHub is a
// small Beast/Asio server that can answer Range requests, cut a body off midway, trickle it, redirect to a
// second server (the CDN for LFS files), and answers what a test tells it to for each target.
#include "core/util/sha256.hpp"
#include "tests/support.hpp"
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

using namespace gpupool;
using namespace gpupool::worker;
using namespace std::chrono_literals;
namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

// ---- FakeHub ----------------------------------------------------------------------------------------------

struct Seen {
    std::string target;
    std::string range;
    std::string authorization;
};

struct Reply {
    Reply() = default;
    Reply(int s, std::string b) : status(s), body(std::move(b)) {}
    static Reply redirect(std::string to) {
        Reply r;
        r.location = std::move(to);
        return r;
    }
    Reply& cut(std::int64_t at) {
        cut_at = at;
        return *this;
    }
    Reply& slowly() {
        trickle = true;
        return *this;
    }
    Reply& without_ranges() {
        ranges = false;
        return *this;
    }

    int status = 200;
    std::string body;
    std::string location;     // answer 302 to here
    std::int64_t cut_at = -1; // send this many body bytes, then close (once)
    bool trickle = false;     // the body in 64 KiB pieces, 20 ms apart
    bool ranges = true;       // honour Range (else answer 200 and the whole body)
};

class FakeHub {
public:
    FakeHub() : m_acceptor(m_ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
        m_port = m_acceptor.local_endpoint().port();
        m_thread = std::thread([this] { accept_loop(); });
    }
    ~FakeHub() {
        m_stopping = true;
        boost::system::error_code ec;
        tcp::socket wake(m_ioc);
        wake.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), m_port), ec);
        m_thread.join();
        std::vector<std::thread> connections;
        {
            std::lock_guard lock(m_mu);
            for (int fd : m_fds) {
                ::shutdown(fd, SHUT_RDWR);
            }
            connections.swap(m_connections);
        }
        for (auto& t : connections) {
            t.join();
        }
    }
    FakeHub(const FakeHub&) = delete;
    FakeHub& operator=(const FakeHub&) = delete;

    std::string url() const { return "http://127.0.0.1:" + std::to_string(m_port); }
    void set(const std::string& target, Reply r) {
        std::lock_guard lock(m_mu);
        m_replies[target] = std::move(r);
    }
    std::vector<Seen> seen() const {
        std::lock_guard lock(m_mu);
        return m_seen;
    }
    // The requests whose target starts with `prefix`.
    std::vector<Seen> seen(const std::string& prefix) const {
        std::vector<Seen> out;
        for (auto& s : seen()) {
            if (s.target.starts_with(prefix)) {
                out.push_back(s);
            }
        }
        return out;
    }

private:
    void accept_loop() {
        while (true) {
            boost::system::error_code ec;
            tcp::socket s(m_ioc);
            m_acceptor.accept(s, ec);
            if (m_stopping || ec) {
                return;
            }
            s.set_option(tcp::no_delay(true), ec); // no Nagle wait between the header and the body
            std::lock_guard lock(m_mu);
            m_fds.insert(s.native_handle());
            m_connections.emplace_back([this, sock = std::move(s)]() mutable { serve(std::move(sock)); });
        }
    }

    void serve(tcp::socket s) {
        const int fd = s.native_handle();
        boost::beast::flat_buffer buffer;
        while (!m_stopping) {
            http::request<http::string_body> req;
            boost::system::error_code ec;
            http::read(s, buffer, req, ec);
            if (ec || !answer(s, req)) {
                break;
            }
        }
        {
            std::lock_guard lock(m_mu);
            m_fds.erase(fd);
        }
        boost::system::error_code ec;
        s.shutdown(tcp::socket::shutdown_both, ec);
        s.close(ec);
    }

    // Writes the answer; false: close the connection.
    bool answer(tcp::socket& s, const http::request<http::string_body>& req) {
        Seen seen{std::string(req.target()), std::string(req[http::field::range]),
                  std::string(req[http::field::authorization])};
        Reply r(404, R"({"error":"Repository not found"})");
        {
            std::lock_guard lock(m_mu);
            m_seen.push_back(seen);
            if (auto it = m_replies.find(seen.target); it != m_replies.end()) {
                r = it->second;
                it->second.cut_at = -1; // cut once
            }
        }
        int status = r.status;
        std::string body = r.body;
        std::string extra;
        if (!r.location.empty()) {
            status = 302;
            body.clear();
            extra = "Location: " + r.location + "\r\n";
        } else if (status == 200 && r.ranges && seen.range.starts_with("bytes=")) {
            const auto from = std::stoull(seen.range.substr(6));
            const std::string size = std::to_string(body.size());
            if (from >= body.size()) {
                status = 416;
                extra = "Content-Range: bytes */" + size + "\r\n";
                body.clear();
            } else {
                status = 206;
                extra = "Content-Range: bytes " + std::to_string(from) + "-" + std::to_string(body.size() - 1) + "/" +
                        size + "\r\n";
                body = body.substr(from);
            }
        }
        const std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
                                 "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + extra + "\r\n";
        boost::system::error_code ec;
        asio::write(s, asio::buffer(head), ec);
        if (r.cut_at >= 0) {
            asio::write(s, asio::buffer(body.data(), std::min(body.size(), static_cast<std::size_t>(r.cut_at))), ec);
            return false;
        }
        constexpr std::size_t k_piece = 64 * 1024;
        for (std::size_t at = 0; !ec && at < body.size(); at += k_piece) {
            asio::write(s, asio::buffer(body.data() + at, std::min(k_piece, body.size() - at)), ec);
            if (r.trickle) {
                std::this_thread::sleep_for(20ms);
            }
        }
        return !ec && !m_stopping;
    }

    static const char* reason(int status) {
        switch (status) {
        case 200:
            return "OK";
        case 206:
            return "Partial Content";
        case 302:
            return "Found";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 416:
            return "Range Not Satisfiable";
        default:
            return "Whatever";
        }
    }

    asio::io_context m_ioc;
    tcp::acceptor m_acceptor;
    std::uint16_t m_port = 0;
    std::thread m_thread;
    std::atomic<bool> m_stopping{false};
    mutable std::mutex m_mu;
    std::map<std::string, Reply> m_replies;
    std::vector<Seen> m_seen;
    std::vector<std::thread> m_connections;
    std::set<int> m_fds;
};

// ---- a tiny repository ------------------------------------------------------------------------------------

std::string git_blob_id(std::string_view content) {
    const std::string data = "blob " + std::to_string(content.size()) + std::string(1, '\0') + std::string(content);
    std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), digest.data(), &len, EVP_sha1(), nullptr);
    return util::to_hex(digest.data(), len);
}

std::string pseudo_random(std::size_t n) {
    std::string out(n, '\0');
    std::uint32_t x = 12345;
    for (auto& c : out) {
        x = x * 1664525u + 1013904223u;
        c = static_cast<char>(x >> 24);
    }
    return out;
}

const std::size_t k_big = 3 * 1024 * 1024 + 17;

// 3 MiB and a bit, made once.
const std::string& big_content() {
    static const std::string content = pseudo_random(k_big);
    return content;
}

struct RepoFile {
    RepoFile(std::string n, std::string c, bool is_lfs = false)
        : name(std::move(n)), content(std::move(c)), lfs(is_lfs),
          hash(lfs ? util::sha256_hex(content) : git_blob_id(content)) {}
    std::string name;
    std::string content;
    bool lfs = false;
    std::string hash;
    const std::string& blob() const { return hash; }
};

const std::string k_commit = "c0ffeec0ffeec0ffeec0ffeec0ffeec0ffeec0ff";
const std::string k_api = "/api/models/acme/tiny/revision/main?blobs=true";

struct TestRepo {
    std::vector<RepoFile> files = {
        {"config.json", R"({"model_type": "tiny"})"},
        {"model.safetensors", big_content(), true},
        {"tokenizer/vocab/vocab.txt", "a\nb\nc\n"},
        {"copy_of_config.json", R"({"model_type": "tiny"})"}, // the same blob as config.json
    };
    const RepoFile& file(const std::string& name) const {
        return *std::find_if(files.begin(), files.end(), [&](const RepoFile& f) { return f.name == name; });
    }
    nlohmann::json answer(const std::string& commit = k_commit) const {
        auto siblings = nlohmann::json::array();
        for (const auto& f : files) {
            nlohmann::json s = {{"rfilename", f.name}, {"size", f.content.size()}};
            if (f.lfs) {
                s["blobId"] = git_blob_id("version https://git-lfs.github.com/spec/v1\noid sha256:" + f.blob());
                s["lfs"] = {{"sha256", f.blob()}, {"size", f.content.size()}, {"pointerSize", 134}};
            } else {
                s["blobId"] = f.blob();
            }
            siblings.push_back(s);
        }
        return {{"id", "acme/tiny"}, {"sha", commit}, {"siblings", siblings}};
    }
    std::int64_t total_bytes() const {
        std::set<std::string> seen;
        std::int64_t sum = 0;
        for (const auto& f : files) {
            if (seen.insert(f.blob()).second) {
                sum += static_cast<std::int64_t>(f.content.size());
            }
        }
        return sum;
    }
    // The hub answers the API and the files; LFS files redirect to the CDN.
    void serve(FakeHub& hub, FakeHub& cdn, const std::string& api = k_api) const {
        hub.set(api, Reply(200, answer().dump()));
        for (const auto& f : files) {
            const std::string target = resolve(f.name);
            if (f.lfs) {
                hub.set(target, Reply::redirect(cdn.url() + "/lfs/" + f.blob()));
                cdn.set("/lfs/" + f.blob(), Reply(200, f.content));
            } else {
                hub.set(target, Reply(200, f.content));
            }
        }
    }
    static std::string resolve(const std::string& name) { return "/acme/tiny/resolve/" + k_commit + "/" + name; }
};

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
