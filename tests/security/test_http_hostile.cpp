// Hostile clients against the HTTP server and the coordinator's API: bodies sent without a token,
// trickled bodies, too many connections, deep JSON, numbers that would be truncated, another
// team's inputs, reused enrollment tokens. Each case is something an attacker with no token, a
// member token or an enrolled worker could do before these checks existed.
#include "core/net/http_server.hpp"
#include "core/util/token_secret.hpp"
#include "tests/core/coordinator/service_fixture.hpp"
#include "tests/core/net/net_support.hpp"
#include "tests/support.hpp"

#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

// The file's own scope: test files are compiled in unity batches (tests/CMakeLists.txt).
namespace {
namespace test_http_hostile {

using namespace gpupool;
using namespace gpupool::test::svc;
using gpupool::test::raw_request;
using gpupool::test::RawConnection;
using namespace std::chrono_literals;

namespace {

// A server with one POST route that admits only `X-Key: ok` and echoes the body's size, and one
// route whose body is spooled to a file.
struct Guarded {
    std::atomic<int> handled{0};
    std::mutex mutex;
    std::string spooled_path;
    std::string spooled_content;
    std::unique_ptr<net::HttpServer> server;
    boost::asio::io_context ioc;

    explicit Guarded(net::ServerOptions o = {}) {
        net::Router r;
        net::RouteOptions guarded;
        guarded.max_body_bytes = std::size_t{1} << 30;
        guarded.admit = [](const net::Request& head, net::Decide decide) {
            if (head.header("X-Key") == "ok") {
                decide(std::nullopt);
            } else {
                decide(net::json_error(401, "unauthorized", "no key"));
            }
        };
        r.add("POST", "/guarded", [this](net::Request req, net::Responder respond) {
            ++handled;
            respond(net::json_response(200, "{\"size\":" + std::to_string(req.body.size()) + "}"));
        }, guarded);
        net::RouteOptions spooled;
        spooled.max_body_bytes = std::size_t{1} << 30;
        spooled.body_to_file = true;
        r.add("PUT", "/upload", [this](net::Request req, net::Responder respond) {
            {
                std::lock_guard lock(mutex);
                spooled_path = req.body_file ? req.body_file->path().string() : "";
                spooled_content = req.body_file ? test::slurp(req.body_file->path()) : "";
            }
            respond(net::json_response(200, "{}"));
        }, spooled);
        o.host = "127.0.0.1";
        o.port = 0;
        server = std::make_unique<net::HttpServer>(o, std::move(r));
        REQUIRE(server->start());
    }
};

std::string headers_only(const std::string& method, const std::string& target, std::size_t length,
                         const std::string& extra = {}) {
    return method + " " + target + " HTTP/1.1\r\nHost: test\r\n" + extra +
           "Content-Length: " + std::to_string(length) + "\r\n\r\n";
}

} // namespace

TEST_CASE("hostile http: a refused request is answered before its body is read", "[security][net]") {
    Guarded g;
    RawConnection c(g.ioc, g.server->port());
    // 100 MB announced, nothing sent: the refusal must come from the headers alone.
    c.send(headers_only("POST", "/guarded", 100'000'000));
    auto r = c.read_response(3s);
    REQUIRE(r);
    CHECK(r->status == 401);
    CHECK_FALSE(r->keep_alive); // the body was never read: the connection cannot be reused
    CHECK(c.closed_by_peer(3s));
    CHECK(g.handled == 0);

    // With the key, the body is read and handled.
    RawConnection ok(g.ioc, g.server->port());
    ok.send(raw_request("POST", "/guarded", std::string(1000, 'x'), "X-Key: ok\r\n"));
    auto r2 = ok.read_response(3s);
    REQUIRE(r2);
    CHECK(r2->status == 200);
    CHECK(r2->body == "{\"size\":1000}");
    CHECK(g.handled == 1);
}

TEST_CASE("hostile http: an unknown path with a body is answered without reading it", "[security][net]") {
    Guarded g;
    RawConnection c(g.ioc, g.server->port());
    c.send(headers_only("POST", "/nope", 100'000'000));
    auto r = c.read_response(3s);
    REQUIRE(r);
    CHECK(r->status == 404);
    CHECK(c.closed_by_peer(3s));
    RawConnection m(g.ioc, g.server->port());
    m.send(headers_only("DELETE", "/guarded", 100'000'000));
    auto r2 = m.read_response(3s);
    REQUIRE(r2);
    CHECK(r2->status == 405);
}

TEST_CASE("hostile http: a body trickled below the minimum rate is cut off", "[security][net]") {
    net::ServerOptions o;
    o.min_body_rate = 1000; // bytes per second
    o.body_grace = 300ms;
    o.io_timeout = 10s; // each byte comes well within the stall timeout
    Guarded g(o);
    RawConnection c(g.ioc, g.server->port());
    c.send(headers_only("POST", "/guarded", 100'000, "X-Key: ok\r\n"));
    const auto t0 = std::chrono::steady_clock::now();
    bool closed = false;
    // 10 bytes every 100 ms is 100 B/s: the average falls behind 1000 B/s after the grace.
    for (int i = 0; i < 60 && !closed; ++i) {
        boost::system::error_code ec;
        boost::asio::write(c.socket(), boost::asio::buffer(std::string(10, 'y')), ec);
        closed = static_cast<bool>(ec);
        std::this_thread::sleep_for(100ms);
    }
    CHECK((closed || c.closed_by_peer(2s)));
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
    CHECK(g.handled == 0);
}

TEST_CASE("hostile http: connections from one address are capped", "[security][net]") {
    net::ServerOptions o;
    o.max_connections_per_client = 3;
    Guarded g(o);
    std::vector<std::unique_ptr<RawConnection>> held;
    for (int i = 0; i < 3; ++i) {
        held.push_back(std::make_unique<RawConnection>(g.ioc, g.server->port()));
    }
    REQUIRE(test::eventually([&] { return g.server->connection_count() == 3; }));
    RawConnection extra(g.ioc, g.server->port());
    CHECK(extra.closed_by_peer(3s));
    // The held ones still work, and a slot frees when one closes.
    held[0]->send(raw_request("POST", "/guarded", "abc", "X-Key: ok\r\n"));
    auto r = held[0]->read_response(3s);
    REQUIRE(r);
    CHECK(r->status == 200);
    held[1]->close();
    REQUIRE(test::eventually([&] { return g.server->connection_count() == 2; }));
    RawConnection again(g.ioc, g.server->port());
    again.send(raw_request("POST", "/guarded", "abc", "X-Key: ok\r\n"));
    auto r2 = again.read_response(3s);
    REQUIRE(r2);
    CHECK(r2->status == 200);
}

// PUT /upload with `body` on a new connection: the answer's status (0: no answer in 3 s).
int upload(Guarded& g, const std::string& body) {
    RawConnection c(g.ioc, g.server->port());
    c.send(raw_request("PUT", "/upload", body));
    auto r = c.read_response(3s);
    return r ? r->status : 0;
}

// Request bodies spooled under `spool` (in the server's own directory there).
std::size_t spooled_bodies(const std::filesystem::path& spool) {
    std::size_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(spool)) {
        n += e.path().filename().string().starts_with("gpupool-body-") ? 1 : 0;
    }
    return n;
}

TEST_CASE("hostile http: spooled uploads go to a file, removed afterwards, and are capped", "[security][net]") {
    net::ServerOptions o;
    o.max_file_bodies = 1;
    test::TempDir spool;
    o.spool_dir = spool.path();
    Guarded g(o);
    CHECK(upload(g, "file body") == 200);
    {
        std::lock_guard lock(g.mutex);
        CHECK(g.spooled_content == "file body");
        CHECK(g.spooled_path.starts_with(spool.path().string()));
    }
    // The server's own directory under spool_dir (util::ClaimedDir), and only its lock in it once
    // the request is done.
    CHECK(test::eventually([&] { return spooled_bodies(spool.path()) == 0; }));

    // One upload in progress holds the only slot: a second is told to come back, before its body.
    RawConnection slow(g.ioc, g.server->port());
    slow.send(headers_only("PUT", "/upload", 1'000'000) + "partial");
    REQUIRE(test::eventually([&] { return spooled_bodies(spool.path()) == 1; }));
    RawConnection second(g.ioc, g.server->port());
    second.send(headers_only("PUT", "/upload", 1'000'000));
    auto busy = second.read_response(3s);
    REQUIRE(busy);
    CHECK(busy->status == 503);
    CHECK(busy->headers["retry-after"] == "5");
    slow.close();
    // The abandoned upload's file is removed and its slot freed.
    CHECK(test::eventually([&] { return spooled_bodies(spool.path()) == 0; }));
    RawConnection third(g.ioc, g.server->port());
    third.send(raw_request("PUT", "/upload", "again"));
    auto r3 = third.read_response(3s);
    REQUIRE(r3);
    CHECK(r3->status == 200);
}

TEST_CASE("hostile http: what a server killed mid-upload left is removed when the next one starts", "[security][net]") {
    namespace fs = std::filesystem;
    test::TempDir spool;
    // What a server killed with SIGKILL during an upload leaves: its own directory, whose lock
    // nobody holds any more, with half a body in it (util::ClaimedDir).
    const fs::path dead = spool.path() / "owned-dead00";
    fs::create_directory(dead);
    std::ofstream(dead / ".lock").flush();
    std::ofstream(dead / "gpupool-body-Ab12Cd") << "half of someone's upload";
    net::ServerOptions o;
    o.spool_dir = spool.path();
    {
        Guarded g(o);
        CHECK_FALSE(fs::exists(dead));
        CHECK(spooled_bodies(spool.path()) == 0);
        CHECK(upload(g, "file body") == 200);
        std::lock_guard lock(g.mutex);
        CHECK(fs::path(g.spooled_path).parent_path().parent_path() == spool.path());
    }
    // A server that stops leaves nothing behind.
    CHECK(fs::is_empty(spool.path()));
}

TEST_CASE("hostile api: the coordinator refuses a large upload by its headers", "[security][service]") {
    Pool p;
    boost::asio::io_context ioc;
    const std::string sha(64, 'a');
    {
        RawConnection c(ioc, p.server.service->port());
        c.send(headers_only("PUT", "/v1/inputs/" + sha, 900'000'000));
        auto r = c.read_response(3s);
        REQUIRE(r);
        CHECK(r->status == 401);
    }
    {
        // A worker token is valid, but a worker does not upload inputs: refused before the body too.
        RawConnection c(ioc, p.server.service->port());
        c.send(headers_only("PUT", "/v1/inputs/" + sha, 900'000'000, "Authorization: Bearer " + p.worker + "\r\n"));
        auto r = c.read_response(3s);
        REQUIRE(r);
        CHECK(r->status == 403);
    }
    {
        // And a member cannot send a job-sized body to an admin route without being one.
        RawConnection c(ioc, p.server.service->port());
        c.send(headers_only("POST", "/v1/admin/teams", 500'000, "Authorization: Bearer garbage\r\n"));
        auto r = c.read_response(3s);
        REQUIRE(r);
        CHECK(r->status == 401);
    }
}

TEST_CASE("hostile api: deeply nested JSON is refused without building it", "[security][service]") {
    Pool p;
    auto m = p.server.client(p.member);
    auto r = m.request("POST", "/v1/jobs", std::string(8 * 1024 * 1024, '['));
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK_THAT(r->body, Catch::Contains("nests deeper than"));
    // Within the limit, a structure is fine (and wrong for other reasons).
    auto shallow = m.request("POST", "/v1/jobs", "{\"jobs\": [[[[1]]]]}");
    REQUIRE(shallow);
    CHECK(shallow->status == 400);
    CHECK_THAT(shallow->body, !Catch::Contains("nests deeper"));
    CHECK(coordinator::parse_json_object("[[[[1]]]]", 3).error().message.find("deeper than 3") != std::string::npos);
    CHECK(coordinator::parse_json_object("{\"a\": {\"b\": 1}}", 3));
}

TEST_CASE("hostile api: numbers are integers or refused, never truncated", "[security][service]") {
    Pool p;
    auto a = p.server.client(p.server.admin_token);
    auto grant = a.request("POST", "/v1/admin/grants", R"({"team": "fellows", "amount_micro": 1.9})");
    REQUIRE(grant);
    CHECK(grant->status == 400);
    CHECK(json::parse(grant->body)["field"] == "amount_micro");
    auto w = p.server.client(p.worker);
    auto hb = w.request("POST", "/v1/workers/heartbeat", R"({"running": [1.5]})");
    REQUIRE(hb);
    CHECK(hb->status == 400);
    CHECK(json::parse(hb->body)["field"] == "running[0]"); // the element, by its index
    auto label = a.request("POST", "/v1/admin/tokens",
                           json{{"role", "member"}, {"team", "fellows"}, {"label", std::string(300, 'l')}}.dump());
    REQUIRE(label);
    CHECK(label->status == 400);
    CHECK(json::parse(label->body)["field"] == "label");
}

TEST_CASE("hostile api: a submission of more than 10,000 jobs is refused by the server", "[security][service]") {
    Pool p;
    std::vector<recipe::JobSpec> jobs(10'001, spec("many", 10));
    auto m = p.server.client(p.member);
    auto r = m.request("POST", "/v1/jobs", json{{"source", "s"}, {"jobs", json::parse(recipe::to_json(jobs).dump())}}.dump());
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(json::parse(r->body)["field"] == "jobs");
}

TEST_CASE("hostile api: inputs belong to the team that uploaded them", "[security][service]") {
    Pool p;
    const std::string body = "x";
    const std::string sha = util::sha256_hex(body);
    auto fellows = p.server.client(p.member);
    REQUIRE(fellows.request("PUT", "/v1/inputs/" + sha, body)->status == 201);

    auto job_with = [&](const std::string& digest) {
        auto s = spec("with-inputs");
        s.inputs.archive = digest;
        return json{{"source", "t"}, {"jobs", json::parse(recipe::to_json(std::vector{s}).dump())}}.dump();
    };
    // The team that uploaded it can use it.
    CHECK(fellows.request("POST", "/v1/jobs", job_with(sha))->status == 201);
    // Another team naming the digest learns nothing more than for a digest nobody uploaded.
    auto others = p.server.client(p.other);
    auto stolen = others.request("POST", "/v1/jobs", job_with(sha));
    auto unknown = others.request("POST", "/v1/jobs", job_with(std::string(64, 'b')));
    REQUIRE(stolen);
    REQUIRE(unknown);
    CHECK(stolen->status == 400);
    CHECK(unknown->status == 400);
    auto strip = [](std::string text, const std::string& digest) {
        for (auto at = text.find(digest); at != std::string::npos; at = text.find(digest)) {
            text.replace(at, digest.size(), "D");
        }
        return text;
    };
    CHECK(strip(stolen->body, sha) == strip(unknown->body, std::string(64, 'b')));
    // An admin uploads for a named team only.
    auto a = p.server.client(p.server.admin_token);
    CHECK(a.request("PUT", "/v1/inputs/" + sha, body)->status == 400);
    CHECK(a.request("PUT", "/v1/inputs/" + sha + "?team=others", body)->status == 201);
    CHECK(others.request("POST", "/v1/jobs", job_with(sha))->status == 201);
}

TEST_CASE("hostile api: an enrollment token registers as many workers as it says, and a ban sticks",
          "[security][service]") {
    Pool p;
    auto a = p.server.client(p.server.admin_token);
    const std::string once =
        call(a, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "owners"}}, 201)["token"];
    auto e = p.server.client(once);
    call(e, "POST", "/v1/workers/register", {{"name", "one"}, {"inventory", inventory()}}, 201);
    auto again = e.request("POST", "/v1/workers/register", json{{"name", "two"}, {"inventory", inventory()}}.dump());
    REQUIRE(again);
    CHECK(again->status == 401);

    // A banned worker's owner cannot come back with the token it enrolled with.
    const std::string three =
        call(a, "POST", "/v1/admin/tokens", {{"role", "enroll"}, {"team", "owners"}, {"uses", 3}}, 201)["token"];
    auto e3 = p.server.client(three);
    auto w = call(e3, "POST", "/v1/workers/register", {{"name", "bad"}, {"inventory", inventory()}}, 201);
    call(a, "POST", "/v1/admin/workers/" + std::to_string(w["worker_id"].get<std::int64_t>()) + "/ban", json::object());
    auto back = e3.request("POST", "/v1/workers/register", json{{"name", "bad-again"}, {"inventory", inventory()}}.dump());
    REQUIRE(back);
    CHECK(back->status == 401);
    auto bad_uses = a.request("POST", "/v1/admin/tokens", R"({"role": "enroll", "team": "owners", "uses": 0})");
    REQUIRE(bad_uses);
    CHECK(bad_uses->status == 400);
    CHECK(json::parse(bad_uses->body)["field"] == "uses");
}

namespace {

// Runs `job_spec` on the pool's worker and writes 12 MiB of log, each MiB its own letter ('a' to
// 'l'); returns the job id and the log as a member reads it back, notice included.
std::pair<std::int64_t, std::string> write_12_mib_log(Pool& p, const recipe::JobSpec& job_spec) {
    const auto job = p.submit({job_spec})["jobs"][0].get<std::int64_t>();
    auto w = p.server.client(p.worker);
    call(w, "POST", "/v1/workers/heartbeat", {{"running", json::array()}});
    auto a = call(w, "POST", "/v1/workers/poll?wait_ms=3000", json::object())["assignments"];
    REQUIRE(a.size() == 1);
    const std::string attempt = std::to_string(a[0]["attempt"].get<std::int64_t>());
    call(w, "POST", "/v1/attempts/" + attempt + "/start", json::object());
    const std::int64_t chunk = 1024 * 1024;
    for (int i = 0; i < 12; ++i) {
        auto r = w.request("POST", "/v1/attempts/" + attempt + "/logs?offset=" + std::to_string(i * chunk),
                           std::string(static_cast<std::size_t>(chunk), static_cast<char>('a' + i)));
        REQUIRE(r);
        REQUIRE(r->status == 200);
    }
    auto m = p.server.client(p.member);
    std::string text;
    std::int64_t offset = 0;
    for (int reads = 0; reads < 20; ++reads) {
        auto r = call(m, "GET", "/v1/jobs/" + std::to_string(job) + "/logs?offset=" + std::to_string(offset));
        text += r["data"].get<std::string>();
        if (r["next_offset"].get<std::int64_t>() == offset) {
            break;
        }
        offset = r["next_offset"].get<std::int64_t>();
    }
    CHECK(offset == 12 * chunk); // offsets still count every byte the job wrote
    return {job, text};
}

std::string mib(char c) { return std::string(std::size_t{1024 * 1024}, c); }

// The log without its notice.
std::string without_notice(const std::string& text) {
    const auto notice_end = text.find("]\n");
    REQUIRE(notice_end != std::string::npos);
    return text.substr(0, std::size_t{1024 * 1024}) + text.substr(notice_end + 2);
}

} // namespace

TEST_CASE("hostile api: a job's log is capped, keeping its head and its tail, and says so", "[security][service]") {
    Pool p(30'000, 4 * 1024 * 1024); // the head is 1 MiB of it
    auto [job, text] = write_12_mib_log(p, spec("chatty"));
    // The first MiB ('a'), a notice, then the last 3 MiB ('j', 'k', 'l').
    REQUIRE(text.starts_with(mib('a') + "[gpupool: bytes 1048576 to 9437184 of this log were dropped"));
    CHECK(without_notice(text) == mib('a') + mib('j') + mib('k') + mib('l'));
}

TEST_CASE("hostile api: a recipe keeps more log within the pool's limit, and no more", "[security][service]") {
    Pool p(30'000, 4 * 1024 * 1024);
    auto longer = spec("verbose");
    longer.logs.max_size_mib = 6;
    auto [job, text] = write_12_mib_log(p, longer);
    REQUIRE(text.starts_with(mib('a') + "[gpupool: bytes 1048576 to 7340032 of this log were dropped"));
    CHECK(without_notice(text) == mib('a') + mib('h') + mib('i') + mib('j') + mib('k') + mib('l'));

    // Past the pool's limit (1 GiB by default) the submission is refused, naming the field.
    auto greedy = spec("greedy");
    greedy.logs.max_size_mib = 2048;
    auto m = p.server.client(p.member);
    auto r = call(m, "POST", "/v1/jobs",
                  {{"source", "t.toml"}, {"jobs", json::parse(recipe::to_json(std::vector{spec("fine"), greedy}).dump())}},
                  400);
    CHECK(r["field"] == "jobs[1].logs.max_size");
    CHECK_THAT(r["detail"].get<std::string>(), Catch::Contains("at most 1024 MiB"));
}

TEST_CASE("hostile api: a retried submission with the same idempotency key makes no duplicate",
          "[security][service]") {
    Pool p;
    auto m = p.server.client(p.member);
    const json body = {{"source", "t"},
                       {"idempotency_key", "submit-0123abcd"},
                       {"jobs", json::parse(recipe::to_json(std::vector{spec("once"), spec("twice")}).dump())}};
    auto first = call(m, "POST", "/v1/jobs", body, 201);
    auto again = call(m, "POST", "/v1/jobs", body, 201);
    CHECK(again["sweep_id"] == first["sweep_id"]);
    CHECK(again["jobs"] == first["jobs"]);
    CHECK(call(m, "GET", "/v1/jobs")["jobs"].size() == 2);
    // The key is the team's own: another team's same key is another submission.
    auto o = p.server.client(p.other);
    auto theirs = call(o, "POST", "/v1/jobs", body, 201);
    CHECK(theirs["sweep_id"] != first["sweep_id"]);
    json bad = body;
    bad["idempotency_key"] = "no spaces please";
    auto r = m.request("POST", "/v1/jobs", bad.dump());
    REQUIRE(r);
    CHECK(r->status == 400);
    CHECK(json::parse(r->body)["field"] == "idempotency_key");
}

} // namespace test_http_hostile
} // namespace
